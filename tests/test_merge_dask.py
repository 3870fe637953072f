"""Tests of CRPGaussianClassifier.merge and of fit on Dask arrays
(sklearn_flowr/_merge.py, sklearn_flowr/_class_moments.py)."""

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.covariance import ledoit_wolf_shrinkage
from sklearn.naive_bayes import GaussianNB

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr._core import estimate_prior
from sklearn_flowr._core._empirical_bayes import (
    _ledoit_wolf_shrinkage,
    combine_moments,
    feature_scale_of,
    moments_of_rows,
    noise_covariance_of,
    noise_var_of,
    prior_of,
)

FITTED = ("classes_", "class_count_", "crp_count_", "frozen_classes_",
          "class_mean_", "class_var_", "prior_mean_", "prior_var_", "sigma_", "b_",
          "novel_label_", "n_features_in_")

D = 5
# Every way the head estimates or takes its prior and noise.
CONFIGS = {
    "isotropic-auto": {"covariance": "isotropic"},
    "diagonal-prior": {"covariance": "isotropic",
                       "prior_var": np.linspace(1.0, 3.0, D)},
    "full-auto": {"covariance": "full"},
    "full-shrunk-scaled": {"covariance": "full", "noise_shrinkage": 0.3,
                           "prior_scale": 2.0},
    "isotropic-given": {"covariance": "isotropic", "sigma": 0.5, "prior_mean": 0.0,
                        "prior_var": 4.0, "b": 1.0},
    "full-given": {"covariance": "full", "sigma": 0.2 * np.eye(D) + 0.1,
                   "prior_mean": 0.0, "prior_var": 9.0, "b": 2.0},
    "observed-counts": {"covariance": "isotropic", "known_count": "observed",
                        "a": 0.2},
}


def make_rows(rng, n=240, n_classes=7, scale=1.0, shift=0.0):
    """Correlated Gaussian classes (full noise) with uneven sizes."""
    centres = rng.normal(scale=3.0, size=(n_classes, D))
    y = rng.choice(n_classes, size=n, p=np.arange(1, n_classes + 1)
                   / (n_classes * (n_classes + 1) / 2))
    mixing = rng.normal(size=(D, D))
    X = centres[y] + 0.5 * rng.normal(size=(n, D)) @ mixing
    return X * scale + shift, y


def assert_same_head(head, reference, X, rtol=1e-10):
    """Every fitted attribute and the probabilities agree to ``rtol``."""
    for name in FITTED:
        got, want = getattr(head, name), getattr(reference, name)
        if np.asarray(want).dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol,
                                       atol=rtol * np.abs(want).max(), err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
            assert np.asarray(got).dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(head.predict_proba(X), reference.predict_proba(X),
                               rtol=0, atol=rtol)
    # merge pools the parts' held-out scores, which fit on the union cannot
    # reproduce: the argmax rule is compared here (test_head_decision.py).
    np.testing.assert_array_equal(*(copy.deepcopy(h).set_params(
        novelty_alpha=None).predict(X) for h in (head, reference)))


def fingerprint(head):
    """Bytes that change whenever any state of the head does."""
    return pickle.dumps(head)


# -------------------------------------------------------------------- merging
@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
@pytest.mark.parametrize("classes", ["shared", "disjoint"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_merge_equals_fit_on_the_union(config, classes, seed):
    """Check that merging heads fitted on two parts gives the head fitted on
    all rows, for every covariance and hyper-parameter option."""
    rng = np.random.default_rng(seed)
    X, y = make_rows(rng, scale=10.0 ** rng.integers(-3, 4), shift=rng.normal())
    part = rng.random(y.shape[0]) < 0.4 if classes == "shared" else y >= 3
    params = CONFIGS[config]
    left = CRPGaussianClassifier(**params).fit(X[part], y[part])
    right = CRPGaussianClassifier(**params).fit(X[~part], y[~part])
    whole = CRPGaussianClassifier(**params).fit(X, y)
    assert_same_head(left.merge(right), whole, X)
    assert_same_head(right.merge(left), whole, X)


@pytest.mark.parametrize("config", ["isotropic-auto", "full-auto", "full-given"])
def test_merge_of_three_parts_in_any_grouping(rng, config):
    """Check that merging three parts in any grouping and order gives the head
    fitted on all rows."""
    X, y = make_rows(rng, n=300)
    part = rng.integers(0, 3, y.shape[0])
    part[y == 6] = 2  # a class only one part has
    a, b, c = (CRPGaussianClassifier(**CONFIGS[config]).fit(X[part == k],
                                                             y[part == k])
               for k in range(3))
    whole = CRPGaussianClassifier(**CONFIGS[config]).fit(X, y)
    for merged in (a.merge(b).merge(c), a.merge(b.merge(c)), c.merge(a.merge(b))):
        assert_same_head(merged, whole, X)


def test_merge_leaves_both_heads_unchanged(rng):
    """Check that merge returns a new head and changes neither input."""
    X, y = make_rows(rng)
    left = CRPGaussianClassifier(covariance="full").fit(X[:120], y[:120])
    right = CRPGaussianClassifier(covariance="full").fit(X[120:], y[120:])
    before = fingerprint(left), fingerprint(right)
    merged = left.merge(right)
    assert merged is not left and merged is not right
    assert merged._state is not left._state
    assert (fingerprint(left), fingerprint(right)) == before
    merged.partial_fit(X[:5] + 1.0, y[:5])  # the merged head shares no buffers
    assert (fingerprint(left), fingerprint(right)) == before


@pytest.mark.parametrize("config", ["isotropic-given", "full-given"])
def test_merge_with_given_hyper_parameters_includes_online_rows(rng, config):
    """Check that with given prior and noise, rows learned online after fit
    are merged too: the result is fit on every row both heads learned."""
    X, y = make_rows(rng)
    left = CRPGaussianClassifier(**CONFIGS[config]).fit(X[:80], y[:80])
    left.partial_fit(X[80:120], y[80:120])
    left.open_world_step(X[120:150], y[120:150])
    right = CRPGaussianClassifier(**CONFIGS[config]).fit(X[150:], y[150:])
    whole = CRPGaussianClassifier(**CONFIGS[config]).fit(X, y)
    assert_same_head(left.merge(right), whole, X)


def test_merge_with_estimated_concentration_uses_all_counts(rng):
    """Check that b="auto" with a given prior and noise is estimated again
    from the pooled class sizes, online rows included."""
    params = {**CONFIGS["isotropic-given"], "b": "auto"}
    X, y = make_rows(rng)
    left = CRPGaussianClassifier(**params).fit(X[:100], y[:100])
    left.partial_fit(X[100:150], y[100:150])
    right = CRPGaussianClassifier(**params).fit(X[150:], y[150:])
    assert_same_head(left.merge(right), CRPGaussianClassifier(**params).fit(X, y), X)


def test_merge_refuses_estimated_hyper_parameters_after_online_rows(rng):
    """Check that an "auto" head that learned rows after fit is refused,
    with the fix named, and neither head changes."""
    X, y = make_rows(rng)
    left = CRPGaussianClassifier(covariance="isotropic").fit(X[:100], y[:100])
    left.partial_fit(X[100:120], y[100:120])
    right = CRPGaussianClassifier(covariance="isotropic").fit(X[120:], y[120:])
    before = fingerprint(left), fingerprint(right)
    with pytest.raises(ValueError, match="learned rows since.*give sigma, "
                                         "prior_mean and prior_var as numbers"):
        left.merge(right)
    with pytest.raises(ValueError, match="other has learned rows since"):
        right.merge(left)
    assert (fingerprint(left), fingerprint(right)) == before
    old = pickle.loads(pickle.dumps(right))
    del old._fit_moments  # as loaded from a version before merge
    with pytest.raises(ValueError, match="saved by an older version"):
        right.merge(old)


def test_merge_after_frozen_rows_is_fit_on_the_learned_rows(rng):
    """Check that rows a frozen class skipped do not count, and that a class
    frozen in either head stays frozen in the merged head."""
    X, y = make_rows(rng)
    left = CRPGaussianClassifier(covariance="isotropic").fit(X[:100], y[:100])
    left.freeze_classes()
    left.partial_fit(X[100:110][y[100:110] < 7], y[100:110][y[100:110] < 7])
    right = CRPGaussianClassifier(covariance="isotropic").fit(X[110:], y[110:])
    merged = left.merge(right)
    whole = CRPGaussianClassifier(covariance="isotropic").fit(np.r_[X[:100], X[110:]],
                                        np.r_[y[:100], y[110:]])
    whole.freeze_classes()  # the classes are the same here
    assert_same_head(merged, whole, X)
    assert merged.frozen_classes_.all()


@pytest.mark.parametrize("change, match", [
    ({"a": 0.3}, r"same parameters.*a: 0.5 != 0.3"),
    ({"covariance": "full"}, "covariance: 'isotropic' != 'full'"),
    ({"sigma": 0.5}, "sigma: 'auto' != 0.5"),
    ({"novel_label": -7}, "novel_label"),
    ({"novelty_calibration": (1.0, 0.5)}, "novelty_calibration"),
])
def test_merge_refuses_heads_with_other_parameters(rng, change, match):
    """Check that heads with different parameters are refused by name and
    left unchanged."""
    X, y = make_rows(rng)
    left = CRPGaussianClassifier(covariance="isotropic").fit(X[:120], y[:120])
    right = CRPGaussianClassifier(**{"covariance": "isotropic", **change})
    right.fit(X[120:], y[120:])
    before = fingerprint(left), fingerprint(right)
    with pytest.raises(ValueError, match=match):
        left.merge(right)
    assert (fingerprint(left), fingerprint(right)) == before


def test_merge_refuses_other_features_labels_and_types(rng):
    """Check the errors for other feature counts, feature names, label kinds,
    unfitted heads, parameters changed after fit and other estimators."""
    X, y = make_rows(rng)
    head = CRPGaussianClassifier().fit(X[:120], y[:120])
    with pytest.raises(ValueError, match="same n_features_in_; got 5 and 4"):
        head.merge(CRPGaussianClassifier().fit(X[120:, :4], y[120:]))
    # Names as a data frame leaves them (tested with pandas below).
    named = CRPGaussianClassifier().fit(X[120:], y[120:])
    named.feature_names_in_ = np.array(list("abcde"), dtype=object)
    with pytest.raises(ValueError, match="same feature names"):
        head.merge(named)
    with pytest.raises(ValueError, match="same feature names"):
        named.merge(clone(named).fit(X[:120], y[:120]))
    with pytest.raises(ValueError, match="numeric and string labels"):
        head.merge(CRPGaussianClassifier().fit(X[120:], y[120:].astype(str)))
    with pytest.raises(ValueError, match="other is not fitted"):
        head.merge(CRPGaussianClassifier())
    with pytest.raises(TypeError, match="another CRPGaussianClassifier"):
        head.merge(GaussianNB().fit(X, y))
    changed = CRPGaussianClassifier().fit(X[120:], y[120:]).set_params(a=0.1)
    with pytest.raises(ValueError, match="parameters changed after fitting"):
        head.merge(changed)


def test_merge_refuses_other_feature_names(rng):
    """Check that heads fitted on other feature names (or on names and on an
    array) are refused, and heads fitted on the same names merge."""
    pd = pytest.importorskip("pandas")

    X, y = make_rows(rng)
    frame = pd.DataFrame(X, columns=list("abcde"))
    named = CRPGaussianClassifier(covariance="isotropic").fit(frame[:120], y[:120])
    with pytest.raises(ValueError, match="same feature names"):
        named.merge(CRPGaussianClassifier(covariance="isotropic").fit(X[120:], y[120:]))
    with pytest.raises(ValueError, match="same feature names"):
        named.merge(CRPGaussianClassifier(covariance="isotropic").fit(
            frame[list("edcba")][120:], y[120:]))
    merged = named.merge(
        CRPGaussianClassifier(covariance="isotropic").fit(frame[120:], y[120:]))
    assert_same_head(
        merged, CRPGaussianClassifier(covariance="isotropic").fit(frame, y), frame)
    np.testing.assert_array_equal(merged.feature_names_in_, list("abcde"))


def test_merge_refuses_class_embeddings():
    """Check that classes given as embeddings (no rows) are refused."""
    params = {"covariance": "isotropic", "b": 1.0, "sigma": 0.5}
    given = CRPGaussianClassifier(**params).fit_class_embeddings(
        ["a", "b"], [[0.0, 0.0], [3.0, 3.0]], [0.1, 0.1])
    fitted = CRPGaussianClassifier(**params).fit([[0.0, 1.0], [5.0, 5.0]], ["a", "c"])
    with pytest.raises(ValueError, match=r"\['a', 'b'\] given as embeddings"):
        given.merge(fitted)


def test_merge_resolves_the_novel_label_from_the_union(rng):
    """Check that an "auto" novel label is chosen for the union's labels, as
    fit on the union chooses it, even when one part uses the other's."""
    X, y = make_rows(rng, n_classes=4)
    y = y - 1  # labels -1 .. 2
    in_left = (y >= 0) & (rng.random(y.shape[0]) < 0.6)
    left = CRPGaussianClassifier(covariance="isotropic").fit(X[in_left], y[in_left])
    right = CRPGaussianClassifier(covariance="isotropic").fit(X[~in_left], y[~in_left])
    assert left.novel_label_ == -1
    merged = left.merge(right)
    whole = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    assert merged.novel_label_ == whole.novel_label_ == -2
    assert_same_head(merged, whole, X)


def test_merged_head_clones_pickles_and_learns_on(rng):
    """Check that a merged head clones to its parameters, survives pickle and
    skops with the same predictions, and learns online like a fitted one."""
    X, y = make_rows(rng)
    params = CONFIGS["full-shrunk-scaled"]
    merged = CRPGaussianClassifier(**params).fit(X[:120], y[:120]).merge(
        CRPGaussianClassifier(**params).fit(X[120:], y[120:]))
    unfitted = clone(merged)
    assert not unfitted.__sklearn_is_fitted__()
    assert unfitted.get_params()["noise_shrinkage"] == 0.3
    restored = pickle.loads(pickle.dumps(merged))
    np.testing.assert_array_equal(restored.predict_proba(X), merged.predict_proba(X))
    assert_same_head(restored.merge(restored), merged.merge(merged), X)
    whole = CRPGaussianClassifier(**params).fit(X, y)
    new_rows = X[:10] + 2.0
    assert_same_head(merged.partial_fit(new_rows, np.r_[y[:9], 99]),
                     whole.partial_fit(new_rows, np.r_[y[:9], 99]), X)


def test_merged_head_round_trips_through_skops(rng, tmp_path):
    """Check that the package's skops helpers save and load a merged head
    (its kept statistics are plain arrays)."""
    pytest.importorskip("skops")
    from sklearn_flowr.saving import load, save

    X, y = make_rows(rng)
    merged = CRPGaussianClassifier(covariance="full").fit(X[:120], y[:120]).merge(
        CRPGaussianClassifier(covariance="full").fit(X[120:], y[120:]))
    save(merged, tmp_path / "head.skops")
    restored = load(tmp_path / "head.skops")
    np.testing.assert_array_equal(restored.predict_proba(X), merged.predict_proba(X))
    assert_same_head(restored.merge(merged), merged.merge(merged), X)


# --------------------------------------------------------- moments, estimates
def test_combined_moments_equal_the_moments_of_the_union(rng):
    """Check that the pairwise combination gives the moments of all rows,
    the fourth moments included, for rows far from the origin."""
    X, y = make_rows(rng, scale=1e3, shift=1e6)
    part = rng.random(y.shape[0]) < 0.5
    parts = []
    for rows in (part, ~part):
        labels, index = np.unique(y[rows], return_inverse=True)
        parts.append({"labels": labels,
                      **moments_of_rows(X[rows], index, labels.shape[0], fourth=True)})
    union = combine_moments(*parts)
    whole = moments_of_rows(X, y, 7, fourth=True)
    for key in ("count", "mean", "scatter_trace", "scatter"):
        np.testing.assert_allclose(union[key], whole[key], rtol=1e-10, err_msg=key)
    ratio = whole["unit"] / union["unit"]
    np.testing.assert_allclose(union["cube"], whole["cube"] * ratio**3, rtol=1e-8,
                               atol=1e-10 * np.abs(whole["cube"] * ratio**3).max())
    np.testing.assert_allclose(union["quartic"], whole["quartic"] * ratio**4,
                               rtol=1e-10)


def test_estimates_from_moments_equal_those_from_rows(rng):
    """Check that every empirical-Bayes estimate computed from the moments
    equals fit's own from the rows."""
    X, y = make_rows(rng)
    moments = moments_of_rows(X, y, 7, fourth=True)
    one_class = moments_of_rows(X, np.zeros(X.shape[0], np.intp), 1)
    assert feature_scale_of(moments) == pytest.approx(feature_scale_of(one_class),
                                                      rel=1e-12)
    assert noise_var_of(moments) == pytest.approx(
        noise_var_of(moments_of_rows(X, y, 7)), rel=1e-12)
    mean, var = prior_of(moments, full=False)
    want_mean, want_var = estimate_prior(X, y, 7)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-12)
    np.testing.assert_allclose(var, [want_var], rtol=1e-12)
    mean, cov = prior_of(moments, full=True)
    want_mean, want_cov = prior_of(moments_of_rows(X, y, 7), full=True)
    np.testing.assert_allclose(cov, want_cov, rtol=1e-12)
    np.testing.assert_allclose(
        noise_covariance_of(moments, extra_shrinkage=0.2),
        noise_covariance_of(moments_of_rows(X, y, 7, fourth=True, pooled=True),
                            extra_shrinkage=0.2), rtol=1e-12)
    residual = X - moments["mean"][y]
    unit = moments["unit"]
    assert _ledoit_wolf_shrinkage(
        X.shape[0], residual.T @ residual / unit**2, moments["quartic"].sum()
    ) == pytest.approx(ledoit_wolf_shrinkage(residual, assume_centered=True),
                       rel=1e-12)


def test_estimates_from_moments_need_the_same_rows_as_fit():
    """Check that one row per class, or one class, fails as fit fails."""
    one_row_each = moments_of_rows(np.eye(3), np.arange(3), 3)
    with pytest.raises(ValueError, match="needs a class with at least 2 samples"):
        noise_var_of(one_row_each)
    one_class = moments_of_rows(np.eye(3), np.zeros(3, dtype=int), 1)
    with pytest.raises(ValueError, match="needs at least 2 classes"):
        prior_of(one_class, full=False)


# ----------------------------------------------------------------------- Dask
@pytest.mark.parametrize("config", ["isotropic-auto", "diagonal-prior", "full-auto",
                                    "full-given", "observed-counts"])
@pytest.mark.parametrize("dask_labels", [True, False])
def test_dask_fit_equals_numpy_fit(rng, config, dask_labels):
    """Check that fit on a Dask array of several chunks (some without every
    class, labels as a Dask or a NumPy array) equals fit in memory."""
    da = pytest.importorskip("dask.array")
    import dask

    X, y = make_rows(rng, n=300)
    order = np.argsort(y, kind="stable")  # chunks see few classes each
    X, y = X[order], y[order]
    X_dask = da.from_array(X, chunks=((37, 90, 1, 100, 72), (3, 2)))
    y_in = da.from_array(y, chunks=60) if dask_labels else y
    head = CRPGaussianClassifier(**CONFIGS[config])
    with dask.config.set(scheduler="threads"):
        assert head.fit(X_dask, y_in) is head
    whole = CRPGaussianClassifier(**CONFIGS[config]).fit(X, y)
    assert_same_head(head, whole, X)
    np.testing.assert_allclose(head.conformal_scores_, whole.conformal_scores_,
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(head.predict(X), whole.predict(X))
    assert_same_head(head.merge(head), CRPGaussianClassifier(
        **CONFIGS[config]).fit(np.r_[X, X], np.r_[y, y]), X)


def test_dask_fit_on_a_distributed_cluster(rng):
    """Check that fit on a Dask array runs on an active distributed Client's
    cluster and equals fit in memory, string labels included."""
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")

    X, y = make_rows(rng, n=300)
    labels = np.array(["ant", "bee", "cat", "dog", "eel", "fox", "gnu"])[y]
    cluster = distributed.LocalCluster(processes=False, n_workers=1,
                                       threads_per_worker=2, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        with distributed.get_task_stream(client) as tasks:
            head = CRPGaussianClassifier(covariance="full").fit(
                da.from_array(X, chunks=(50, D)), da.from_array(labels, chunks=50))
    assert len(tasks.data) >= 6  # the chunks' moments ran on the cluster
    whole = CRPGaussianClassifier(covariance="full").fit(X, labels)
    assert_same_head(head, whole, X)


def test_dask_fit_refuses_bad_input_and_keeps_the_head(rng):
    """Check that bad chunks fail with fit's errors and a fitted head stays
    as it was."""
    da = pytest.importorskip("dask.array")
    import dask

    X, y = make_rows(rng)
    head = CRPGaussianClassifier(covariance="isotropic").fit(X, y)
    before = fingerprint(head)
    bad = X.copy()
    bad[200, 1] = np.nan
    with dask.config.set(scheduler="sync"):
        with pytest.raises(ValueError, match="Input contains NaN"):
            head.fit(da.from_array(bad, chunks=50), y)
        with pytest.raises(ValueError, match="novel label 3"):
            clone(head).set_params(novel_label=3).fit(da.from_array(X, chunks=50), y)
        with pytest.raises(ValueError, match=r"y must have shape \(240,\)"):
            head.fit(da.from_array(X, chunks=50), y[:-1])
        with pytest.raises(ValueError, match="X has a NaN chunk size|chunk sizes"):
            head.fit(da.from_array(X, chunks=50)[da.from_array(y, chunks=50) > 0],
                     y[y > 0])
        with pytest.raises(ValueError, match="needs a class with at least 2"):
            head.fit(da.from_array(X[:3], chunks=2), np.arange(3))
    assert fingerprint(head) == before


def test_import_and_numpy_fit_do_not_import_dask():
    """Check that importing the package and fitting on arrays leave Dask
    unimported."""
    code = ("import sys, numpy as np; import sklearn_flowr; "
            "h = sklearn_flowr.CRPGaussianClassifier().fit("
            "np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 4); "
            "h.merge(h); assert 'dask' not in sys.modules, 'dask imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_full_covariance_moments_are_capped(monkeypatch):
    """A full-covariance "auto" head keeps no per-class moments beyond
    MAX_KEPT_VALUES (memory stays near the state's); merging it then names
    the fix, and with numeric hyper-parameters it merges exactly."""
    from sklearn_flowr.head import _merge

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 10)
    X = rng.normal(size=(6, 4))[y] * 5 + rng.normal(size=(60, 4))
    monkeypatch.setattr(_merge, "MAX_KEPT_VALUES", 6 * 4 * 4 - 1)
    head = CRPGaussianClassifier(covariance="full").fit(X[::2], y[::2])
    assert head._fit_moments is None
    other = CRPGaussianClassifier(covariance="full").fit(X[1::2], y[1::2])
    with pytest.raises(ValueError, match="exceed"):
        head.merge(other)
    fixed = dict(sigma=head.sigma_, prior_mean=head.prior_mean_,
                 prior_var=head.prior_var_, b=head.b_)
    merged = CRPGaussianClassifier(covariance="full", **fixed).fit(
        X[::2], y[::2]).merge(CRPGaussianClassifier(covariance="full", **fixed)
                              .fit(X[1::2], y[1::2]))
    union = CRPGaussianClassifier(covariance="full", **fixed).fit(X, y)
    np.testing.assert_allclose(merged.predict_proba(X), union.predict_proba(X),
                               atol=1e-10)
