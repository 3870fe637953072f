"""Numpydoc text the baselines share, filled into ``%(name)s`` fields."""

_SHARED = {
    "novel_label": """novel_label : object, default="auto"
        Label returned for the novel class: ``"novel"`` for string labels, -1
        (or one below the smallest label) for numeric ones. It may not occur
        in ``y``.""",
    "threshold": """threshold : float or None, default=None
        Novelty score at or beyond which :meth:`predict` and
        ``open_world_step``'s ``y_pred`` declare a row novel. ``None`` never
        does while a class exists (the evaluation protocol thresholds the
        scores itself).""",
    "classes_": """classes_ : ndarray of shape (n_classes,)
        Known labels: sorted in ``fit``, new ones appended in order of arrival.
    n_classes_ : int
        Number of known classes.""",
    "class_means": """class_count_ : ndarray of shape (n_classes,)
        Rows each class was learned from.
    class_mean_ : ndarray of shape (n_classes, n_features)
        Class means ``mu_n``.""",
    "fitted_": """novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names).""",
    "willes": """J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022""",
    "prototype_attrs": """%(classes_)s
    %(class_means)s
    %(fitted_)s""",
    "anchor_notes": """``novelty_score`` and ``open_world_step``'s ``p_novel``
    are the score above (higher = more novel), not a probability:
    :class:`~sklearn_flowr.calibration.NoveltyCalibratedClassifier` maps it
    to P(novel). ``partial_fit`` in any chunks learns the state ``fit``
    learns at once; the user guide (Baselines) says how, and what a stream
    costs.""",
    "X": """X : array-like of shape (n_samples, n_features)
            Embeddings.""",
}

_FILLED = {key: text % _SHARED if "%(" in text else text
           for key, text in _SHARED.items()}


def fill_doc(obj):
    """Fill the ``%(name)s`` fields of ``obj``'s docstring from ``_SHARED``."""
    if obj.__doc__:
        obj.__doc__ = obj.__doc__ % _FILLED
    return obj
