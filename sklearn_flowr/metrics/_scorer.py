"""A scorer for open-world cross-validation (novel = label unknown to the model)."""

import numpy as np

from ..validation import novel_rows
from ._h_measure import h_measure


def novelty_scorer(estimator, X, y) -> float:
    """H-measure of an open-world classifier's novelty probability on ``(X, y)``.

    A row is novel when its label is not in ``estimator.classes_`` (held out
    by :class:`~sklearn_flowr.model_selection.OpenWorldSplit`); pass it as
    ``scoring=novelty_scorer`` to ``GridSearchCV`` or ``cross_val_score``.

    Parameters
    ----------
    estimator : fitted classifier
        Has ``classes_`` and a ``predict_proba`` whose last column is the
        novel class, such as :class:`~sklearn_flowr.CRPGaussianClassifier`.
    X : array-like of shape (n_samples, n_features)
        Test rows.
    y : array-like of shape (n_samples,)
        Their true labels; some must be in ``classes_`` and some not.

    Returns
    -------
    score : float
        The H-measure with the default Beta(2, 2) cost distribution.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.metrics import novelty_scorer
    >>> rng = np.random.default_rng(0)
    >>> centres = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    >>> y = np.repeat([0, 1, 2], 30)
    >>> X = centres[y] + rng.normal(size=(90, 2))
    >>> head = CRPGaussianClassifier().fit(X[y < 2], y[y < 2])
    >>> 0.0 <= novelty_scorer(head, X, y) <= 1.0
    True
    """
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise ValueError(
            f"{type(estimator).__name__} has no classes_; novelty_scorer needs a "
            "fitted classifier to tell known labels from novel ones."
        )
    is_novel = novel_rows(y, classes)
    proba = np.asarray(estimator.predict_proba(X))
    n_columns = len(classes) + 1
    if proba.ndim != 2 or proba.shape[1] != n_columns:
        raise ValueError(
            f"predict_proba returned shape {proba.shape}; novelty_scorer expects "
            f"{n_columns} columns (len(classes_) known classes, then the novel "
            "class last)."
        )
    return h_measure(is_novel.astype(np.int8), proba[:, -1])
