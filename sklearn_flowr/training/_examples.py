"""The fitted model the docstring examples of ``FLOWRClassifier`` share, fitted
once per context and process; each call hands out a copy.
"""

import copy
import functools

__all__ = ["flowr_example"]


@functools.cache
def _fitted(setting):
    from sklearn.datasets import load_digits

    from .. import FLOWRClassifier
    from . import MetaTraining, SupE

    X, y = load_digits(return_X_y=True)
    X = X / 16.0  # 64 pixel features, for the "mlp" backbone
    clf = FLOWRClassifier(backbone="mlp", setting=setting, embedding_dim=4,
                          pretrain=SupE(epochs=1),
                          meta=MetaTraining(epochs=1, episodes_per_epoch=2,
                                            n_way=3, n_unknown=1),
                          verbose=0, random_state=0)
    return clf.fit(X[y < 5], y[y < 5]), X, y


def flowr_example(setting="large"):
    """A copy of the class example's fitted model (an MLP on scikit-learn's
    digits, fitted on digits 0-4), the digits' pixels in [0, 1] and labels."""
    clf, X, y = _fitted(setting)
    return copy.deepcopy(clf), X, y
