"""match_novel_share: a batch's P(novel) moved by one log-odds offset to a
known share of new rows."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import logit
from sklearn.metrics import roc_auc_score
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_flowr.calibration import NoveltyCalibratedClassifier, match_novel_share
from sklearn_flowr.metrics import expected_calibration_error


@pytest.mark.parametrize("share", [0.01, 0.4, 0.97])
def test_the_mean_is_the_share_and_every_row_moves_by_one_offset(share):
    p = np.random.default_rng(0).beta(0.5, 2.0, size=300)
    matched = match_novel_share(p, share)
    assert matched.mean() == pytest.approx(share, abs=1e-9)
    shift = logit(matched) - logit(p)
    assert np.ptp(shift) < 1e-6 * max(1.0, np.abs(shift).max())
    assert (shift[0] > 0) == (share > p.mean())
    assert np.array_equal(np.argsort(matched, kind="stable"),
                          np.argsort(p, kind="stable"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_batch_scored_at_the_folds_share_is_mended(seed):
    """A map calibrated at the folds' share (two thirds new) on a batch with
    3/8 new rows: the batch's rows, unlabelled, and its share fix the offset."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=2.0, size=(40, 6))
    y_fit = np.repeat(np.arange(25), 20)
    X_fit = means[y_fit] + rng.standard_t(4, (500, 6))
    y_new = np.repeat(np.arange(40), 10)
    X_new = means[y_new] + rng.standard_t(4, (400, 6))
    is_new = y_new >= 25
    clf = NoveltyCalibratedClassifier(stream=False, random_state=0).fit(X_fit, y_fit)
    p = clf.predict_novelty_proba(X_new)
    matched = match_novel_share(p, is_new.mean())
    before = expected_calibration_error(is_new, p)
    after = expected_calibration_error(is_new, matched)
    assert after < 0.6 * before and after < 0.08, (before, after)
    assert roc_auc_score(is_new, matched) == pytest.approx(roc_auc_score(is_new, p))


def test_rows_as_far_out_as_the_calibration_clips_keep_their_order():
    """predict_novelty_proba's log-odds reach +-30 nats (p about 1e-13)."""
    p = np.array([1e-13, 1e-14, 0.5, 0.6, 1 - 1e-12, 1 - 1e-13])
    matched = match_novel_share(p, 0.5)
    assert np.all(np.diff(matched[[1, 0, 2, 3, 4, 5]]) > 0), matched
    assert roc_auc_score([1, 0, 1, 1, 0, 1], matched) == pytest.approx(
        roc_auc_score([1, 0, 1, 1, 0, 1], p))


@pytest.mark.parametrize("share", [1e-300, 1e-15, 1 - 1e-15])
def test_extreme_shares_are_met(share):
    matched = match_novel_share([0.2, 0.3, 0.9], share)
    assert matched.mean() == pytest.approx(share, rel=1e-6, abs=1e-15)


@pytest.mark.parametrize("p", [
    [0.1, 0.4, 0.7], np.array([0.1, 0.4, 0.7], dtype=np.float32),
    pd.Series([0.1, 0.4, 0.7], index=[5, 6, 7])])
def test_lists_float32_and_series_give_float64(p):
    matched = match_novel_share(p, np.float32(0.25))
    assert matched.dtype == np.float64 and matched.shape == (3,)
    assert matched.mean() == pytest.approx(0.25, abs=1e-7)


def test_certain_rows_move_too():
    assert np.allclose(match_novel_share([0.0, 0.0, 0.0], 0.3), 0.3)
    assert np.allclose(match_novel_share(np.ones(4), 0.2), 0.2)


@pytest.mark.parametrize(("p", "share", "error", "match"), [
    ([0.2, 1.5], 0.3, ValueError, r"\[0, 1\].*1\.5"),
    ([0.2, -0.1], 0.3, ValueError, r"\[0, 1\]"),
    ([0.2, np.nan], 0.3, ValueError, "NaN"),
    ([0.2, np.inf], 0.3, ValueError, "infinity"),
    ([[0.2, 0.3]], 0.3, ValueError, "1-D"),
    (np.zeros((2, 2, 2)), 0.3, ValueError, "1-D.*3 dimension"),
    (np.array(0.3), 0.3, ValueError, "1-D.*0 dimension"),
    ([], 0.3, ValueError, "p_novel is empty"),
    (["0.1", "0.2"], 0.3, ValueError, "numeric"),
    ([0.2, 0.3], 1e-310, InvalidParameterError, "share"),
    ([0.2, 0.3], True, InvalidParameterError, "share"),
    ([0.2, 0.3], 0.0, InvalidParameterError, "share"),
    ([0.2, 0.3], 1.0, InvalidParameterError, "share"),
    ("abc", 0.3, InvalidParameterError, "p_novel"),
])
def test_bad_input_names_the_problem(p, share, error, match):
    with pytest.raises(error, match=match):
        match_novel_share(p, share)
