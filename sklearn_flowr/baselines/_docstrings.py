"""Numpydoc text the baselines share, filled into ``%(name)s`` fields."""

from .._core import FLOWR_REFERENCE

_NOVEL_LABEL = """novel_label : object, default="auto"
        Label of the novel class: ``"novel"`` for string labels, -1 (or one
        below the smallest label) for numeric ones. It may not occur in ``y``."""
_CLASSES = """classes_ : ndarray of shape (n_classes,)
        Known labels: sorted in ``fit``, new ones appended in order of arrival.
    n_classes_ : int
        Number of known classes."""
_FITTED = """novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names)."""
_MEANS = """class_count_ : ndarray of shape (n_classes,)
        Rows each class was learned from.
    class_mean_ : ndarray of shape (n_classes, n_features)
        Class means ``mu_n``."""

_SHARED = {
    "novel_label": _NOVEL_LABEL,
    # threshold=None with novel_label: the anchors' and NCM's parameters.
    "params": """threshold : float >= 0 or None, default=None
        Novelty score at or above which ``predict`` and ``open_world_step``
        declare a row novel; None never does (the protocol thresholds the
        scores itself).
    """ + _NOVEL_LABEL,
    "class_means": _MEANS,
    "attrs": f"{_CLASSES}\n    {_FITTED}",
    "prototype_attrs": f"{_CLASSES}\n    {_MEANS}\n    {_FITTED}",
    "fitted_": _FITTED,
    "classes_": _CLASSES,
    "willes": FLOWR_REFERENCE,
}


def fill_doc(obj):
    """Fill the ``%(name)s`` fields of ``obj``'s docstring from ``_SHARED``."""
    obj.__doc__ %= _SHARED
    return obj
