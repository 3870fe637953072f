"""Stage 4 of FLOWR's training: the CRP-Gaussian head on the final encoder.

:func:`build_head` turns the meta-trained module into the online head: the
learned prior, ``b`` and ``sigma`` on a head of the configuration's
hyper-parameters; in the large context the training classes become its
known-known classes (:func:`known_class_table`); with
``covariance="full"`` the prior and noise come from empirical Bayes on the
final embeddings instead.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from .._core import condition_on
from .._empirical_head import empirical_bayes_head
from ..protocol import calibrate_novelty
from ._config import FLOWRConfig
from ._heads import FLOWRMetaModule

__all__ = ["build_head", "known_class_table"]


def known_class_table(meta: FLOWRMetaModule, Z, y_index, n_classes: int, *,
                      sigma: float, known_table: str = "refit"):
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
    sigma : float
        Class noise of the conditioning.
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
    ...     sigma=1.0)
    >>> means, variances  # (0 + 6) / (1 + 2), 1 / (1 + 2)
    (array([[2., 2.]]), array([0.33333333]))
    """
    head = meta.head_kwargs()
    prior_var = np.atleast_1d(head["prior_var"])[:1]
    onehot = np.eye(n_classes)[y_index]
    nat_mean, precision = condition_on(head["prior_mean"] / prior_var,
                                       1.0 / prior_var, Z, onehot, sigma)
    if meta.n_known and known_table == "learned":
        rows = meta.known_classes_
        nat_mean[rows] = meta.known_nat_mean.detach().cpu().double().numpy()
        precision[rows] = np.exp(
            meta.known_log_precision.detach().cpu().double().numpy())
    return nat_mean / precision, 1.0 / precision[:, 0]


def build_head(template, meta: FLOWRMetaModule, Z, y_index, labels,
               config: FLOWRConfig, *, random_state=None):
    """The online head after meta-training.

    Parameters
    ----------
    template : CRPGaussianClassifier
        Unfitted, with the configuration's head parameters
        (``config.head_params()``); not changed.
    meta : FLOWRMetaModule
        Meta-trained, in evaluation mode.
    Z : ndarray of shape (n_samples, embedding_dim)
        Training embeddings under the final encoder (read in the large
        context, with ``covariance="full"`` and with ``calibrate_novelty``).
    y_index : ndarray of shape (n_samples,)
    labels : ndarray of shape (n_classes,)
        The class labels of ``y_index``.
    config : FLOWRConfig
    random_state : int or None, default=None
        Seeds the calibration tasks of ``config.calibrate_novelty``.

    Returns
    -------
    CRPGaussianClassifier
        Small context, isotropic: unfitted, with the learned prior. Large
        context: fitted on the training classes, kept fixed online unless
        ``config.update_known``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> from sklearn_flowr.encoders import MLPEncoder
    >>> config = FLOWRConfig(setting="large")
    >>> meta = FLOWRMetaModule(MLPEncoder(8, embedding_dim=2), b=2.0)
    >>> meta.known_classes_ = np.arange(0)
    >>> Z = np.array([[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.4]])
    >>> head = build_head(CRPGaussianClassifier(**config.head_params()), meta,
    ...                   Z, np.array([0, 0, 1, 1]), np.array([3, 7]), config)
    >>> head.classes_, round(head.b, 6)
    (array([3, 7]), 2.0)
    """
    head = clone(template).set_params(**meta.head_kwargs())
    if config.covariance == "full":
        head = empirical_bayes_head(head, Z, labels[y_index],
                                    setting=config.setting,
                                    frozen=not config.update_known,
                                    prior_scale=config.prior_scale,
                                    covariance="full",
                                    noise_shrinkage=config.noise_shrinkage)
    elif config.setting == "large":
        means, variances = known_class_table(meta, Z, y_index, labels.shape[0],
                                             sigma=config.sigma,
                                             known_table=config.known_table)
        head.fit_class_embeddings(labels, means, variances,
                                  frozen=not config.update_known)
    if config.calibrate_novelty and config.calibration_cv is None:
        # Tasks of the training classes on the final embedding (the large
        # context refits a clone with some classes held out as novel).
        fitted = calibrate_novelty(head, Z, labels[y_index], setting=config.setting,
                                   random_state=random_state)
        head.set_params(novelty_calibration=(fitted.slope, fitted.intercept))
    return head
