"""ConformalNoveltyClassifier: split-conformal p-values, Mondrian, BH, the stream."""

import copy
import io
import pickle

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError

import sklearn_flowr
from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.baselines import NCMClassifier
from sklearn_flowr.calibration import NoveltyCalibratedClassifier
from sklearn_flowr.conformal import ConformalNoveltyClassifier


class ScoreIsTheFeature(ClassifierMixin, BaseEstimator):
    """A known-class 'estimator' whose novelty score is the first feature:
    the p-values can then be checked against their formula exactly."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        self.novel_label_ = -1
        return self

    def partial_fit(self, X, y):
        self.classes_ = np.union1d(self.classes_, y)
        return self

    def novelty_score(self, X):
        return np.asarray(X, dtype=float)[:, 0]

    def predict_known(self, X):
        return np.full(len(X), self.classes_[0])


def _exchangeable_draw(rng, n_classes=8, per_class=40, scale=1.0):
    y = np.repeat(np.arange(n_classes), per_class)
    X = rng.normal(scale=2.0, size=(n_classes, 4))[y] + \
        scale * rng.standard_t(3, (y.shape[0], 4))
    return X, y


def test_pvalues_are_the_conformal_formula_and_in_range(rng):
    cal = rng.normal(size=(50, 1))
    test = np.r_[rng.normal(size=(30, 1)), [[cal.max() + 1]], [[cal.min() - 1]],
                 cal[:3]]  # ties with calibration scores count as >=
    model = ScoreIsTheFeature().fit(cal, np.zeros(50, dtype=int))
    clf = ConformalNoveltyClassifier(model).fit(cal, np.zeros(50, dtype=int))
    p = clf.novelty_pvalues(test)
    brute = np.array([(1 + np.sum(cal[:, 0] >= t)) / 51 for t in test[:, 0]])
    np.testing.assert_array_equal(p, brute)
    assert p.min() == 1 / 51 and p.max() == 1.0
    assert clf.n_calibration_ == 50


def test_exact_validity_on_exchangeable_data():
    """Split conformal: P(p <= alpha) = floor(alpha (n + 1)) / (n + 1) for
    continuous scores; checked over 120 draws, not only as a bound."""
    rng = np.random.default_rng(1)
    n = 59  # (n + 1) alpha is an integer for every alpha below
    rates = {0.05: [], 0.1: [], 0.2: []}
    for _ in range(120):
        X, y = _exchangeable_draw(rng)
        rows = rng.permutation(y.shape[0])
        fit, cal, test = rows[:120], rows[120:120 + n], rows[120 + n:]
        head = CRPGaussianClassifier().fit(X[fit], y[fit])
        # Calibration classes drawn from the same rows as the test rows.
        keep = np.isin(y[cal], head.classes_)
        clf = ConformalNoveltyClassifier(head).fit(X[cal][keep], y[cal][keep])
        assert clf.n_calibration_ == n
        p = clf.novelty_pvalues(X[test])
        for alpha in rates:
            rates[alpha].append(np.mean(p <= alpha))
    for alpha, values in rates.items():
        mean, se = np.mean(values), np.std(values) / np.sqrt(len(values))
        exact = np.floor(alpha * (n + 1)) / (n + 1)
        assert abs(mean - exact) <= 3 * se, (alpha, mean, exact, se)


def test_mondrian_holds_alpha_within_every_class():
    """One class is five times as spread: pooled p-values over-flag it, the
    class-conditional ones hold alpha within it."""
    rng = np.random.default_rng(2)
    alpha, pooled, mondrian = 0.1, [], []
    for _ in range(40):
        y = np.repeat(np.arange(6), 80)
        X = rng.normal(scale=6.0, size=(6, 3))[y] + rng.normal(size=(480, 3)) * \
            np.where(y == 0, 5.0, 1.0)[:, None]
        rows = rng.permutation(480)
        fit, cal, test = rows[:160], rows[160:320], rows[320:]
        head = CRPGaussianClassifier().fit(X[fit], y[fit])
        wide = test[y[test] == 0]
        for flag, out in ((False, pooled), (True, mondrian)):
            clf = ConformalNoveltyClassifier(head, mondrian=flag).fit(X[cal], y[cal])
            out.append(np.mean(clf.novelty_pvalues(X[wide]) <= alpha))
    se = np.std(mondrian) / np.sqrt(len(mondrian))
    assert np.mean(mondrian) <= alpha + 2 * se
    assert np.mean(pooled) > alpha + 0.1  # what the class-conditional form fixes


def _bh_brute_force(p, q):
    order = np.argsort(p)
    n = p.shape[0]
    passed = np.flatnonzero(p[order] <= q * np.arange(1, n + 1) / n)
    selected = np.zeros(n, dtype=bool)
    if passed.size:
        selected[order[: passed.max() + 1]] = True
    return selected


def test_select_novel_is_benjamini_hochberg_and_controls_fdr():
    rng = np.random.default_rng(3)
    q, fdp, power = 0.1, [], []
    for _ in range(40):
        # 400 calibration rows: BH needs p-values well below q / n to select.
        X, y = _exchangeable_draw(rng, n_classes=12, per_class=100)
        known = y < 8
        X[~known] += 8.0  # new classes away from the known ones
        rows = rng.permutation(np.flatnonzero(known))
        fit, cal, test_known = rows[:200], rows[200:600], rows[600:]
        head = CRPGaussianClassifier(covariance="isotropic").fit(X[fit], y[fit])
        clf = ConformalNoveltyClassifier(head).fit(X[cal], y[cal])
        batch = np.r_[test_known, rng.choice(np.flatnonzero(~known), 40,
                                             replace=False)]
        is_novel = ~known[batch]
        selected = clf.select_novel(X[batch], fdr=q)
        np.testing.assert_array_equal(
            selected, _bh_brute_force(clf.novelty_pvalues(X[batch]), q))
        fdp.append(np.sum(selected & ~is_novel) / max(1, selected.sum()))
        power.append(np.mean(selected[is_novel]))
    assert np.mean(fdp) <= q + 2 * np.std(fdp) / np.sqrt(len(fdp))
    assert np.mean(power) > 0.3  # it finds new classes, not only stays silent


def test_predict_is_best_known_class_or_novel_at_alpha(rng):
    X, y = _exchangeable_draw(rng)
    head = CRPGaussianClassifier().fit(X[::2], y[::2])
    clf = ConformalNoveltyClassifier(head, alpha=0.2).fit(X[1::2], y[1::2])
    queries = np.r_[X[:20], X[:5] + 40.0]
    y_pred = clf.predict(queries)
    novel = clf.novelty_pvalues(queries) <= 0.2
    np.testing.assert_array_equal(y_pred == clf.novel_label_, novel)
    assert novel[-5:].all()
    proba = np.asarray(head.predict_proba(queries))[:, :-1]
    np.testing.assert_array_equal(y_pred[~novel],
                                  head.classes_[proba.argmax(axis=1)][~novel])


@pytest.mark.parametrize("estimator", [CRPGaussianClassifier(), NCMClassifier()])
def test_cross_conformal_fits_folds_and_is_near_alpha(estimator):
    rng = np.random.default_rng(4)
    rates = []
    for _ in range(10):
        X, y = _exchangeable_draw(rng)
        rows = rng.permutation(y.shape[0])
        train, test = rows[:220], rows[220:]
        clf = ConformalNoveltyClassifier(estimator, cv=3, random_state=0).fit(
            X[train], y[train])
        assert len(clf._models()) == 4 and clf.n_calibration_ == 220
        rates.append(np.mean(clf.novelty_pvalues(X[test]) <= 0.1))
    assert 0.03 <= np.mean(rates) <= 0.1 + 2 * np.std(rates) / np.sqrt(10) + 0.02


def test_stream_decides_before_learning_and_recalibrates():
    rng = np.random.default_rng(5)
    X, y = _exchangeable_draw(rng, n_classes=14)
    known = y < 6
    rows = rng.permutation(np.flatnonzero(known))
    head = CRPGaussianClassifier().fit(X[rows[:90]], y[rows[:90]])
    clf = ConformalNoveltyClassifier(head, alpha=0.1).fit(X[rows[90:180]],
                                                          y[rows[90:180]])
    stream = rng.permutation(np.r_[rows[180:], np.flatnonzero(~known)])[:80]
    loop = copy.deepcopy(clf)
    expected = []
    for i in stream:
        expected.append(loop.novelty_pvalues(X[i : i + 1])[0])
        loop.partial_fit(X[i : i + 1], y[i : i + 1])
    out = clf.open_world_step(X[stream], y[stream])
    np.testing.assert_allclose(out.p_novel, expected)
    first = [np.flatnonzero(y[stream] == label)[0] for label in np.unique(y[stream])
             if label >= 6]
    assert out.is_novel[first].all() and out.is_novel.sum() == len(first)
    np.testing.assert_array_equal(clf.classes_, loop.classes_)
    # The calibration rows are re-scored under the model that learned new
    # classes: the same p-values as a fresh wrapper around the updated head.
    fresh = ConformalNoveltyClassifier(clf.estimator_).fit(X[rows[90:180]],
                                                          y[rows[90:180]])
    np.testing.assert_array_equal(clf.novelty_pvalues(X[:30]),
                                  fresh.novelty_pvalues(X[:30]))


def test_add_calibration_covers_a_class_learned_online(rng):
    X, y = _exchangeable_draw(rng)
    head = CRPGaussianClassifier().fit(X[(y < 6)][::2], y[y < 6][::2])
    clf = ConformalNoveltyClassifier(head, mondrian=True).fit(
        X[y < 6][1::2], y[y < 6][1::2])
    new = np.flatnonzero(y == 6)
    clf.partial_fit(X[new[:10]], y[new[:10]])
    before = clf.n_calibration_
    clf.add_calibration(X[new[10:25]], y[new[10:25]])
    assert clf.n_calibration_ == before + 15
    with pytest.raises(ValueError, match="known classes"):
        clf.add_calibration(X[y == 7][:2], y[y == 7][:2])


def test_bad_input_fails_before_any_state(rng):
    X, y = _exchangeable_draw(rng)
    with pytest.raises(NotFittedError):
        ConformalNoveltyClassifier(CRPGaussianClassifier()).fit(X, y)
    head = CRPGaussianClassifier().fit(X[y < 6], y[y < 6])
    with pytest.raises(ValueError, match="classes the estimator knows"):
        ConformalNoveltyClassifier(head).fit(X, y)
    with pytest.raises(ValueError, match="mondrian=True needs calibration rows"):
        ConformalNoveltyClassifier(head, mondrian=True).fit(X[y < 3], y[y < 3])
    few = np.r_[0:3, 40:43]  # two classes of three rows
    with pytest.raises(ValueError, match="at least 5 rows"):
        ConformalNoveltyClassifier(cv=5).fit(X[few], y[few])
    clf = ConformalNoveltyClassifier(head).fit(X[y < 6][1::2], y[y < 6][1::2])
    with pytest.raises(ValueError, match="fdr"):
        clf.select_novel(X[:3], fdr=1.5)
    snapshot = (clf.classes_.copy(), clf.novelty_pvalues(X).copy())
    calls = {"n": 0}
    real = CRPGaussianClassifier.partial_fit

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CRPGaussianClassifier, "partial_fit", interrupted)
        with pytest.raises(KeyboardInterrupt):
            clf.open_world_step(X[y >= 6][:20], y[y >= 6][:20])
    np.testing.assert_array_equal(clf.classes_, snapshot[0])
    np.testing.assert_array_equal(clf.novelty_pvalues(X), snapshot[1])


def test_in_scikit_learn_tools_and_saved(rng):
    X, y = _exchangeable_draw(rng)
    head = CRPGaussianClassifier().fit(X[::2], y[::2])
    clf = ConformalNoveltyClassifier(head, alpha=0.1).fit(X[1::2], y[1::2])
    assert clone(clf).get_params()["alpha"] == 0.1
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.novelty_pvalues(X), clf.novelty_pvalues(X))
    buffer = io.BytesIO()
    sklearn_flowr.save(clf, buffer)
    loaded = sklearn_flowr.load(io.BytesIO(buffer.getvalue()))
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


def test_wraps_a_fitted_flowr_classifier():
    from sklearn_flowr.training._examples import flowr_example

    model, X, y = flowr_example("large")  # knows digits 0-4
    known = np.flatnonzero(y < 5)[1::4]
    clf = ConformalNoveltyClassifier(model, alpha=0.1).fit(X[known], y[known])
    p = clf.novelty_pvalues(X[y == 8][:10])
    assert p.shape == (10,) and (p >= 1 / (known.size + 1)).all()
    out = clf.open_world_step(X[y == 8][:3], y[y == 8][:3])
    np.testing.assert_array_equal(out.is_novel, [True, False, False])


def test_defaults_fail_clearly_and_folds_search_in_scikit_learn(rng):
    from sklearn.model_selection import GridSearchCV

    X, y = _exchangeable_draw(rng)
    with pytest.raises(ValueError, match="cv='prefit' calibrates an estimator"):
        ConformalNoveltyClassifier().fit(X, y)
    search = GridSearchCV(ConformalNoveltyClassifier(cv=3, random_state=0),
                          {"alpha": [0.05, 0.2]}, cv=3).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_estimator_.predict(X[:5]).shape == (5,)


def test_leave_group_out_pvalues_brute_force_and_validity():
    """Check leave_group_out_pvalues against a brute-force loop (each row
    against the calibration rows of the other groups) and its validity on
    exchangeable groups: over many draws the share of known rows with
    p <= alpha is at most alpha (within Monte-Carlo error) and not far
    below it."""
    from sklearn_flowr.conformal import leave_group_out_pvalues

    rng = np.random.default_rng(3)
    scores = np.round(rng.normal(size=60), 1)  # ties included
    is_calibration = rng.random(60) < 0.7
    groups = rng.integers(0, 5, 60)
    expected = np.empty(60)
    for i in range(60):
        reference = scores[is_calibration & (groups != groups[i])]
        expected[i] = (1 + np.sum(reference >= scores[i])) / (reference.shape[0] + 1)
    got = leave_group_out_pvalues(scores, is_calibration, groups)
    assert np.array_equal(got, expected)
    # Exchangeable groups: each group draws a shared shift (task effect)
    # and rows around it; known rows come from the same law everywhere.
    hits, n_rows = {0.05: 0, 0.1: 0}, 0
    for draw in range(40):
        rng = np.random.default_rng(draw)
        groups = np.repeat(np.arange(30), 20)
        scores = rng.normal(size=30)[groups] * 0.5 + rng.normal(size=600)
        pvalues = leave_group_out_pvalues(scores, np.ones(600, bool), groups)
        n_rows += 600
        for alpha in hits:
            hits[alpha] += int(np.sum(pvalues <= alpha))
    for alpha, count in hits.items():
        rate = count / n_rows
        assert alpha - 0.03 <= rate <= alpha + 0.02, (alpha, rate)
    with pytest.raises(ValueError, match="at least two groups"):
        leave_group_out_pvalues([0.1, 0.2], [True, True], [0, 0])
    with pytest.raises(ValueError, match="one value per row"):
        leave_group_out_pvalues([0.1, 0.2], [True], [0, 1])
    with pytest.raises(ValueError, match="NaN"):
        leave_group_out_pvalues([np.nan, 0.2], [True, True], [0, 1])


@pytest.mark.parametrize("wrapper", [ConformalNoveltyClassifier(cv=2),
                                     NoveltyCalibratedClassifier(cv=2)])
def test_mixed_object_labels_fail_clearly(rng, wrapper):
    """Check labels of strings and numbers in one object array are refused
    with a ValueError naming the problem (not a TypeError from sorting)."""
    X, y = _exchangeable_draw(rng, n_classes=4, per_class=6)
    mixed = np.array([label if label % 2 else f"c{label}" for label in y],
                     dtype=object)
    with pytest.raises(ValueError, match="mixes labels of types"):
        clone(wrapper).fit(X, mixed)


def test_add_calibration_takes_an_array_after_a_data_frame(rng):
    """Check rows given as an array join calibration rows given as a
    DataFrame (as its columns): the p-values are those of the same rows
    given as a DataFrame; rows of another width fail clearly, changing
    nothing."""
    pd = pytest.importorskip("pandas")
    X, y = _exchangeable_draw(rng, n_classes=4, per_class=20)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    head = CRPGaussianClassifier().fit(frame.iloc[::2], y[::2])
    clf = ConformalNoveltyClassifier(head).fit(frame.iloc[1::2], y[1::2])
    as_frame = copy.deepcopy(clf).add_calibration(frame.iloc[:6], y[:6])
    clf.add_calibration(X[:6], y[:6])
    assert clf.n_calibration_ == as_frame.n_calibration_ == 46
    np.testing.assert_array_equal(clf.novelty_pvalues(frame.iloc[:9]),
                                  as_frame.novelty_pvalues(frame.iloc[:9]))
    with pytest.raises(ValueError, match="4 columns"):
        clf.add_calibration(X[:2, :3], y[:2])
    assert clf.n_calibration_ == 46


def test_add_calibration_keeps_one_model_per_fold(rng):
    """Check add_calibration leaves the calibration rows scored by the model
    the wrapper learns in (not a copy of it that would learn apart)."""
    X, y = _exchangeable_draw(rng)
    head = CRPGaussianClassifier().fit(X[y < 6][::2], y[y < 6][::2])
    clf = ConformalNoveltyClassifier(head).fit(X[y < 6][1::2], y[y < 6][1::2])
    clf.add_calibration(X[y < 6][:4], y[y < 6][:4])
    assert clf._models() == [clf.estimator_]
