"""The Pitman-Yor (two-parameter CRP) class prior: ``p(n) = (c_n - a) / (k + b)``,
``p(novel) = (b + a N) / (k + b)`` for counts ``c_n > a``, ``k = sum(c_n)``."""

import math
from numbers import Real

from ._namespace import get_namespace


def _like(value, like, xp):
    """``value`` as an array of ``like``'s dtype on its device."""
    device = getattr(like, "device", None)
    if isinstance(value, Real):
        return xp.full((), value, dtype=like.dtype, device=device)
    return xp.asarray(value, dtype=like.dtype, device=device)


def crp_log_numerators(counts, n_classes, *, a, b, class_prior="crp"):
    """``log(c_n - a)`` (..., n_classes) and ``log(b + a N)`` (...,); zeros for
    ``class_prior="uniform"`` (a tensor ``b`` keeps its gradient)."""
    xp = get_namespace(counts)
    n_classes = _like(n_classes, counts, xp)
    if class_prior == "uniform":
        return xp.zeros_like(counts), xp.zeros_like(n_classes)
    log_known = xp.log(counts - a)
    # With nothing instantiated the novel class holds all the mass whatever
    # b is; b + a * 0 would be undefined for b <= 0.
    empty = n_classes == 0
    log_novel = xp.log(xp.where(empty, xp.ones_like(n_classes), b + a * n_classes))
    return log_known, log_novel


def crp_log_numerator(count, *, a, class_prior="crp"):
    """:func:`crp_log_numerators` of one float count; ``-inf`` for a count <= ``a``."""
    if not count > a:
        return -math.inf
    return 0.0 if class_prior == "uniform" else math.log(count - a)


def crp_log_normaliser(total, n_classes, *, b, class_prior="crp"):
    """``-log(k + b)`` for the CRP, ``-log(N + 1)`` for the uniform prior."""
    xp = get_namespace(total)
    n_classes = _like(n_classes, total, xp)
    if class_prior == "uniform":
        return -xp.log(n_classes + 1.0)
    empty = n_classes == 0
    return -xp.log(xp.where(empty, xp.ones_like(total), total + b))


def crp_log_prior(counts, total, n_classes, *, a, b, class_prior="crp"):
    """Log prior masses ``(log_known (..., n_classes), log_novel (...,))``,
    summing to one, for counts, their ``total`` ``k`` and ``N`` classes."""
    xp = get_namespace(counts)
    total = _like(total, counts, xp)
    log_known, log_novel = crp_log_numerators(
        counts, n_classes, a=a, b=b, class_prior=class_prior
    )
    log_norm = crp_log_normaliser(total, n_classes, b=b, class_prior=class_prior)
    return log_known + log_norm[..., None], log_novel + log_norm


def concentration_from_raw(beta_raw, a):
    """Map an unconstrained parameter to ``b = -a + softplus(beta_raw) > -a``."""
    xp = get_namespace(beta_raw)
    return xp.logaddexp(xp.zeros_like(beta_raw), beta_raw) - a  # softplus


def raw_from_concentration(b, a):
    """Inverse of :func:`concentration_from_raw` for a float ``b > -a``."""
    shifted = float(b) + float(a)
    if shifted <= 0:
        raise ValueError(f"The concentration b={b} must be greater than -a={-a}.")
    # inverse softplus: log(exp(y) - 1) = y + log(1 - exp(-y))
    return shifted + math.log(-math.expm1(-shifted))
