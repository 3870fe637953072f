"""The head's unlabelled stream: provisional classes, late labels, exactness."""

import copy
import io
import pickle

import numpy as np
import pytest
from sklearn.base import clone

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier


def _data(seed, n_known=4, n_new=3, n_rows=12, d=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(n_known + n_new, d))
    y = np.repeat(np.arange(n_known + n_new), n_rows)
    X = centres[y] + rng.normal(size=(y.shape[0], d))
    known = y < n_known
    stream = rng.permutation(np.flatnonzero(~known | (rng.random(y.shape[0]) < 0.3)))
    fit_rows = np.flatnonzero(known & ~np.isin(np.arange(y.shape[0]), stream))
    return X, y, fit_rows, stream


def _by_label(head, test):
    """Class statistics and joint log-probabilities keyed by label."""
    joint = head.predict_joint_log_proba(test)
    out = {}
    for i, label in enumerate(head.classes_.tolist()):
        out[label] = (head.class_mean_[i], head.class_var_[i], head.crp_count_[i],
                      head.class_count_[i], joint[:, i])
    return out, joint[:, -1]


def _assert_same_head(head, reference, test):
    mine, novel = _by_label(head, test)
    theirs, novel_ref = _by_label(reference, test)
    assert sorted(mine) == sorted(theirs)
    for label, values in theirs.items():
        for got, want in zip(mine[label], values, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(novel, novel_ref, rtol=1e-10, atol=1e-10)
    proba = {label: column for label, column in
             zip(head.classes_.tolist(), head.predict_proba(test).T[:-1],
                 strict=True)}
    proba_ref = reference.predict_proba(test)
    for i, label in enumerate(reference.classes_.tolist()):
        np.testing.assert_allclose(proba[label], proba_ref[:, i], atol=1e-10)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("covariance", ["isotropic", "full"])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.95])
def test_late_labels_give_the_labelled_head_exactly(seed, covariance, threshold):
    """Unlabelled steps, then a correct of every learned row (in pieces, in a
    shuffled order), equal the head that learned the same rows labelled."""
    X, y, fit_rows, stream = _data(seed)
    head = CRPGaussianClassifier(covariance=covariance,
                                 unlabelled_threshold=threshold)
    head.fit(X[fit_rows], y[fit_rows])
    reference = copy.deepcopy(head)
    out = head.open_world_step(X[stream])
    learned = np.flatnonzero(out.learned)
    assert set(head.classes_.tolist()) >= set(out.y_assigned[learned].tolist())
    order = np.random.default_rng(seed).permutation(learned)
    for piece in np.array_split(order, 3):
        if piece.size:
            head.correct(X[stream][piece], out.y_assigned[piece], y[stream][piece])
    if learned.size:
        reference.open_world_step(X[stream][learned], y[stream][learned])
    _assert_same_head(head, reference, X[::7])


def test_provisional_classes_are_named_predicted_and_never_clash():
    X, y, fit_rows, stream = _data(0)
    head = CRPGaussianClassifier(covariance="isotropic", unlabelled_threshold=0.0)
    head.fit(X[fit_rows], y[fit_rows])
    out = head.open_world_step(X[stream])
    provisional = sorted(set(out.y_assigned.tolist()) - set(range(4)))
    assert provisional and all(label <= -2 for label in provisional)
    assert set(provisional) <= set(head.classes_.tolist())
    # A provisional class is predicted like any class.
    new_rows = stream[y[stream] >= 4]
    assert np.isin(head.predict(X[new_rows]), provisional).mean() > 0.8
    strings = CRPGaussianClassifier(covariance="isotropic", unlabelled_threshold=0.0)
    strings.fit(X[fit_rows], np.array(["a", "b", "c", "new-1"])[y[fit_rows]])
    labels = strings.open_world_step(X[stream]).y_assigned.tolist()
    assert "new-2" in labels and "novel" not in labels


def test_threshold_none_never_learns_and_mixed_batches_follow_order():
    X, y, fit_rows, stream = _data(1)
    head = CRPGaussianClassifier(unlabelled_threshold=None).fit(X[fit_rows],
                                                                y[fit_rows])
    before = pickle.dumps(head)
    out = head.open_world_step(X[stream])
    assert not out.learned.any() and pickle.dumps(head) == before
    head.set_params(unlabelled_threshold=0.0)
    mask = np.arange(stream.shape[0]) % 3 == 0
    twin = copy.deepcopy(head)
    mixed = head.open_world_step(X[stream], y[stream], labelled=mask)
    # The same rows in runs, one call per run.
    parts = []
    bounds = np.flatnonzero(np.diff(mask.astype(int))) + 1
    for rows in np.split(np.arange(mask.shape[0]), bounds):
        parts.append(twin.open_world_step(
            X[stream][rows], y[stream][rows] if mask[rows[0]] else None))
    assert mixed.y_assigned.tolist() == sum(
        (part.y_assigned.tolist() for part in parts), [])
    _assert_same_head(head, twin, X[::5])


def test_bad_corrections_fail_before_any_change():
    X, y, fit_rows, stream = _data(2)
    head = CRPGaussianClassifier(unlabelled_threshold=0.0).fit(X[fit_rows], y[fit_rows])
    out = head.open_world_step(X[stream[:20]])
    snapshot = pickle.dumps(head)
    rows = X[stream[:2]]
    for args, match in (
            ((rows, out.y_assigned[:2], y[stream[:1]]), "one entry per row"),
            ((rows, [99, 99], y[stream[:2]]), "not a class"),
            ((X[stream[:20]].repeat(2, axis=0), np.repeat(out.y_assigned, 2),
              np.repeat(y[stream[:20]], 2)), "learned"),
            ((rows, out.y_assigned[:2], [-1, -1]), "novel label")):
        with pytest.raises(ValueError, match=match):
            head.correct(*args)
        assert pickle.dumps(head) == snapshot


def test_unlabelled_step_is_all_or_nothing(monkeypatch):
    X, y, fit_rows, stream = _data(3)
    head = CRPGaussianClassifier(unlabelled_threshold=0.0).fit(X[fit_rows], y[fit_rows])
    snapshot = pickle.dumps(head)
    calls = {"n": 0}
    state_type = type(head._state)
    original = state_type.learn

    def failing(self, X_rows, index, n_classes):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return original(self, X_rows, index, n_classes)

    monkeypatch.setattr(state_type, "learn", failing)
    with pytest.raises(KeyboardInterrupt):
        head.open_world_step(X[stream])
    assert pickle.dumps(head) == snapshot


def test_unfitted_head_and_scikit_learn_tools(tmp_path):
    X, y, fit_rows, stream = _data(4)
    with pytest.raises(Exception, match="fitted"):
        CRPGaussianClassifier().open_world_step(X[:3])
    head = CRPGaussianClassifier(unlabelled_threshold=0.0).fit(X[fit_rows], y[fit_rows])
    head.open_world_step(X[stream])
    assert clone(head).get_params()["unlabelled_threshold"] == 0.0
    restored = pickle.loads(pickle.dumps(head))
    np.testing.assert_array_equal(restored.predict(X), head.predict(X))
    path = tmp_path / "head.skops"
    sklearn_flowr.save(head, path)
    loaded = sklearn_flowr.load(path)
    np.testing.assert_array_equal(loaded.predict(X), head.predict(X))
    buffer = io.BytesIO()
    pickle.dump(head, buffer)


def test_flowr_classifier_streams_without_labels_through_its_head():
    """FLOWRClassifier.open_world_step(X) and correct reach its head: the
    corrected model equals one that learned the same images labelled."""
    from sklearn_flowr.training._examples import flowr_example

    clf, X, y = flowr_example("large")
    clf.head_.set_params(unlabelled_threshold=0.0)
    # Frozen known classes learn no unlabelled row (nor labelled ones).
    assert not clf.open_world_step(X[y < 5][:5]).learned.any()
    clf.head_.freeze_classes(False)
    twin = copy.deepcopy(clf)
    rows = np.flatnonzero(y >= 5)[:30]
    out = clf.open_world_step(X[rows])
    assert out.learned.all() and len(out.y_assigned) == 30
    clf.correct(X[rows], out.y_assigned, y[rows])
    twin.open_world_step(X[rows], y[rows])
    _assert_same_head(clf.head_, twin.head_, twin.transform(X[::50]))
