"""The novel label "auto" chooses when y uses -1: said where it happens."""

import warnings

import numpy as np
import pytest
import torch

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier

X = np.random.default_rng(0).normal(size=(30, 4)) + np.repeat(np.eye(3, 4), 10, 0)
# (without novelty_alpha: 30 rows give too few calibration scores, which warns)
FAST_FLOWR = dict(backbone=torch.nn.Identity(), pretrain=None, meta=None,
                  embedding_dim=None, verbose=0,
                  head=CRPGaussianClassifier(covariance="full", novelty_alpha=None))


@pytest.mark.parametrize("fit", [
    lambda y: CRPGaussianClassifier().fit(X, y),
    # (without novelty_alpha: an unfitted head's partial_fit warns of it)
    lambda y: CRPGaussianClassifier(novelty_alpha=None).partial_fit(X, y),
    lambda y: FLOWRClassifier(**FAST_FLOWR).fit(X, y),
], ids=["head.fit", "head.partial_fit", "FLOWRClassifier.fit"])
def test_novel_label_below_a_users_minus_one_warns_at_the_users_call(fit):
    """Check a fit on labels that use -1 warns that the novel label is -2,
    how to choose it, from the user's line; labels 0.. fit silently."""
    y = np.repeat([-1, 0, 1], 10)
    with pytest.warns(UserWarning, match=r"novel class -2, not -1\. Pass "
                      r"novel_label=") as record:
        model = fit(y)
    assert model.novel_label_ == -2
    assert {w.filename for w in record if "novel_label=" in str(w.message)} == {
        __file__}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert fit(y + 1).novel_label_ == -1
        assert CRPGaussianClassifier(novel_label=-2).fit(X, y).novel_label_ == -2
