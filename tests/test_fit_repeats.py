"""No repeated work in FLOWRClassifier.fit: the training rows pass through each
state of the encoder once, and the fitted head's class table is built once.

Counted through public hooks: a forward hook on the encoder (given as a module,
as ``backbone`` takes one) records the rows each evaluation-mode forward pass
embeds, keyed by a fingerprint of the encoder's weights at that moment; the
fitted head's table is counted by wrapping its class's ``fit`` and
``fit_class_embeddings``.
"""

import hashlib
from collections import Counter

import numpy as np
import pytest
from sklearn.base import clone

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.encoders import make_backbone
from sklearn_flowr.training import MetaTraining, SupE, SupFC

BATCH = 16
# No novelty map (it reads the final embedding, never the encoder): shorter.
# No rows held out for predict's decision: the encoder trains on every row.
TINY = dict(embedding_dim=8, verbose=0, random_state=0, reuse_encoder=False,
            calibration=None, pretrain=SupE(epochs=1, batch_size=BATCH),
            head=CRPGaussianClassifier(covariance="full", novelty_alpha=None),
            meta=MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3,
                              n_unknown=1))


def _weights(module):
    """A fingerprint of every tensor of ``module`` (parameters and buffers)."""
    digest = hashlib.sha1()
    for tensor in module.state_dict().values():
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


def _counting_encoder(rows_per_state):
    """A conv4 encoder (``backbone="conv4"``'s) that adds, on every forward
    pass in evaluation mode (an embedding, not a training step), the rows it
    embeds to ``rows_per_state[fingerprint of its weights]``."""
    encoder = make_backbone("conv4", in_channels=1, input_size=(8, 8),
                            embedding_dim=TINY["embedding_dim"])

    def count(module, args, output):
        if not module.training:
            rows_per_state[_weights(module)] += int(args[0].shape[0])

    encoder.register_forward_hook(count)
    return encoder


def _rows(digits):
    """Every third row of digits 0-4 (300 rows)."""
    X, y = digits
    keep = np.flatnonzero(y < 5)[::3]
    return X[keep], y[keep]


def _fit(digits, **params):
    X, y = _rows(digits)
    rows_per_state = Counter()
    model = clone(FLOWRClassifier(**TINY)).set_params(
        backbone=_counting_encoder(rows_per_state), **params)
    Z = model.fit_transform(X, y)
    return model, Z, rows_per_state, X.shape[0]


@pytest.mark.parametrize("params", [
    {},  # the default stages: Sup-E, the class table of the embedding
    {"pretrain": SupFC(epochs=1, batch_size=BATCH)},
    {"pretrain": None},
    {"meta__class_stats": "learned"},
    {"setting": "large"},
], ids=["sup-e", "sup-fc", "no-pretraining", "learned-stats", "large"])
def test_fit_embeds_the_training_rows_once_per_encoder_state(digits, params):
    """Check no state of the encoder embeds the training rows twice: the class
    table and the noise-scale matching share the pre-trained embedding, the
    final embedding is computed once (``fit_transform`` returns it), and the
    only other pass is the linearity probe of the rescaled encoder, on at
    most one batch of ``4 * batch_size`` rows."""
    model, Z, rows_per_state, n_rows = _fit(digits, **params)
    assert max(rows_per_state.values()) <= n_rows, rows_per_state
    # Embeddings go 4 batches at a time (a batch is 64 rows without a
    # pre-training stage to take it from).
    probe = min(n_rows, 4 * getattr(model.pretrain, "batch_size", 64))
    # Pre-trained embedding (class table and scale), probe, final embedding.
    assert sum(rows_per_state.values()) <= 2 * n_rows + probe, rows_per_state
    full_passes = [rows for rows in rows_per_state.values() if rows == n_rows]
    assert len(full_passes) == 2, rows_per_state
    # The final embedding is the one fit_transform returns, under the final
    # encoder (whose state saw the training rows once).
    np.testing.assert_allclose(Z, model.transform(_rows(digits)[0]),
                               rtol=1e-5, atol=1e-5)


def test_fit_builds_the_head_class_table_once(digits, monkeypatch):
    """Check fit builds the fitted head's class table (``fit`` or
    ``fit_class_embeddings`` on the training classes) once, for the full and
    the isotropic head, and that the prior head is a clone carrying no table.
    (The novelty map's calibration tasks, off here, learn their own classes
    from the prior.)"""
    calls = Counter()
    for name in ("fit", "fit_class_embeddings"):
        original = getattr(CRPGaussianClassifier, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(CRPGaussianClassifier, name, counted)
    for head in (CRPGaussianClassifier(covariance="full", novelty_alpha=None),
                 CRPGaussianClassifier(covariance="isotropic", novelty_alpha=None)):
        calls.clear()
        model, _, _, _ = _fit(digits, head=head, setting="large")
        assert sum(calls.values()) == 1, calls
        assert not model.prior_head_.__sklearn_is_fitted__()
