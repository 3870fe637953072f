"""After training: the CRP-Gaussian head on the final encoder.

:func:`build_heads` turns the trained module and the user's head template into
the online heads: the learned prior, ``b`` and ``sigma`` fill the template's
``"auto"`` values (with ``covariance="full"`` the prior and noise come from
empirical Bayes on the final embeddings instead), and the training classes
become known classes (:func:`known_class_table`). Only this step reads the
head's parameters, so a grid over them reuses the trained encoder.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from .._core import condition_on
from ..protocol import calibrate_novelty
from ._modules import FLOWRMetaModule

__all__ = ["build_heads", "check_head_template", "known_class_table"]


def known_class_table(meta: FLOWRMetaModule, Z, y_index, n_classes: int, *,
                      noise: float, known_table: str = "refit"):
    """Means and variances of every training class for the large context.

    Every class is conditioned from the learned prior on its embeddings, as
    the head learns any class online; with ``known_table="learned"`` the
    classes of the meta-trained table keep its ``(q_n, lam_n)`` instead.

    Parameters
    ----------
    meta : FLOWRMetaModule
        Meta-trained; ``known_classes_`` names the rows of its table.
    Z : ndarray of shape (n_samples, embedding_dim)
        Training embeddings under the final encoder.
    y_index : ndarray of shape (n_samples,)
    n_classes : int
    noise : float
        Class-noise variance of the conditioning (the head's ``sigma``).
    known_table : {"refit", "learned"}, default="refit"

    Returns
    -------
    means : ndarray of shape (n_classes, embedding_dim)
        Posterior means ``q_n / lam_n``.
    variances : ndarray of shape (n_classes,)
        Posterior variances ``1 / lam_n``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> meta = FLOWRMetaModule(MLPEncoder(8, embedding_dim=2), prior_var=1.0)
    >>> means, variances = known_class_table(
    ...     meta, np.array([[2.0, 2.0], [4.0, 4.0]]), np.array([0, 0]), 1,
    ...     noise=1.0)
    >>> means, variances  # (0 + 6) / (1 + 2), 1 / (1 + 2)
    (array([[2., 2.]]), array([0.33333333]))
    """
    head = meta.head_kwargs()
    prior_var = np.atleast_1d(head["prior_var"])[:1]
    onehot = np.eye(n_classes)[y_index]
    nat_mean, precision = condition_on(head["prior_mean"] / prior_var,
                                       1.0 / prior_var, Z, onehot, noise)
    if meta.n_known and known_table == "learned":
        rows = meta.known_classes_
        nat_mean[rows] = meta.known_nat_mean.detach().cpu().double().numpy()
        precision[rows] = np.exp(
            meta.known_log_precision.detach().cpu().double().numpy())
    return nat_mean / precision, 1.0 / precision[:, 0]


def check_head_template(template, meta) -> None:
    """Fail before training on a head template that :func:`build_heads`
    could not fill from the stage ``meta`` (a ``MetaTraining`` or None).

    Raises
    ------
    ValueError
        The isotropic head (whose prior and noise are meta-learned) with a
        ``prior_scale`` or ``noise_shrinkage`` meant for estimated values, or
        ``meta.known_table="learned"`` with a head that re-estimates the table.

    Examples
    --------
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> check_head_template(CRPGaussianClassifier(prior_scale=2.0), None)
    Traceback (most recent call last):
    ...
    ValueError: head__prior_scale=2.0 scales an estimated prior variance; ...
    """
    own = template.get_params(deep=False)
    if own["covariance"] == "isotropic":
        if _is_auto(own["prior_var"]) and own["prior_scale"] != 1.0:
            raise ValueError(
                f"head__prior_scale={own['prior_scale']} scales an estimated "
                "prior variance; the isotropic head's prior is meta-learned. "
                "Use head__covariance='full' or head__prior_scale=1.0.")
        if _is_auto(own["sigma"]) and own["noise_shrinkage"] != 0.0:
            raise ValueError(
                f"head__noise_shrinkage={own['noise_shrinkage']} shrinks an "
                "estimated noise covariance; the isotropic head's noise is "
                "the meta-learned sigma * I. Use head__covariance='full' or "
                "head__noise_shrinkage=0.0.")
    elif meta is not None and meta.known_table == "learned":
        raise ValueError(
            "meta__known_table='learned' keeps the meta-trained isotropic class "
            f"table, which the head__covariance={own['covariance']!r} head "
            "replaces by empirical Bayes; use meta__known_table='refit', or "
            "head__covariance='isotropic' (the paper's head) to keep the table.")


def build_heads(template, meta: FLOWRMetaModule, Z, y_index, labels, *,
                setting: str, update_known: bool = False,
                known_table: str = "refit", calibrate: bool = True,
                random_state=None, verbose: int = 0):
    """The online heads after training: the prior alone, and the fitted one.

    The template's ``"auto"`` values are filled from training: ``b`` is the
    meta-learned concentration; with ``covariance="isotropic"`` the prior
    ``(mu0, s0)`` and ``sigma`` are the meta-learned ones, with
    ``covariance="full"`` they come from empirical Bayes on the final
    embeddings ``Z``. Values the template gives explicitly are used as given.
    The fitted head knows every training class (conditioned from the prior on
    its embeddings) in both settings.

    Parameters
    ----------
    template : CRPGaussianClassifier
        Unfitted; its parameters are the head's; not changed.
    meta : FLOWRMetaModule
        Trained, in evaluation mode.
    Z : ndarray of shape (n_samples, embedding_dim)
        Training embeddings under the final encoder.
    y_index : ndarray of shape (n_samples,)
    labels : ndarray of shape (n_classes,)
        The class labels of ``y_index``.
    setting : {"small", "large"}
        Which head the novelty map is fitted on: small-context tasks start
        from the prior head, large-context ones from the fitted head.
    update_known : bool, default=False
        Let online labels update the training classes (the paper keeps them
        fixed).
    known_table : {"refit", "learned"}, default="refit"
        Isotropic head: condition every training class on ``Z``, or keep the
        meta-learned table for the classes it holds.
    calibrate : bool, default=True
        Fit the Platt map of P(novel) on tasks of the training classes
        (:func:`~sklearn_flowr.protocol.calibrate_novelty`) and set it on both
        heads.
    random_state : int or None, default=None
        Seeds the calibration tasks.
    verbose : int, default=0
        Above 0, a progress bar over the calibration tasks.

    Returns
    -------
    prior_head : CRPGaussianClassifier
        Unfitted, carrying the prior: where a small-context task starts.
    fitted_head : CRPGaussianClassifier
        Fitted on the training classes.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> meta = FLOWRMetaModule(MLPEncoder(8, embedding_dim=2), b=2.0)
    >>> meta.known_classes_ = np.arange(0)
    >>> Z = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.4]])
    >>> prior, fitted = build_heads(CRPGaussianClassifier(), meta, Z,
    ...                             np.array([0, 0, 1, 1]), np.array([3, 7]),
    ...                             setting="large", calibrate=False)
    >>> fitted.classes_, round(fitted.b_, 6), prior.__sklearn_is_fitted__()
    (array([3, 7]), 2.0, False)
    """
    learned = meta.head_kwargs()
    own = template.get_params(deep=False)
    full = own.get("covariance") == "full"
    fill = {name: value for name, value in learned.items()
            if _is_auto(own.get(name)) and not (full and name != "b")}
    head = clone(template).set_params(**fill)
    if full:
        fitted = head.fit(Z, labels[y_index])
    else:
        means, variances = known_class_table(meta, Z, y_index, labels.shape[0],
                                             noise=float(head.sigma),
                                             known_table=known_table)
        fitted = head.fit_class_embeddings(labels, means, variances)
    fitted.freeze_classes(not update_known)
    # The fitted values already carry prior_scale and noise_shrinkage.
    prior = clone(fitted).set_params(
        prior_mean=fitted.prior_mean_, prior_var=fitted.prior_var_,
        b=fitted.b_, sigma=fitted.sigma_, prior_scale=1.0, noise_shrinkage=0.0)
    if calibrate:
        # Tasks of the training classes on the final embedding (the large
        # context refits a clone with some classes held out as novel).
        if verbose:
            print("Calibrating P(novel) on open-world tasks of the training "
                  "classes (calibration='train') ...", flush=True)
        fitted_map = calibrate_novelty(prior if setting == "small" else fitted, Z,
                                       labels[y_index], setting=setting,
                                       random_state=random_state,
                                       verbose=verbose)
        novelty_map = (fitted_map.slope, fitted_map.intercept)
        prior.set_params(novelty_calibration=novelty_map)
        fitted.set_params(novelty_calibration=novelty_map)
    return prior, fitted


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"
