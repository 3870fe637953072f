"""select_discovery_params: discovery thresholds chosen on validation tasks,
scored exactly as evaluate_discovery scores the chosen estimator, with clear
errors on bad input; and flowr-benchmark's cross-fit over halves of the test
classes, whose validation and evaluated classes never meet."""

import argparse
import copy
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import Bunch

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import DPMeansClassifier
from sklearn_flowr.cli._benchmark_discovery import (
    DISCOVERY_GRIDS,
    discovery_halves,
    discovery_rows,
    discovery_templates,
)
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    evaluate_discovery,
    select_discovery_params,
)
from sklearn_flowr.protocol._discovery import DISCOVERY_FIGURES, summarise_tasks
from sklearn_flowr.protocol._select import _discovery_score as discovery_score


def _blobs(n_classes=12, n_rows=25, spread=8.0, first=0, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(first, first + n_classes), n_rows)
    X = rng.normal(scale=spread, size=(n_classes, 3))[y - first] + rng.normal(
        size=(y.shape[0], 3))
    return X, y


def test_scores_are_evaluate_discovery_of_the_chosen_copy():
    """Every candidate's score is the criterion of evaluate_discovery run by
    hand on the same tasks and seed; the best is the argmax; the template is
    not changed and the best estimator is its copy with the best
    parameters."""
    X, y = _blobs()
    template = DPMeansClassifier()
    grid = {"threshold_scale": [0.05, 1.0, 20.0]}
    found = select_discovery_params(template, X, y, grid, n_tasks=6,
                                    label_fraction=0.2, label_delay=3,
                                    random_state=4)
    tasks = SmallContextTasks(y, n_support_classes=8, n_novel_classes=4,
                              n_tasks=6, random_state=4)
    scores = []
    for result in found.results:
        by_hand = evaluate_discovery(clone(template).set_params(**result["params"]),
                                     X, y, tasks, label_fraction=0.2,
                                     label_delay=3, random_state=4)
        assert result["report"].mean == by_hand.mean
        assert result["score"] == pytest.approx(
            (by_hand.mean["accuracy_new"] + by_hand.mean["known_accuracy"]) / 2)
        scores.append(result["score"])
    # A tiny threshold splits every class, a huge one merges new classes into
    # known ones: the data's own scale wins, clearly.
    assert found.best_params == {"threshold_scale": 1.0}
    assert found.best_index == int(np.argmax(scores)) == 1
    assert found.best_score > max(scores[0], scores[2]) + 0.1
    assert template.get_params()["threshold_scale"] == 1.0
    assert found.best_estimator is not template
    assert found.best_estimator.get_params()["threshold_scale"] == 1.0
    restored = pickle.loads(pickle.dumps(found.best_estimator))
    assert clone(restored).get_params() == found.best_estimator.get_params()


def test_the_head_that_learns_from_unlabelled_rows_wins_on_separated_blobs():
    """On far-apart blobs, a head that learns confident unlabelled rows opens
    the new classes; one that never learns (None) leaves them all under the
    novel label, one cluster: the selection picks the learning head, on the
    new-class clustering accuracy too."""
    X, y = _blobs(spread=12.0)
    head = CRPGaussianClassifier(covariance="full")
    grid = {"unlabelled_threshold": [None, 0.9]}
    for scoring in ("balanced", "accuracy_new"):
        found = select_discovery_params(head, X, y, grid, n_tasks=5,
                                        scoring=scoring, random_state=0)
        score = {r["params"]["unlabelled_threshold"]: r["score"]
                 for r in found.results}
        assert found.best_params == {"unlabelled_threshold": 0.9}
        assert score[0.9] > score[None] + 0.1


def test_large_context_on_a_fitted_template():
    """The large context keeps the template's fitted known classes: its
    tasks query their held-out rows and new validation classes."""
    X_known, y_known = _blobs(n_classes=6, seed=1)
    X_new, y_new = _blobs(n_classes=6, first=100, seed=2)
    fit = np.arange(y_known.shape[0]) % 2 == 0
    template = DPMeansClassifier().fit(X_known[fit], y_known[fit])
    X_val = np.concatenate([X_known[~fit], X_new])
    y_val = np.concatenate([y_known[~fit], y_new])
    found = select_discovery_params(template, X_val, y_val,
                                    {"threshold_scale": [0.05, 1.0]},
                                    setting="large", n_tasks=4, random_state=0)
    assert found.best_params == {"threshold_scale": 1.0}
    tasks = LargeContextTasks(y_val, np.unique(y_known), n_novel_classes=5,
                              n_tasks=4, random_state=0)
    by_hand = evaluate_discovery(found.best_estimator, X_val, y_val, tasks,
                                 setting="large", random_state=0)
    assert found.results[1]["report"].mean == by_hand.mean
    assert found.results[1]["report"].per_task["n_true_new"].tolist() == [5.0] * 4


def test_no_score_to_choose_on_warns_and_takes_the_first():
    """With every label arriving at once no row is unlabelled: nothing to
    score. A grid with a choice warns and takes its first candidate; a grid
    of one candidate (``{}``: the template as it is) has nothing to choose."""
    X, y = _blobs()
    with pytest.warns(UserWarning, match="No candidate"):
        found = select_discovery_params(DPMeansClassifier(), X, y,
                                        {"threshold_scale": [2.0, 1.0]},
                                        n_tasks=2, label_fraction=1.0,
                                        random_state=0)
    assert found.best_params == {"threshold_scale": 2.0}
    assert np.isnan(found.best_score)
    single = select_discovery_params(DPMeansClassifier(), X, y, {}, n_tasks=2,
                                     label_fraction=1.0, random_state=0)
    assert single.best_params == {} and len(single.results) == 1


@pytest.mark.parametrize("grid, kwargs, match", [
    ([], {}, "no candidate"),
    ({"threshold_scale": []}, {}, "non-empty"),
    ({"unlabelled_threshold": [0.5]}, {}, "does not have"),
    ({"threshold_scale": [1.0, -2.0]}, {}, "threshold_scale"),
    ({"threshold_scale": [1.0]}, {"scoring": "h_measure"}, "scoring"),
    ({"threshold_scale": [1.0]}, {"setting": "medium"}, "setting"),
    ({"threshold_scale": [1.0]}, {"n_tasks": 0}, "n_tasks"),
    ({"threshold_scale": [1.0]}, {"setting": "large"}, "fitted"),
])
def test_bad_input_is_refused_before_any_task(grid, kwargs, match):
    X, y = _blobs()
    with pytest.raises(ValueError, match=match):
        select_discovery_params(DPMeansClassifier(), X, y, grid,
                                **{"n_tasks": 2, "random_state": 0, **kwargs})


def test_too_few_validation_classes_and_unknown_scoring():
    X, y = _blobs(n_classes=1)
    with pytest.raises(ValueError, match="at least 2 validation"):
        select_discovery_params(DPMeansClassifier(), X, y, {}, random_state=0)
    with pytest.raises(ValueError, match="scoring"):
        discovery_score({"accuracy_new": 1.0, "known_accuracy": 1.0}, "auroc")


# ------------------------------------------------ the benchmark's cross-fit
def _args(**changes):
    values = dict(tasks=5, seed=3, lc_known_query_classes=None, n_jobs=1,
                  verbose=0, label_fraction=[0.0], label_delay=0)
    return argparse.Namespace(**{**values, **changes})


@pytest.mark.parametrize("setting", ["small", "large"])
def test_halves_tasks_never_meet_the_other_halfs_classes(setting):
    """Each half's tasks draw their new classes from that half only (and, in
    the large context, their known classes from the training classes); the
    two halves split the test classes, and share the tasks of the run."""
    y_fit = np.repeat(np.arange(6), 20)
    y_test = np.repeat(np.arange(10, 17), 25)
    y_eval = (y_test if setting == "small"
              else np.concatenate([y_fit, y_test]))
    plan = discovery_halves(setting, y_fit, y_eval, _args())
    (rows_a, tasks_a, half_a), (rows_b, tasks_b, half_b) = plan
    assert np.intersect1d(half_a, half_b).size == 0
    assert np.array_equal(np.union1d(half_a, half_b), np.arange(10, 17))
    assert (half_a.shape[0], half_b.shape[0]) == (4, 3)
    assert (len(tasks_a), len(tasks_b)) == (3, 2)
    for rows, tasks, half, other in ((rows_a, tasks_a, half_a, half_b),
                                     (rows_b, tasks_b, half_b, half_a)):
        y_half = y_eval[rows]
        assert not np.isin(y_half, other).any()
        for task in tasks:
            seen = np.unique(y_half[np.r_[task.support, task.query]])
            new = np.setdiff1d(seen, y_fit)
            assert np.isin(new, half).all() and new.size > 0
            if setting == "large":
                assert np.isin(y_fit, seen).all()
    few = discovery_halves(setting, y_fit, y_eval[np.isin(y_eval, np.r_[
        np.arange(6), 10, 11, 12])], _args())
    assert few is None


def _fake_model(X_train, y_train):
    """What discovery_templates reads of a fitted FLOWRClassifier."""
    from sklearn_flowr.head import empirical_bayes_head

    head = CRPGaussianClassifier(covariance="full")
    return SimpleNamespace(prior_head_=empirical_bayes_head(
        head, X_train, y_train, setting="small"))


def test_cross_fit_rows_pool_each_half_scored_with_the_other_halfs_choice():
    """Each half's figures are evaluate_discovery of the method with the
    parameters chosen on the other half, pooled over both halves' tasks; the
    row records the choices, and validation and scored classes are
    disjoint."""
    X_train, y_train = _blobs(n_classes=6, seed=5)
    X_test, y_test = _blobs(n_classes=8, first=20, seed=6)
    model, args, logged = _fake_model(X_train, y_train), _args(tasks=4), []
    rows = discovery_rows(model, "small", X_train, y_train, X_test, y_test,
                          None, args, logged.append)
    assert [row["method"] for row in rows] == ["flowr", "crp-isotropic",
                                               "dp-means"]
    assert any("cross-fitted over two halves" in line for line in logged)
    plan = discovery_halves("small", y_train, y_test, args)
    templates = discovery_templates(model, "small", X_train, y_train)
    for row in rows:
        halves = row["selection"]["halves"]
        assert row["n_tasks"] == 4 and row["selection"]["scoring"] == "balanced"
        per_task = {name: [] for name in DISCOVERY_FIGURES}
        for i, (half, (rows_, tasks, classes)) in enumerate(zip(halves, plan,
                                                                strict=True)):
            assert half["classes"] == classes.tolist()
            assert not set(half["classes"]) & set(half["validation_classes"])
            # Chosen on the other half's classes and tasks alone.
            other_rows, other_tasks, other_classes = plan[1 - i]
            assert half["validation_classes"] == other_classes.tolist()
            on_other = select_discovery_params(
                templates[row["method"]], X_test[other_rows], y_test[other_rows],
                DISCOVERY_GRIDS[row["method"]], tasks=other_tasks,
                random_state=args.seed)
            assert half["params"] == on_other.best_params
            assert half["validation_score"] == on_other.best_score
            name, = half["params"]
            assert half["params"][name] in DISCOVERY_GRIDS[row["method"]][name]
            chosen = copy.deepcopy(templates[row["method"]]).set_params(
                **half["params"])
            by_hand = evaluate_discovery(chosen, X_test[rows_], y_test[rows_],
                                         tasks, random_state=args.seed)
            for name in DISCOVERY_FIGURES:
                per_task[name].append(by_hand.per_task[name])
        pooled = summarise_tasks({name: np.concatenate(values)
                                  for name, values in per_task.items()})
        assert row["mean"] == pooled[0]


def test_too_few_test_classes_fall_back_to_the_defaults_and_say_so():
    X_train, y_train = _blobs(n_classes=6, seed=5)
    X_test, y_test = _blobs(n_classes=3, first=20, seed=6)
    tasks = SmallContextTasks(y_test, n_support_classes=2, n_novel_classes=1,
                              n_tasks=2, random_state=0)
    logged = []
    rows = discovery_rows(_fake_model(X_train, y_train), "small", X_train,
                          y_train, X_test, y_test, tasks, _args(tasks=2),
                          logged.append)
    assert any("only 3 test classes" in line and "defaults" in line
               for line in logged)
    assert len(rows) == 3 and all(row["selection"] is None for row in rows)
    dp = [row for row in rows if row["method"] == "dp-means"][0]
    assert dp["mean"] == evaluate_discovery(DPMeansClassifier(), X_test, y_test,
                                            tasks, random_state=3).mean


def test_each_half_takes_the_other_halfs_choice(monkeypatch):
    """With a stand-in selection that prefers a different candidate on each
    half, and reports that say whose they are, the row scores half 1 with
    half 2's choice and half 2 with half 1's."""
    import sklearn_flowr.cli._benchmark_discovery as module

    X_train, y_train = _blobs(n_classes=6, seed=5)
    X_test, y_test = _blobs(n_classes=8, first=20, seed=6)
    plan = discovery_halves("small", y_train, y_test, _args(tasks=4))
    first_half = plan[0][2]

    def stand_in(template, X, y, grid, **kwargs):
        half = 0 if np.isin(y, first_half).all() else 1
        candidates = list(ParameterGrid(grid))
        best = 1 if half == 0 else 2

        def report(k):
            # accuracy_new says which half and candidate ran.
            per_task = {name: np.full(2, 10.0 * half + k)
                        for name in DISCOVERY_FIGURES}
            return Bunch(per_task=per_task, n_tasks=2, n_unlabelled=1)
        return Bunch(best_params=candidates[best], best_index=best,
                     best_score=float(best), results=[
                         {"report": report(k)} for k in range(len(candidates))])

    monkeypatch.setattr(module, "select_discovery_params", stand_in)
    rows = discovery_rows(_fake_model(X_train, y_train), "small", X_train,
                          y_train, X_test, y_test, None, _args(tasks=4),
                          lambda line: None)
    grid = DISCOVERY_GRIDS["flowr"]["unlabelled_threshold"]
    halves = rows[0]["selection"]["halves"]
    assert halves[0]["params"] == {"unlabelled_threshold": grid[2]}
    assert halves[1]["params"] == {"unlabelled_threshold": grid[1]}
    # Half 1 ran candidate 2 (value 2), half 2 candidate 1 (value 11).
    assert rows[0]["mean"]["accuracy_new"] == pytest.approx((2.0 + 11.0) / 2)
