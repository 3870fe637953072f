"""Tests of sklearn_flowr.protocol.evaluate_online: against a hand-written loop,
its report, parallel back-ends and its errors."""

import copy

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_curve

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.metrics import open_world_report
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    Task,
    evaluate_online,
)

# --------------------------------------------------------------------- fixtures


@pytest.fixture
def seed():
    """The seed every sampler of a test is built with."""
    return 7


@pytest.fixture
def features(rng):
    """20 Gaussian classes in 8-d, 25 rows each, overlapping a little."""
    centres = rng.normal(scale=3.0, size=(20, 8))
    y = np.repeat(np.arange(20), 25)
    X = centres[y] + rng.normal(size=(y.shape[0], 8))
    return X, y


@pytest.fixture
def head():
    """An unfitted head with a given prior, ready for small-context tasks."""
    return CRPGaussianClassifier(prior_mean=0.0, prior_var=9.0, b=1.0, sigma=1.0)


class AdaptingHead(CRPGaussianClassifier):
    """A head whose support set must come through ``adapt`` (module level, so
    that joblib can pickle it)."""

    def adapt(self, X_support, y_support):
        self.adapted_rows_ = len(y_support)
        return self.partial_fit(X_support, y_support)

    def open_world_step(self, X, y):
        assert self.adapted_rows_ == self.class_count_.sum()
        return super().open_world_step(X, y)


def _hand_loop(estimator, X, y, tasks, tpr):
    """The protocol written out: one copy per task, support, stream, report."""
    columns = {k: [] for k in ["y_true", "y_known", "p_novel", "is_novel",
                               "task_id", "support_mask", "y_pred",
                               "novelty_score"]}
    for task in tasks:
        est = copy.deepcopy(estimator)
        est.partial_fit(X[task.support], y[task.support])
        out = est.open_world_step(X[task.query], y[task.query])
        columns["y_true"].append(y[task.query])
        columns["y_known"].append(out.y_known)
        columns["y_pred"].append(out.y_pred)
        columns["p_novel"].append(out.p_novel)
        columns["novelty_score"].append(out.novelty_score)
        columns["is_novel"].append(out.is_novel)
        columns["task_id"].append(np.full(task.query.shape[0], task.task_id))
        columns["support_mask"].append(np.isin(y[task.query], y[task.support]))
    c = {k: np.concatenate(v) for k, v in columns.items()}
    return open_world_report(c["y_true"], c["y_known"], c["p_novel"],
                             c["is_novel"], tpr=tpr, task_ids=c["task_id"],
                             support_mask=c["support_mask"], y_pred=c["y_pred"],
                             novel_label=est.novel_label_,
                             novelty_score=c["novelty_score"])


# ------------------------------------------------------------ evaluation
def test_evaluate_online_equals_hand_loop(features, head, seed):
    """Check the report equals a per-task loop scored by open_world_report."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=6, random_state=seed)
    report = evaluate_online(head, X, y, tasks)
    expected = _hand_loop(head, X, y, tasks, tpr=0.15)
    assert expected.argmax_accuracy is not None
    for key, value in expected.items():
        if key == "reliability":
            for name, bins in value.items():
                assert_allclose(report[key][name], bins, err_msg=name)
        else:
            assert_allclose(report[key], value, err_msg=key)
    assert not hasattr(head, "classes_")  # the given estimator is untouched


def _assert_same_run(one, two):
    for key in one.rows:
        assert_array_equal(one.rows[key], two.rows[key], err_msg=key)
    for key in ["accuracy", "accuracy_ci", "h_measure", "auroc", "threshold"]:
        assert one[key] == two[key]


def test_evaluate_online_is_independent_of_n_jobs(features, head, seed):
    """Check that n_jobs=1 and n_jobs=2 give identical rows and report."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=24, random_state=seed)
    one = evaluate_online(head, X, y, tasks, n_jobs=1, return_rows=True)
    with joblib.parallel_config(backend="threading"):
        two = evaluate_online(head, X, y, tasks, n_jobs=2, return_rows=True)
    _assert_same_run(one, two)


@pytest.mark.slow
def test_evaluate_online_in_loky_processes(features, head, seed):
    """Check n_jobs=2 in loky worker processes (the default backend) gives the
    sequential result; slow only because each worker imports torch."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=24, random_state=seed)
    one = evaluate_online(head, X, y, tasks, n_jobs=1, return_rows=True)
    two = evaluate_online(head, X, y, tasks, n_jobs=2, return_rows=True)
    _assert_same_run(one, two)


def test_evaluate_online_report_fields(features, head, seed):
    """Check the report's fields, the ROC curve and the pooled rows."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=10, random_state=seed)
    report = evaluate_online(head, X, y, tasks, return_rows=True)
    for key in ["accuracy", "accuracy_ci", "support_accuracy",
                "support_accuracy_ci", "incremental_accuracy",
                "incremental_accuracy_ci", "h_measure", "auroc", "threshold",
                "novel_tpr", "task_accuracy"]:
        assert np.all(np.isfinite(report[key])), key
    assert report.n_tasks == 10 and report.setting == "small"
    assert report.target_tpr == 0.15 and report.novel_tpr >= 0.15
    rows = report.rows
    # FLOWR's head ranks by the log-odds of P(novel), which do not round to 1.
    fpr, tpr, thresholds = roc_curve(rows.is_novel, rows.novelty_score)
    assert_allclose(report.fpr, fpr)
    assert_allclose(report.tpr_curve, tpr)
    assert_allclose(report.roc_thresholds, thresholds)
    assert_array_equal(rows.index, np.concatenate([t.query for t in tasks]))
    assert_array_equal(rows.y_true, y[rows.index])
    for task in tasks:
        mine = rows.task_id == task.task_id
        # One novel row per novel class: the first time it shows up.
        assert rows.is_novel[mine].sum() == 5
        assert_array_equal(rows.support_mask[mine],
                           np.isin(y[task.query], y[task.support]))


def test_evaluate_online_reports_calibration_and_argmax(features, head, seed):
    """Check a probabilistic head gets the calibration of P(novel) against the
    first sightings and the accuracy of its own argmax decision, both from the
    pooled rows."""
    from sklearn.metrics import brier_score_loss

    from sklearn_flowr.metrics import expected_calibration_error

    X, y = features
    tasks = SmallContextTasks(y, n_tasks=8, random_state=seed)
    report = evaluate_online(head, X, y, tasks, return_rows=True)
    rows = report.rows
    assert report.probability is True
    assert report.ece == expected_calibration_error(rows.is_novel, rows.p_novel)
    assert report.brier == brier_score_loss(rows.is_novel, rows.p_novel)
    assert_array_equal(rows.pred_novel, rows.y_pred == -1)
    correct = np.where(rows.pred_novel, rows.is_novel,
                       ~rows.is_novel & (rows.y_pred == rows.y_true))
    per_task = [correct[rows.task_id == t].mean() for t in range(8)]
    assert_allclose(report.task_argmax_accuracy, per_task)
    assert_allclose(report.argmax_accuracy, np.mean(per_task))
    assert report.argmax_novel_tpr == rows.pred_novel[rows.is_novel].mean()


def test_evaluate_online_gives_a_distance_no_calibration(features, seed):
    """Check a baseline (no predict_proba: its p_novel is a distance) gets no
    calibration or argmax figure, and probability=False does the same for the
    head."""
    from sklearn_flowr.baselines import NCMClassifier

    X, y = features
    tasks = SmallContextTasks(y, n_tasks=4, random_state=seed)
    report = evaluate_online(NCMClassifier(), X, y, tasks)
    assert report.probability is False
    assert report.ece is None and report.brier is None
    assert report.reliability is None and report.argmax_accuracy is None
    assert np.isfinite(report.h_measure)
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=9.0, b=1.0, sigma=1.0)
    forced = evaluate_online(head, X, y, tasks, probability=False)
    assert forced.ece is None and forced.argmax_accuracy is None
    with pytest.raises(ValueError, match=r"'probability' parameter .* must be an "
                       r"instance of 'bool' .* or a str among \{'auto'\}\. Got 'yes'"):
        evaluate_online(head, X, y, tasks, probability="yes")


def test_evaluate_online_uses_adapt(features, seed):
    """Check that adapt, when present, learns the support set."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=3, random_state=seed)
    adapting = AdaptingHead(prior_mean=0.0, prior_var=9.0, b=1.0, sigma=1.0)
    plain = CRPGaussianClassifier(prior_mean=0.0, prior_var=9.0, b=1.0, sigma=1.0)
    a = evaluate_online(adapting, X, y, tasks, return_rows=True)
    b = evaluate_online(plain, X, y, tasks, return_rows=True)
    assert_array_equal(a.rows.p_novel, b.rows.p_novel)


def test_evaluate_online_takes_a_list_of_tasks(features, head, seed):
    """Check that any iterable of Task objects runs like the sampler."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=4, random_state=seed)
    from_sampler = evaluate_online(head, X, y, tasks, return_rows=True)
    from_list = evaluate_online(head, X, y, iter(list(tasks)), return_rows=True)
    assert_array_equal(from_sampler.rows.p_novel, from_list.rows.p_novel)


def test_evaluate_online_large_context(features, seed):
    """Check a fitted head on query-only tasks: known rows are support rows."""
    X, y = features
    known = y < 12
    # Training rows of the known classes fit the head; the rest is held out.
    train = known & (np.arange(y.shape[0]) % 25 < 10)
    head = CRPGaussianClassifier(prior_mean=0.0, prior_var=9.0, b=1.0,
                                 sigma=1.0).fit(X[train], y[train])
    X_eval, y_eval = X[~train], y[~train]
    tasks = LargeContextTasks(y_eval, range(12), n_tasks=5, random_state=seed)
    report = evaluate_online(head, X_eval, y_eval, tasks, setting="large",
                             return_rows=True)
    assert report.target_tpr == 0.6 and report.novel_tpr >= 0.6
    assert_array_equal(report.rows.support_mask, report.rows.y_true < 12)
    assert report.rows.is_novel.sum() == 5 * 5
    assert np.isfinite(report.support_accuracy)


def test_evaluate_online_progress_bar(features, head, seed, capsys):
    """Check verbose=1 draws a progress bar and verbose=0 stays silent."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=4, random_state=seed)
    evaluate_online(head, X, y, tasks)
    assert capsys.readouterr().err == ""
    evaluate_online(head, X, y, tasks, verbose=1)
    assert "small-context tasks" in capsys.readouterr().err


class NoStream:
    def partial_fit(self, X, y):
        return self


class NoLearning:
    def open_world_step(self, X, y):
        return {}


class EmptyStep(CRPGaussianClassifier):
    def open_world_step(self, X, y):
        return {"p_novel": np.zeros(len(y))}


@pytest.mark.parametrize("change, error, match", [
    (dict(setting="medium"), ValueError,
     r"'setting' parameter .* must be a str among \{.*'small'.*\}\. Got 'medium'"),
    (dict(tpr=0.0), ValueError,
     r"'tpr' parameter .* must be a float in the range \(0\.0, 1\.0\] or None"),
    (dict(X=np.zeros((10, 8))), ValueError, "different numbers of rows: 10 and 500"),
    (dict(estimator=NoStream()), TypeError, "no open_world_step"),
    (dict(estimator=NoLearning()), TypeError, "neither adapt.*nor partial_fit"),
    (dict(estimator=EmptyStep(prior_mean=0.0, prior_var=9.0, b=1.0)), ValueError,
     r"\['y_known', 'is_novel'\] missing"),
    (dict(setting="large"), ValueError, "setting='large' runs query-only tasks"),
    (dict(tasks=[Task(np.array([0]), np.array([500]), 0)]), ValueError,
     r"query indices must lie in \[0, 500\)"),
    (dict(tasks=[Task(np.array([0]), np.array([0.5]), 0)]), ValueError,
     "1-d integer array"),
    (dict(tasks=[Task(np.array([0]), np.array([], dtype=int), 0)]), ValueError,
     "no query rows"),
    (dict(tasks=[Task(np.array([0]), np.array([1]), 0)] * 2), ValueError,
     "task_id values must be distinct"),
    (dict(tasks=[]), ValueError, "tasks is empty"),
    (dict(tasks=[(np.array([0]), np.array([1]))]), TypeError,
     "support, query and task_id"),
    (dict(tasks=3), TypeError, "tasks must be SmallContextTasks"),
])
def test_evaluate_online_errors(features, head, seed, change, error, match):
    """Check clear errors for bad settings, inputs, estimators and tasks."""
    X, y = features
    args = dict(estimator=head, X=X, y=y,
                tasks=SmallContextTasks(y, n_tasks=2, random_state=seed))
    args |= change
    with pytest.raises(error, match=match):
        evaluate_online(**args)


def test_evaluate_online_rejects_tasks_of_other_labels(features, head, seed):
    """Check that a sampler built on other labels is refused."""
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=2, random_state=seed)
    with pytest.raises(ValueError, match="drawn from other labels than y"):
        evaluate_online(head, X, np.roll(y, 1), tasks)


def test_evaluate_online_large_context_needs_fitted(features, head, seed):
    """Check that the large context refuses an unfitted estimator."""
    X, y = features
    tasks = LargeContextTasks(y, range(12), n_tasks=2, random_state=seed)
    with pytest.raises(NotFittedError, match="setting='large' needs a fitted"):
        evaluate_online(head, X, y, tasks, setting="large")


def test_evaluate_online_under_dask(features, head, seed):
    """Check the dask joblib backend gives the sequential result."""
    distributed = pytest.importorskip("distributed")
    X, y = features
    tasks = SmallContextTasks(y, n_tasks=8, random_state=seed)
    expected = evaluate_online(head, X, y, tasks, return_rows=True)
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1,
                                 processes=False, host="127.0.0.1",
                                 protocol="tcp://", dashboard_address=None)
        as cluster,
        distributed.Client(cluster),
        joblib.parallel_backend("dask"),
    ):
        report = evaluate_online(head, X, y, tasks, return_rows=True)
    assert_array_equal(report.rows.p_novel, expected.rows.p_novel)
    assert report.accuracy == expected.accuracy


def test_protocol_and_baselines_import_without_torch():
    """Check the NumPy half of the package (what joblib workers load to evaluate
    tasks on cached features) does not import torch; FLOWRClassifier still does."""
    import subprocess
    import sys

    code = ("import sys, sklearn_flowr.protocol, sklearn_flowr.baselines, "
            "sklearn_flowr.metrics; assert 'torch' not in sys.modules; "
            "from sklearn_flowr import FLOWRClassifier; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
