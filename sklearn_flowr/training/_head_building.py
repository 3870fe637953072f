"""After training: the CRP-Gaussian heads on the final encoder. Only this step
reads the head's parameters, so a grid over them reuses the trained encoder."""

from __future__ import annotations

import copy

import numpy as np
from sklearn.base import clone

from .._core import condition_on
from ..head import CRPGaussianClassifier, WhitenedCRPClassifier
from ._modules import FLOWRMetaModule

__all__ = ["build_heads", "check_head_template", "head_params", "known_class_table",
           "set_head_params"]


def known_class_table(meta: FLOWRMetaModule, Z, y_index, n_classes: int, *,
                      noise: float, known_table: str = "refit"):
    """Means and variances of every training class conditioned from the learned
    prior on ``Z`` (``known_table="learned"``: the meta-trained table's)."""
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
    """Fail before training on a head template :func:`build_heads` could not fill
    from the stage ``meta``."""
    if isinstance(template, WhitenedCRPClassifier):
        return  # its whitener estimates the prior and noise on the embeddings
    if not isinstance(template, CRPGaussianClassifier):
        raise TypeError(
            "head must be a CRPGaussianClassifier or a WhitenedCRPClassifier, "
            f"whose prior and noise training fills; got {type(template).__name__}"
            ". For another head, fit it on FLOWRClassifier.transform(X).")
    own = template.get_params(deep=False)
    if own["covariance"] == "full" and own["noise_shrinkage"] == "dof":
        raise ValueError(
            "head__noise_shrinkage='dof' is the whitener's shrinkage "
            "(head__covariance='whitened'); the full head takes a float or 'auto'.")
    if own["covariance"] == "isotropic":
        if _is_auto(own["prior_var"]) and own["prior_scale"] != 1.0:
            raise ValueError(
                f"head__prior_scale={own['prior_scale']} scales an estimated "
                "prior variance; the isotropic head's prior is meta-learned. "
                "Use head__covariance='full' or head__prior_scale=1.0.")
        if _is_auto(own["sigma"]) and own["noise_shrinkage"] not in ("auto", 0.0):
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
                update_known: bool = False, known_table: str = "refit"):
    """The prior head (no classes) and the head fitted on embeddings ``Z``: clones
    of ``template``, its ``"auto"`` values from training (a whitened head: fit;
    its prior head keeps the whitener)."""
    if isinstance(template, WhitenedCRPClassifier):
        fitted = clone(template).fit(Z, labels[y_index])
        fitted.freeze_classes(not update_known)
        return copy.deepcopy(fitted).forget_classes(), fitted
    learned = meta.head_kwargs()
    own = template.get_params(deep=False)
    covariance = own.get("covariance")
    # Training fills the isotropic head's "auto" values, the full head's b.
    names = {"isotropic": learned, "full": ("b",)}.get(covariance, ())
    fill = {name: learned[name] for name in names if _is_auto(own.get(name))}
    head = clone(template).set_params(**fill)
    if covariance != "isotropic":
        fitted = head.fit(Z, labels[y_index])
    else:
        means, variances = known_class_table(meta, Z, y_index, labels.shape[0],
                                             noise=float(head.sigma),
                                             known_table=known_table)
        fitted = head.fit_class_embeddings(labels, means, variances)
    fitted.freeze_classes(not update_known)
    return copy.deepcopy(fitted).forget_classes(), fitted


def head_params(template) -> dict:
    """The CRP-Gaussian head's own parameters in ``template`` (a
    WhitenedCRPClassifier's: its ``head__<name>`` ones, unprefixed)."""
    if not isinstance(template, WhitenedCRPClassifier):
        return template.get_params(deep=False)
    return {key[6:]: value for key, value in template.get_params().items()
            if key.startswith("head__") and "__" not in key[6:]}


def set_head_params(template, **params):
    """Set the CRP-Gaussian head's own parameters in ``template``; returns it."""
    if isinstance(template, WhitenedCRPClassifier):
        params = {f"head__{key}": value for key, value in params.items()}
    return template.set_params(**params)


def _is_auto(value) -> bool:
    return isinstance(value, str) and value == "auto"
