"""A FLOWR head whose prior and class noise come from empirical Bayes."""

from sklearn.base import clone

__all__ = ["empirical_bayes_head"]


def empirical_bayes_head(template, Z, y, *, setting, frozen=True, prior_scale=None,
                         **params):
    """FLOWR's head with its prior and noise fitted to labelled embeddings.

    Parameters
    ----------
    template : CRPGaussianClassifier
        Supplies every other hyper-parameter; it is not changed.
    Z : ndarray of shape (n_samples, n_features)
        Embeddings of the training classes.
    y : ndarray of shape (n_samples,)
        Their labels.
    setting : {"small", "large"}
        ``"small"``: an unfitted head whose parameters are the estimates (it
        learns every task's classes from them); ``"large"``: the head fitted
        on ``Z, y``.
    frozen : bool, default=True
        Large context: keep the training classes fixed online.
    prior_scale : float or None, default=None
        Overrides the template's ``prior_scale``; ``None`` keeps it.
    **params
        Overrides of the template's parameters, e.g. ``b="auto"``.

    Returns
    -------
    head : CRPGaussianClassifier

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.head import empirical_bayes_head
    >>> rng = np.random.default_rng(0)
    >>> Z, y = rng.normal(size=(40, 3)), np.repeat([0, 1, 2, 3], 10)
    >>> head = empirical_bayes_head(CRPGaussianClassifier(), Z, y, setting="small")
    >>> head.prior_scale, isinstance(head.sigma, float)
    (1.0, True)
    """
    if prior_scale is not None:
        params["prior_scale"] = prior_scale
    empirical = clone(template).set_params(
        **{"prior_mean": "auto", "prior_var": "auto", "sigma": "auto", **params}
    ).fit(Z, y)
    if setting == "large":
        return empirical.freeze_classes(frozen)
    return empirical.forget_classes()
