"""evaluate_discovery: the open-world stream under a label budget."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import Bunch

from sklearn_flowr.baselines import DPMeansClassifier
from sklearn_flowr.protocol import SmallContextTasks, Task, evaluate_discovery
from sklearn_flowr.protocol._discovery import summarise_tasks


def _blobs(seed=0, n_classes=12, n_rows=20, spread=8.0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_rows)
    X = rng.normal(scale=spread, size=(n_classes, 3))[y] + rng.normal(
        size=(y.shape[0], 3))
    return X, y


class SharedLog(list):
    """A list the per-task deep copy of the estimator shares."""

    def __deepcopy__(self, memo):
        return self


class Recorder(ClassifierMixin, BaseEstimator):
    """Learns nothing; logs every call in order (shared across copies)."""

    def __init__(self, log=None, learn=True):
        self.log = log
        self.learn = learn

    def partial_fit(self, X, y, classes=None):
        self.classes_ = np.unique(np.r_[getattr(self, "classes_", []), y]).astype(int)
        self.log.append(("partial_fit", float(X[0, 0]), int(y[0])))
        return self

    def open_world_step(self, X, y=None):
        x = float(X[0, 0])
        if y is None:
            self.log.append(("step", x, None))
            return Bunch(y_pred=np.array([0]), y_known=np.array([0]),
                         p_novel=np.array([0.5]), is_novel=np.array([False]),
                         y_assigned=np.array([f"p{int(x)}"], dtype=object),
                         learned=np.array([self.learn]))
        self.log.append(("step", x, int(y[0])))
        return Bunch(y_pred=np.array([0]), y_known=np.array([0]),
                     p_novel=np.array([0.5]), is_novel=np.array([False]),
                     y_assigned=np.asarray(y), learned=np.array([True]))

    def correct(self, X, y_assigned, y_true):
        self.log.append(("correct", float(X[0, 0]), int(y_true[0])))
        return self


def test_late_labels_arrive_after_the_delay_and_are_corrected_or_learned():
    """Every label arrives (fraction 1) two rows late: the row is first an
    unlabelled step, and its label is delivered right before the step two
    rows on, by correct when it was learned and by partial_fit otherwise."""
    X = np.arange(10, dtype=float)[:, None]
    y = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 2])
    task = Task(support=np.array([0, 1]), query=np.arange(2, 10), task_id=0)
    for learn, how in ((True, "correct"), (False, "partial_fit")):
        log = SharedLog()
        evaluate_discovery(Recorder(log, learn=learn), X, y, [task],
                           label_fraction=1.0, label_delay=2, random_state=0)
        stream = log[1:]  # after the support set's partial_fit call
        assert [e for e in stream if e[0] == "step"] == [
            ("step", float(i), None) for i in range(2, 10)]
        # Row 2's label comes before row 4's step, and so on; the last two
        # labels fall after the stream and never arrive.
        for i in range(2, 8):
            position = stream.index((how, float(i), int(y[i])))
            assert stream[position + 1] == ("step", float(i + 2), None)
        assert (how, 8.0, 2) not in stream and (how, 9.0, 2) not in stream


def test_no_label_budget_scores_every_query_and_full_budget_none():
    X, y = _blobs()
    tasks = SmallContextTasks(y, n_support_classes=8, n_novel_classes=4,
                              n_tasks=4, random_state=0)
    blind = evaluate_discovery(DPMeansClassifier(), X, y, tasks, random_state=0)
    assert blind.n_unlabelled == sum(task.query.shape[0] for task in tasks)
    assert blind.mean["accuracy_new"] > 0.9 and blind.mean["known_accuracy"] > 0.9
    assert blind.per_task["n_true_new"].tolist() == [4.0] * 4
    full = evaluate_discovery(DPMeansClassifier(), X, y, tasks,
                              label_fraction=1.0, random_state=0)
    assert full.n_unlabelled == 0
    assert np.isnan(full.mean["accuracy_new"])
    # Seeded: the same draw gives the same figures.
    again = evaluate_discovery(DPMeansClassifier(), X, y, tasks, random_state=0,
                               label_fraction=0.5, label_delay=3)
    same = evaluate_discovery(DPMeansClassifier(), X, y, tasks, random_state=0,
                              label_fraction=0.5, label_delay=3)
    assert again.mean == same.mean and again.n_unlabelled == same.n_unlabelled


def test_a_label_budget_helps_and_bad_options_are_refused():
    """Half the labels, arriving at once, leave only the other half to
    score; and a fraction or delay out of range fails clearly."""
    X, y = _blobs(spread=3.0)
    tasks = SmallContextTasks(y, n_support_classes=8, n_novel_classes=4,
                              n_tasks=4, random_state=1)
    half = evaluate_discovery(DPMeansClassifier(), X, y, tasks,
                              label_fraction=0.5, random_state=0)
    total = sum(task.query.shape[0] for task in tasks)
    assert 0.3 * total < half.n_unlabelled < 0.7 * total
    for bad, match in (({"label_fraction": 1.5}, "label_fraction"),
                       ({"label_fraction": True}, "label_fraction"),
                       ({"label_delay": -1}, "label_delay"),
                       ({"setting": "medium"}, "setting")):
        with pytest.raises(ValueError, match=match):
            evaluate_discovery(DPMeansClassifier(), X, y, tasks, **bad)


def test_summarise_tasks_ignores_nan():
    mean, se = summarise_tasks({"a": np.array([1.0, np.nan, 3.0]),
                                "b": np.array([np.nan, 2.0, np.nan]),
                                "c": np.array([np.nan])})
    assert mean == {"a": 2.0, "b": 2.0, "c": mean["c"]} and np.isnan(mean["c"])
    assert se["a"] == pytest.approx(np.std([1.0, 3.0], ddof=1) / np.sqrt(2))
    assert np.isnan(se["b"]) and np.isnan(se["c"])
