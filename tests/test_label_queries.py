"""Tests of choose_rows_to_label: which unlabelled rows to ask a person about."""

import numpy as np
import pytest
from sklearn.utils import Bunch

from sklearn_flowr import CRPGaussianClassifier
from sklearn_flowr.protocol import choose_rows_to_label

STRATEGIES = ["uncertain", "largest-provisional", "random"]


def constructed_result():
    """Seven rows: provisional classes -2 (2 learned rows), -3 (3 learned
    rows, one more not learned) and -4 (1 row), a known-class row, a
    new-class row not learned (the novel label -1)."""
    return Bunch(
        #           0   1   2   3   4   5   6   7   8
        y_assigned=np.array([-2, -3, -3, 0, -3, -2, -4, -3, -1]),
        is_novel=np.array([1, 1, 0, 0, 0, 0, 1, 0, 1], dtype=bool),
        learned=np.array([1, 1, 1, 1, 1, 1, 1, 0, 0], dtype=bool),
        p_novel=np.array([.95, .97, .30, .01, .10, .20, .99, .05, .6]),
        novelty_score=np.array([3.0, 3.5, -0.8, -4.6, -2.2, -1.4, 4.6, -2.9, 0.4]),
    )


@pytest.fixture
def stream(blobs):
    """A head fitted on blobs 0 and 1, and its unlabelled step over the rows
    of all four blobs (2 and 3 are new), in a shuffled order."""
    X, y = blobs
    order = np.random.default_rng(0).permutation(y.shape[0])
    X, y = X[order], y[order]
    known = np.flatnonzero(y < 2)[:16]
    rest = np.setdiff1d(np.arange(y.shape[0]), known)
    head = CRPGaussianClassifier().fit(X[known], y[known])
    return head, head.open_world_step(X[rest]), X[rest], y[rest]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("budget", [1, 3, 6])
def test_rows_are_distinct_valid_and_within_budget(stream, strategy, budget):
    """Check that every strategy returns distinct indices into the batch, at
    most ``budget`` of them, as an integer array."""
    _, out, X, _ = stream
    rows = choose_rows_to_label(out, budget, strategy=strategy, random_state=0)
    assert rows.dtype == np.intp and rows.ndim == 1
    assert 0 < rows.shape[0] <= budget
    assert np.unique(rows).shape[0] == rows.shape[0]
    assert rows.min() >= 0 and rows.max() < X.shape[0]


def test_largest_provisional_goes_round_the_classes_by_size():
    """Check the largest provisional class (-3) gives the first row, then
    -2, then -4, then second rows: within a class its learned rows by
    increasing P(novel); known classes, unlearned rows and the novel label
    are never chosen."""
    result = constructed_result()
    rows = choose_rows_to_label(result, 10, strategy="largest-provisional")
    assert rows.tolist() == [4, 5, 6, 2, 0, 1]
    assert choose_rows_to_label(result, 2, strategy="largest-provisional"
                                ).tolist() == [4, 5]


def test_largest_provisional_with_string_labels_and_no_class():
    """Check string provisional labels work, and a batch that opened no class
    gives no row."""
    result = constructed_result()
    names = {-2: "new-1", -3: "new-2", -4: "new-3", 0: "a", -1: "novel"}
    result.y_assigned = np.array([names[v] for v in result.y_assigned], dtype=object)
    rows = choose_rows_to_label(result, 3, strategy="largest-provisional")
    assert rows.tolist() == [4, 5, 6]
    result.is_novel[:] = False
    assert choose_rows_to_label(result, 3, strategy="largest-provisional"
                                ).shape == (0,)


def test_uncertain_picks_the_smallest_novelty_margins():
    """Check "uncertain" returns the rows whose log-odds of "new class" are
    closest to 0, closest first."""
    rows = choose_rows_to_label(constructed_result(), 3, strategy="uncertain")
    assert rows.tolist() == [8, 2, 5]


def test_uncertain_breaks_ties_in_stream_order():
    """Check equal margins (either sign) keep the stream order."""
    result = Bunch(novelty_score=np.array([2.0, -1.0, 1.0, 5.0, -1.0]))
    assert choose_rows_to_label(result, 3).tolist() == [1, 2, 4]


def test_random_is_reproducible_and_varies_with_the_seed():
    """Check a seed fixes the draw and another seed gives another draw."""
    result = Bunch(y_assigned=np.zeros(100))
    first = choose_rows_to_label(result, 10, strategy="random", random_state=3)
    again = choose_rows_to_label(result, 10, strategy="random", random_state=3)
    other = choose_rows_to_label(result, 10, strategy="random", random_state=4)
    assert first.tolist() == again.tolist()
    assert first.tolist() != other.tolist()
    generator = np.random.RandomState(3)
    assert choose_rows_to_label(result, 10, strategy="random",
                                random_state=generator).tolist() == first.tolist()


@pytest.mark.parametrize("strategy", ["uncertain", "random"])
def test_budget_larger_than_the_batch_gives_every_row(strategy):
    """Check a budget past the number of rows returns each row once."""
    result = constructed_result()
    rows = choose_rows_to_label(result, 50, strategy=strategy, random_state=0)
    assert sorted(rows.tolist()) == list(range(9))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_budget_zero_gives_no_row(strategy):
    """Check a budget of 0 returns an empty integer array."""
    rows = choose_rows_to_label(constructed_result(), 0, strategy=strategy,
                                random_state=0)
    assert rows.shape == (0,) and rows.dtype == np.intp


@pytest.mark.parametrize("budget, match", [
    (-1, "budget"), (1.5, "budget"), ("2", "budget"), (True, "bool"),
    (None, "budget")])
def test_bad_budget_raises(budget, match):
    """Check a budget that is not an int >= 0 is refused by name."""
    with pytest.raises(ValueError, match=match):
        choose_rows_to_label(constructed_result(), budget)


def test_unknown_strategy_raises():
    """Check an unknown strategy is refused, naming the parameter."""
    with pytest.raises(ValueError, match="strategy"):
        choose_rows_to_label(constructed_result(), 2, strategy="largest")


@pytest.mark.parametrize("change, match", [
    (lambda r: r.pop("p_novel"), r"lacks \['p_novel'\]"),
    (lambda r: r.update(learned=r.learned[:-1]), "one entry per row"),
    (lambda r: r.update(p_novel=r.p_novel.reshape(3, 3)), "one-dimensional"),
    (lambda r: r.p_novel.__setitem__(2, np.nan), "NaN"),
    (lambda r: r.update(learned=r.learned.astype(int)), "boolean"),
    (lambda r: r.update(p_novel=np.array(list("abcdefghi"))), "numbers"),
])
def test_bad_result_raises(change, match):
    """Check a result missing a key, of inconsistent lengths or shapes, or
    with NaN or mistyped entries is refused with the problem named."""
    result = constructed_result()
    change(result)
    with pytest.raises(ValueError, match=match):
        choose_rows_to_label(result, 2, strategy="largest-provisional")


def test_result_that_is_not_a_mapping_raises():
    """Check a non-mapping result (e.g. the y_pred array alone) is refused."""
    with pytest.raises(ValueError, match="result"):
        choose_rows_to_label(np.zeros(4), 2, strategy="random")


def test_uncertain_needs_only_the_novelty_score():
    """Check "uncertain" refuses a result without novelty_score."""
    with pytest.raises(ValueError, match="novelty_score"):
        choose_rows_to_label(Bunch(p_novel=np.zeros(3)), 1)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_labels_of_chosen_rows_apply_to_the_head(stream, strategy):
    """Check end to end on blobs: the chosen rows' true labels go through
    ``correct`` (learned rows) and ``partial_fit`` (the others), and the
    head then knows each label given."""
    head, out, X, y = stream
    rows = choose_rows_to_label(out, 4, strategy=strategy, random_state=0)
    learned, unlearned = rows[out.learned[rows]], rows[~out.learned[rows]]
    if learned.size:
        head.correct(X[learned], out.y_assigned[learned], y[learned])
    if unlearned.size:
        head.partial_fit(X[unlearned], y[unlearned])
    assert set(y[rows].tolist()) <= set(head.classes_.tolist())


def test_largest_provisional_labels_name_the_new_blobs(stream):
    """Check one label per provisional class of a clean stream names both new
    blobs: their provisional classes are renamed, none is left."""
    head, out, X, y = stream
    opened = out.y_assigned[out.is_novel & out.learned]
    assert opened.shape[0] == 2  # the stream opened one class per new blob
    rows = choose_rows_to_label(out, 2, strategy="largest-provisional")
    head.correct(X[rows], out.y_assigned[rows], y[rows])
    assert sorted(head.classes_.tolist()) == [0, 1, 2, 3]
    new = y >= 2
    assert np.mean(head.predict(X[new]) == y[new]) > 0.9


def test_benchmark_runs_on_one_digits_split(load_benchmark_script):
    """Check the benchmark's per-split run: labels within budget, finite
    gains, and one label per provisional class raises held-out accuracy."""
    bench = load_benchmark_script("discovery_active.py")
    split = next(bench.splits("digits", 1))
    rows, info = bench.run_split(*split, budgets=[5], n_seeds=2)
    for strategy in bench.STRATEGIES:
        n_labels, gain, per_label, cluster = rows[5, strategy]
        assert 0 < n_labels <= 5 and np.isfinite([gain, per_label, cluster]).all()
    assert rows[5, "largest-provisional"][1] > 0
    assert info["opened"] >= 1
