"""The Bayesian maths of FLOWR, written once against the array API: NumPy for
the head, torch (autograd, GPU) for training (docs/design.rst, section 1).
"""

from ._covariance import resolve_covariances
from ._crp import (
    concentration_from_raw,
    crp_log_normaliser,
    crp_log_numerator,
    crp_log_numerators,
    crp_log_prior,
    raw_from_concentration,
)
from ._empirical_bayes import (
    class_means,
    combine_moments,
    estimate_prior,
    moments_for_params,
    moments_of_rows,
    needs_fourth_moments,
    needs_moments,
    needs_scatter,
    noise_degrees_of_freedom,
    noise_var_floor,
    resolve_hyper_parameters,
)
from ._gaussian import (
    add_observations,
    condition_on,
    grouped_log_density,
    log_density_coef,
    log_density_features,
)
from ._norms import unit_rows
from ._novelty_odds import MAX_LOG_ODDS, novel_log_odds, recalibrate_novel_column
from ._references import FLOWR_REFERENCE, fill_doc
from ._softmax import log_softmax, logsumexp, softmax_rows_inplace
from ._streaming import chunk_slices, group_sums, prefix_states, selected_rows

__all__ = [
    "FLOWR_REFERENCE",
    "fill_doc",
    "MAX_LOG_ODDS",
    "add_observations",
    "chunk_slices",
    "class_means",
    "combine_moments",
    "concentration_from_raw",
    "condition_on",
    "crp_log_normaliser",
    "crp_log_numerator",
    "crp_log_numerators",
    "crp_log_prior",
    "estimate_prior",
    "group_sums",
    "grouped_log_density",
    "log_density_coef",
    "log_density_features",
    "log_softmax",
    "logsumexp",
    "moments_for_params",
    "moments_of_rows",
    "needs_fourth_moments",
    "needs_moments",
    "needs_scatter",
    "noise_degrees_of_freedom",
    "novel_log_odds",
    "noise_var_floor",
    "prefix_states",
    "raw_from_concentration",
    "recalibrate_novel_column",
    "resolve_covariances",
    "resolve_hyper_parameters",
    "selected_rows",
    "softmax_rows_inplace",
    "unit_rows",
]
