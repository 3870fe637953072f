"""benchmarks/frozen_backbone_decision.py: end to end with a small network in
place of EfficientNet-Lite0."""

import pytest
from torch import nn

from sklearn_flowr.encoders import PretrainedEncoder


@pytest.fixture(scope="module")
def script(load_benchmark_script):
    return load_benchmark_script("frozen_backbone_decision.py")


def test_prints_each_rule_with_its_scores(script, monkeypatch, capsys):
    """Check a line per rows-a-digit and rule: the conformal rule with the
    held-out scores of a frozen fit (150 rows or half of each digit's: 50 of
    5 x 20 images), the argmax rule with none, shares in [0, 1]."""
    monkeypatch.setattr(script, "encoder", lambda: PretrainedEncoder(
        nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU()), 16))
    script.main(["--rows", "20", "--draws", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    conformal, argmax = (line.replace(",", "").split() for line in lines)
    assert conformal[4:8] == ["conformal", "alpha", "0.05:", "50"]
    assert argmax[4:6] == ["argmax:", "0"]
    for words in (conformal, argmax):
        false_novel, caught = float(words[-4]), float(words[-1])
        assert 0.0 <= false_novel <= 1.0 and 0.0 <= caught <= 1.0
