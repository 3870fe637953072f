"""Tests of sklearn_flowr.metrics._discovery: clustering accuracy and the
discovery report."""

import itertools
from collections import Counter

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from sklearn_flowr.metrics import clustering_accuracy, discovery_report


def _brute_force_accuracy(y_true, y_pred):
    """Best accuracy over every one-to-one map of clusters to classes, by
    trying them all (a cluster may also map to no class, None)."""
    clusters = list(dict.fromkeys(y_pred))
    classes = list(dict.fromkeys(y_true))
    pairs = Counter(zip(y_pred, y_true, strict=True))
    best = 0
    for image in itertools.product(classes + [None], repeat=len(clusters)):
        matched = [c for c in image if c is not None]
        if len(matched) != len(set(matched)):
            continue  # two clusters on one class: not one-to-one
        best = max(best, sum(pairs[p, c] for p, c in zip(clusters, image,
                                                          strict=True)))
    return best / len(y_true)


def _random_labelling(rng, n_rows, n_classes, n_clusters):
    return (rng.integers(n_classes, size=n_rows).tolist(),
            rng.integers(n_clusters, size=n_rows).tolist())


@pytest.mark.parametrize("n_classes, n_clusters", [(1, 1), (2, 4), (4, 2), (3, 3),
                                                   (5, 5), (4, 5)])
def test_clustering_accuracy_matches_brute_force(rng, n_classes, n_clusters):
    """Check that the Hungarian accuracy equals the best of all one-to-one maps,
    with as many, more and fewer clusters than classes."""
    for _ in range(15):
        y_true, y_pred = _random_labelling(rng, 12, n_classes, n_clusters)
        assert clustering_accuracy(y_true, y_pred) == pytest.approx(
            _brute_force_accuracy(y_true, y_pred))


def test_clustering_accuracy_is_invariant_to_renaming(rng):
    """Check that renaming clusters or classes (even to another type) leaves
    the accuracy unchanged."""
    y_true, y_pred = _random_labelling(rng, 30, 4, 5)
    reference = clustering_accuracy(y_true, y_pred)
    cluster_names = rng.permutation(5)
    class_names = ["a", "b", "c", "d"]
    renamed_pred = [f"new-{cluster_names[p]}" for p in y_pred]
    renamed_true = [class_names[t] for t in y_true]
    assert clustering_accuracy(renamed_true, renamed_pred) == reference
    assert clustering_accuracy(y_pred, y_true) == reference


def test_clustering_accuracy_mixed_label_types():
    """Check that predicted labels mixing ints and provisional strings work and
    that 1 and "1" are different clusters."""
    y_true = np.array([0, 0, 1, 1, 2, 2])
    y_pred = [0, 0, 1, "1", "new-1", "new-1"]
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(5 / 6)


def test_clustering_accuracy_one_cluster():
    """Check that a single cluster scores the share of the largest class."""
    assert clustering_accuracy([0, 0, 1, 2], ["x"] * 4) == 0.5
    assert clustering_accuracy([3, 3, 3], [9, 9, 9]) == 1.0


@pytest.mark.parametrize(
    "y_true, y_pred, message",
    [([0, 1, 2], [0, 1], "inconsistent numbers of samples"),
     ([], [], "empty"),
     ([0.0, np.nan], [0, 1], "y_true contains NaN"),
     ([[0, 1], [1, 0]], [0, 1], "y should be a 1d array")],
)
def test_clustering_accuracy_bad_input(y_true, y_pred, message):
    """Check that bad input fails with a message naming the problem."""
    with pytest.raises(ValueError, match=message):
        clustering_accuracy(y_true, y_pred)


def _brute_force_report(y_true, y_pred, known_classes):
    known = [t in known_classes for t in y_true]
    new_true = [t for t, k in zip(y_true, known, strict=True) if not k]
    new_pred = [p for p, k in zip(y_pred, known, strict=True) if not k]
    known_hits = [p == t for t, p, k in zip(y_true, y_pred, known, strict=True) if k]
    return dict(
        accuracy_new=_brute_force_accuracy(new_true, new_pred),
        accuracy_all=_brute_force_accuracy(y_true, y_pred),
        known_accuracy=sum(known_hits) / len(known_hits),
        n_discovered=len({p for p in y_pred if p not in known_classes}),
        n_true_new=len(set(new_true)),
    )


def test_discovery_report_matches_brute_force(rng):
    """Check every accuracy and count against a direct computation, and NMI and
    ARI against scikit-learn on integer codes of the same rows."""
    known_classes = [0, 1, 2]
    for _ in range(10):
        y_true = rng.integers(5, size=14).tolist()
        # Predictions: known classes or provisional labels.
        choices = [0, 1, 2, "new-1", "new-2"]
        y_pred = [choices[i] for i in rng.integers(5, size=14)]
        y_true[:2] = [0, 3]  # at least one known and one new row
        report = discovery_report(y_true, y_pred, known_classes)
        expected = _brute_force_report(y_true, y_pred, known_classes)
        for key, value in expected.items():
            assert report[key] == pytest.approx(value), key
        codes = {label: i for i, label in enumerate(choices)}
        pred_codes = [codes[p] for p in y_pred]
        new = [t not in known_classes for t in y_true]
        new_true = np.array(y_true)[new]
        new_pred = np.array(pred_codes)[new]
        assert report.nmi_all == pytest.approx(
            normalized_mutual_info_score(y_true, pred_codes))
        assert report.ari_all == pytest.approx(adjusted_rand_score(y_true, pred_codes))
        assert report.nmi_new == pytest.approx(
            normalized_mutual_info_score(new_true, new_pred))
        assert report.ari_new == pytest.approx(adjusted_rand_score(new_true, new_pred))
        assert report.n_new == sum(new)
        assert report.n_known == len(y_true) - sum(new)


def test_discovery_report_is_invariant_to_renaming_discoveries(rng):
    """Check that renaming the provisional labels changes nothing."""
    y_true = [0, 0, 1, 5, 5, 6, 6, 7]
    y_pred = [0, 1, 1, "new-1", "new-1", "new-2", "new-3", "new-3"]
    renamed = {"new-1": "x", "new-2": "y", "new-3": "z"}
    other = [renamed.get(p, p) for p in y_pred]
    first = discovery_report(y_true, y_pred, [0, 1])
    second = discovery_report(y_true, other, [0, 1])
    assert first == second


def test_discovery_report_perfect_discovery():
    """Check that a stream whose new classes were found exactly scores 1."""
    y_true = ["cat", "dog", "owl", "owl", "yak"]
    y_pred = ["cat", "dog", "new-1", "new-1", "new-2"]
    report = discovery_report(y_true, y_pred, ["cat", "dog"])
    assert report.accuracy_new == report.accuracy_all == report.known_accuracy == 1.0
    assert report.nmi_new == report.ari_new == 1.0
    assert report.n_discovered == report.n_true_new == 2


def test_discovery_report_counts_false_discoveries():
    """Check that a class opened from known-class rows only counts as
    discovered, while the novel label does not."""
    y_true = [0, 0, 1, 9]
    y_pred = [0, "new-1", -1, "new-2"]
    report = discovery_report(y_true, y_pred, [0, 1], novel_label=-1)
    assert report.n_discovered == 2
    assert report.n_true_new == 1
    assert report.known_accuracy == pytest.approx(1 / 3)
    assert discovery_report(y_true, y_pred, [0, 1]).n_discovered == 3


def test_discovery_report_all_rows_known():
    """Check that without new rows the new-class scores are NaN, as documented."""
    report = discovery_report([0, 1, 1], [0, 1, 0], [0, 1])
    assert np.isnan(report.accuracy_new)
    assert np.isnan(report.nmi_new) and np.isnan(report.ari_new)
    assert report.n_true_new == 0 and report.n_new == 0
    assert report.known_accuracy == pytest.approx(2 / 3)


def test_discovery_report_no_known_class():
    """Check that with no known class every row is new: the new and all
    scores agree and the known accuracy is NaN."""
    report = discovery_report([3, 3, 4], ["a", "a", "b"], [])
    assert report.accuracy_new == report.accuracy_all == 1.0
    assert np.isnan(report.known_accuracy)
    assert report.n_discovered == report.n_true_new == 2


@pytest.mark.parametrize(
    "y_true, y_pred, message",
    [([0, 1, 2], [0, 1], "inconsistent numbers of samples"),
     ([], [], "empty")],
)
def test_discovery_report_bad_input(y_true, y_pred, message):
    """Check that bad input fails with a message naming the problem."""
    with pytest.raises(ValueError, match=message):
        discovery_report(y_true, y_pred, [0])
