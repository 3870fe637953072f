"""The heads and the frozen-feature anchors on cached feature vectors.

Compares, on the same vectors in one run, :class:`WhitenedCRPClassifier`,
``CRPGaussianClassifier()`` ("default", the same model in one estimator),
``covariance="isotropic"`` ("crp") and ``"full"``, and the anchors of
:mod:`sklearn_flowr.baselines` (NCM, SimpleShot, Mahalanobis++, RanPAC, kNN,
FeCAM where its memory fits): known-class accuracy, novelty AUROC, H-measure
and fit + predict CPU time (the fastest of a few tries; ``time.process_time``,
all threads, so other load on the machine does not count; ``--clock wall``:
wall time) as a ratio to
SimpleShot's on the same split, at the native dimension and after PCA fitted
on the known fitting rows (``--dims``), and the whitened head's paired
differences from each method (mean and standard error over splits); then one
online step of the whitened head as a ratio to the mat-vec floor of its shape
(CPU time too). Nothing is downloaded.

The input is an ``.npz`` with ``Z`` (or ``X``), features of shape
(n_samples, n_features); ``y``, labels; ``g``, each row's rendering (style,
artist, drawing). With several renderings, split ``s`` draws
``--known-share`` of the classes as known, fits on their rows of the other
renderings and queries every class's rendering ``s`` (a class drawn as
known that has no other rendering is new to the model). With one rendering,
split ``s`` is an episode: ``--n-way`` known classes of ``--shots`` rows,
``--queries`` query rows of each of them and of ``--n-way`` novel classes.

Run: ``OMP_NUM_THREADS=1 python benchmarks/frozen_features.py feats/kanji.npz
--splits 0,1,2,3 --dims native,256``.
"""

import argparse
import copy
import time

import numpy as np
from scipy.special import logsumexp
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, roc_auc_score

from sklearn_flowr import CRPGaussianClassifier, WhitenedCRPClassifier
from sklearn_flowr.baselines import (
    FeCAMClassifier,
    KNNClassifier,
    MahalanobisPlusPlusClassifier,
    NCMClassifier,
    RanPACClassifier,
    SimpleShotClassifier,
)
from sklearn_flowr.calibration import NoveltyCalibratedClassifier, match_novel_share
from sklearn_flowr.head import TwoCovarianceWhitener
from sklearn_flowr.metrics import expected_calibration_error, h_measure

METHODS = {
    "whitened": WhitenedCRPClassifier,
    "spiked": lambda: WhitenedCRPClassifier(
        TwoCovarianceWhitener(prior_spectrum="spiked")),
    "crp": lambda: CRPGaussianClassifier(covariance="isotropic"),
    "default": CRPGaussianClassifier,
    "crp-full": lambda: CRPGaussianClassifier(covariance="full"),
    "ncm": NCMClassifier,
    "simpleshot": SimpleShotClassifier,
    "mahalanobis++": MahalanobisPlusPlusClassifier,
    "ranpac": lambda: RanPACClassifier(random_state=0),
    "knn": KNNClassifier,
    "fecam": FeCAMClassifier,
}
PROBABILISTIC = ("whitened", "spiked", "default", "crp", "crp-full")
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def load(path, dtype="float64"):
    data = np.load(path)
    features = data["Z"] if "Z" in data else data["X"]
    groups = data["g"] if "g" in data else np.zeros(len(data["y"]), dtype=int)
    return features.astype(dtype), data["y"], groups


def add_split_arguments(parser):
    """The options :func:`split` reads, on an argparse ``parser``."""
    parser.add_argument("--known-share", type=float, default=0.6,
                        help="share of the classes drawn as known, with several "
                        "renderings (default 0.6)")
    parser.add_argument("--max-classes", type=int, default=None,
                        help="with several renderings: keep this many classes, "
                        "drawn once (the same for every split), to measure a "
                        "smaller set of the same images")
    parser.add_argument("--n-way", type=int, default=5,
                        help="episodes: known classes, and as many new ones")
    parser.add_argument("--shots", type=int, default=5,
                        help="episodes: fitting rows of each known class")
    parser.add_argument("--queries", type=int, default=15,
                        help="episodes: query rows of each class")


def split(features, y, groups, s, args):
    """Fitting rows, their labels, query rows, their labels, and which are novel."""
    classes = np.unique(y)
    if np.unique(groups).shape[0] > 1:  # a held-out rendering
        limit = getattr(args, "max_classes", None)
        if limit is not None and limit < classes.shape[0]:
            classes = np.sort(np.random.default_rng(7).permutation(classes)[:limit])
            keep = np.isin(y, classes)
            features, y, groups = features[keep], y[keep], groups[keep]
        rng = np.random.default_rng(100 + s)
        known = rng.permutation(classes)[: round(args.known_share * len(classes))]
        fit = np.flatnonzero(np.isin(y, known) & (groups != s))
        query = np.flatnonzero(groups == s)
        # A class drawn as known with no other rendering has nothing to fit:
        # its query is of a class the model has not seen.
        known = np.unique(y[fit])
    else:  # an episode
        rng = np.random.default_rng(s)
        order = rng.permutation(classes)
        known, novel = order[: args.n_way], order[args.n_way : 2 * args.n_way]
        fit, query = [], []
        for label in known:
            rows = rng.permutation(np.flatnonzero(y == label))
            fit += list(rows[: args.shots])
            query += list(rows[args.shots : args.shots + args.queries])
        for label in novel:
            query += list(rng.permutation(np.flatnonzero(y == label))[: args.queries])
        fit, query = np.array(fit), np.array(query)
    return (features[fit], y[fit], features[query], y[query],
            ~np.isin(y[query], known))


def known_and_novelty(model, X):
    """Best known class and a novelty score (higher = more novel)."""
    if hasattr(model, "novelty_score"):
        return model.predict_known(X), model.novelty_score(X)
    log_proba = np.asarray(model.predict_log_proba(X))
    known = log_proba[:, :-1]
    return (model.classes_[known.argmax(axis=1)],
            log_proba[:, -1] - logsumexp(known, axis=1))


def design_shares(y, groups, args):
    """The protocol's share of query rows of new classes, and of first
    sightings when the queries are streamed: set by its design, not its labels."""
    if np.unique(groups).shape[0] > 1:  # one query row per class, 1 - share new
        n_classes = np.unique(y).shape[0]
        if getattr(args, "max_classes", None) is not None:
            n_classes = min(n_classes, args.max_classes)
        new = 1 - round(args.known_share * n_classes) / n_classes
        return new, new
    return 0.5, 1 / (2 * args.queries)


def ece_and_floor(novel, p_novel):
    """ECE of ``p_novel`` and its floor: the mean ECE of the same P(novel)
    against labels drawn from them (15 bins on a few hundred rows)."""
    rng = np.random.default_rng(0)
    return (expected_calibration_error(novel, p_novel), np.mean(
        [expected_calibration_error(rng.random(p_novel.shape[0]) < p_novel, p_novel)
         for _ in range(50)]))


def calibrated(name, y_fit, share, *, stream=False, seed=0):
    """The ``--ece`` runs' NoveltyCalibratedClassifier for method ``name``:
    isotonic with at least 100 fitting classes (its docstring's advice), else
    sigmoid; ten class-disjoint folds (fewer classes: one fold per class)."""
    n_classes = np.unique(y_fit).shape[0]
    return NoveltyCalibratedClassifier(
        METHODS[name](), method="isotonic" if n_classes >= 100 else "sigmoid",
        cv=min(10, n_classes), stream=stream, novel_prior=share, random_state=seed)


def oracle_platt_ece(novel, score):
    """ECE of the best Platt map of ``score`` (a logistic regression fitted
    on the queries themselves, their labels included): no map of two
    parameters fitted on other rows does better on these rows."""
    fit = LogisticRegression(C=1e6, max_iter=1000).fit(score[:, None], novel)
    return expected_calibration_error(novel, fit.predict_proba(score[:, None])[:, 1])


def novelty_ece(name, model, X_fit, y_fit, X_query, y_query, novel, shares, score):
    """ECE of P(novel), raw and after :func:`calibrated`: on the queries
    against "novel class" (calibrated at once, ``stream=False``; with its
    floor), and streamed against "first sighting" (``stream=True``); each told
    the protocol's share (``novel_prior``); :func:`oracle_platt_ece` of the
    novelty ``score``; and the ECE of the calibrated P(novel)
    :func:`~sklearn_flowr.calibration.match_novel_share` on the queries.
    Also the calibrated P(novel)."""
    at_once, streamed = (calibrated(name, y_fit, share, stream=stream).fit(X_fit, y_fit)
                         for stream, share in zip((False, True), shares, strict=True))
    order = np.random.default_rng(0).permutation(y_query.shape[0])
    ece = expected_calibration_error
    stream = streamed.open_world_step(X_query[order], y_query[order])
    p_novel = at_once.predict_novelty_proba(X_query)
    figures = [*ece_and_floor(novel, p_novel), ece(stream.is_novel, stream.p_novel),
               oracle_platt_ece(novel, score),
               ece(novel, match_novel_share(p_novel, shares[0]))]
    if name not in PROBABILISTIC:  # a score, no probability before the map
        return [np.nan, *figures[:2], np.nan, *figures[2:]], p_novel
    raw_stream = copy.deepcopy(model).open_world_step(X_query[order], y_query[order])
    raw = np.asarray(model.predict_proba(X_query))[:, -1]
    return [ece(novel, raw), *figures[:2],
            ece(raw_stream.is_novel, raw_stream.p_novel), *figures[2:]], p_novel


def best_seconds(call, repeats=20, flush=None):
    """Fastest CPU time of ``repeats`` calls; ``flush()`` before each call,
    untimed, evicts the caches."""
    times = []
    for _ in range(repeats):
        if flush is not None:
            flush()
        start = time.process_time()
        call()
        times.append(time.process_time() - start)
    return min(times)


def fit_and_score_seconds(make, X_fit, y_fit, X_query, budget=3.0,
                          clock=time.process_time):
    """The model of one fit, its predictions and the fastest fit + predict (CPU
    time, or ``clock``'s) of up to five tries within ``budget`` seconds."""
    best, spent, tries = np.inf, 0.0, 0
    while tries < 5 and (tries == 0 or spent < budget):
        start = clock()
        model = make().fit(X_fit, y_fit)
        result = known_and_novelty(model, X_query)
        took = clock() - start
        best, spent, tries = min(best, took), spent + took, tries + 1
    return model, result, best


def online_step_ratios(X_fit, y_fit, X_query):
    """One labelled row's ``open_world_step`` (known, then new class) over one
    (n_classes, n_features) mat-vec, warm and cold (64 MiB written) caches."""
    model = WhitenedCRPClassifier().fit(X_fit, y_fit)
    means = np.ascontiguousarray(model.head_.class_mean_)
    row, known = X_query[:1], model.classes_[:1]
    scratch = np.empty(2**23)

    def flush():
        scratch.fill(1.0)

    ratios, labels = {}, iter(range(-10**6, 0))
    for cache, evict in (("warm", None), ("cold", flush)):
        floor = best_seconds(lambda: means @ row[0], flush=evict)
        known_step = best_seconds(lambda: model.open_world_step(row, known),
                                  flush=evict)
        new_step = best_seconds(
            lambda: model.open_world_step(row, np.array([next(labels)])),
            flush=evict)
        ratios[cache] = floor, known_step / floor, new_step / floor
    return means.shape, ratios


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help=".npz with Z (or X), y and g")
    parser.add_argument("--splits", default="0,1,2,3",
                        help="comma-separated splits: the held-out rendering, "
                        "or the episode's seed (default: 0,1,2,3)")
    parser.add_argument("--dims", default="native",
                        help="comma-separated: native and/or PCA dimensions")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated, of: " + ", ".join(METHODS)
                        + " (SimpleShot always runs: its time is the unit)")
    add_split_arguments(parser)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="fit + predict time: this process's CPU time (every "
                        "thread; other jobs count for neither side) or wall time")
    parser.add_argument("--ece", action="store_true",
                        help="also the ECE of P(novel): the heads' raw and "
                        "calibrated, the anchors' calibrated (they have no raw "
                        "P(novel))")
    parser.add_argument("--ece-seeds", default="0",
                        help="with --ece: the calibration folds' random_state "
                        "values; the table uses the first, and the pooled ECE "
                        "prints for each and their mean and spread")
    parser.add_argument("--dtype", choices=("float64", "float32"),
                        default="float64",
                        help="the features' precision as the methods get them "
                        "(default float64; a network's are float32, which the "
                        "whitener keeps, its eigen solver's map too)")
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.ece_seeds.split(",")]
    features, y, groups = load(args.path, args.dtype)
    # SimpleShot first: its time is the unit.
    names = ["simpleshot"] + [n for n in args.methods.split(",") if n != "simpleshot"]
    rows, pooled, matched = {}, {}, {}
    for s in map(int, args.splits.split(",")):
        X_fit, y_fit, X_query, y_query, novel = split(features, y, groups, s, args)
        for dim in args.dims.split(","):
            if dim != "native" and int(dim) > min(X_fit.shape):
                print(f"split {s}: dim {dim} skipped ({X_fit.shape[0]} fitting "
                      "rows)", flush=True)
                continue
            if dim != "native":
                pca = PCA(int(dim), random_state=0).fit(X_fit)
                X_fit_d, X_query_d = pca.transform(X_fit), pca.transform(X_query)
            else:
                X_fit_d, X_query_d = X_fit, X_query
            times = {}
            for name in names:
                try:
                    model, (y_known, score), times[name] = fit_and_score_seconds(
                        METHODS[name], X_fit_d, y_fit, X_query_d,
                        clock=CLOCKS[args.clock])
                except ValueError as error:  # FeCAM past its memory bound
                    if name != "fecam":
                        raise
                    print(f"split {s} dim {dim} {name}: skipped ({error})")
                    continue
                accuracy = np.mean(y_known[~novel] == y_query[~novel])
                eces = []
                if args.ece:
                    eces, p_novel = novelty_ece(name, model, X_fit_d, y_fit, X_query_d,
                                                y_query, novel,
                                                design_shares(y, groups, args), score)
                    runs = [p_novel] + [
                        calibrated(name, y_fit, design_shares(y, groups, args)[0],
                                   seed=seed).fit(X_fit_d, y_fit)
                        .predict_novelty_proba(X_query_d) for seed in seeds[1:]]
                    pooled.setdefault((dim, name), []).append((novel, runs))
                    share = design_shares(y, groups, args)[0]
                    matched.setdefault((dim, name), []).append(
                        [match_novel_share(p, share) for p in runs])
                rows.setdefault((dim, name), []).append(
                    [accuracy, roc_auc_score(novel, score),
                     h_measure(novel.astype(int), score), times[name],
                     times[name] / times["simpleshot"], *eces])
                print(f"split {s} dim {dim} {name}: " + " ".join(
                    f"{v:.4f}" for v in rows[(dim, name)][-1]), flush=True)
    shape, ratios = online_step_ratios(*split(features, y, groups, 0, args)[:3])
    for cache, (floor, known_step, new_step) in ratios.items():
        print(f"\none online step (split 0, native, {cache} caches), as a multiple "
              f"of the {floor * 1e3:.3f} ms mat-vec of shape {shape}: "
              f"{known_step:.1f}x (known class), {new_step:.1f}x (new class)")
    print(f"\n{args.path} ({args.dtype}): mean over splits {args.splits}\n")
    ece = (" ECE raw | ECE calibrated | its floor | stream ECE raw |"
           " stream ECE calibrated | best Platt map's ECE | mean-matched ECE |"
           if args.ece else "")
    seconds = "CPU s" if args.clock == "cpu" else "wall s"
    print(f"| dim | method | known acc | AUROC | H | {seconds} | x SimpleShot |{ece}")
    print("| --- " * (14 if args.ece else 7) + "|")
    for (dim, name), values in rows.items():
        acc, auroc, h, seconds, ratio, *eces = np.mean(values, axis=0)
        print(f"| {dim} | {name} | {acc:.3f} | {auroc:.3f} | {h:.3f} | "
              f"{seconds:.2f} | {ratio:.1f} |"
              + "".join(f" {e:.3f} |" if e == e else " |" for e in eces))
    if pooled:
        print("\nCalibrated P(novel), the queries of every split pooled: ECE (its "
              "floor), the Brier score (a proper scoring rule: it rewards "
              "separating new rows as well as calibration; lower is better) and "
              "the ECE once each split's P(novel) is mean-matched (its mean "
              "over the queries moved to the share of new rows):\n")
        for (dim, name), runs in pooled.items():
            novel = np.concatenate([labels for labels, _ in runs])
            per_seed = [(*ece_and_floor(novel, p_novel),
                         brier_score_loss(novel, p_novel),
                         expected_calibration_error(novel, np.concatenate(moved)))
                        for p_novel, moved in zip((
                            np.concatenate(by_split) for by_split in zip(
                                *(by_seed for _, by_seed in runs), strict=True)),
                            zip(*matched[(dim, name)], strict=True), strict=True)]
            print(f"| {dim} | {name} | "
                  + "{:.3f} ({:.3f}) | Brier {:.4f} | mean-matched {:.3f} |".format(
                      *per_seed[0]))
            if len(seeds) > 1:
                for column, figure in ((0, "ECE"), (2, "Brier"),
                                       (3, "mean-matched ECE")):
                    values = np.array([row[column] for row in per_seed])
                    print(f"  {name} {figure} over seeds {args.ece_seeds}: "
                          f"{values.mean():.4f} +- {values.std(ddof=1):.4f} ("
                          + " ".join(f"{v:.4f}" for v in values) + ")")
    names = {name for _, name in rows}
    head = next((name for name in ("default", "whitened") if name in names), None)
    if head is None:
        return
    print(f"\n{head} minus each method, paired over splits: mean (standard error)\n")
    print("| dim | method | known acc | AUROC | H |\n" + "| --- " * 5 + "|")
    for (dim, name), values in rows.items():
        own = rows.get((dim, head), [])
        if name == head or len(own) != len(values):  # a skipped split
            continue
        diff = (np.asarray(own) - np.asarray(values))[:, :3]
        se = diff.std(axis=0, ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 \
            else np.full(3, np.nan)
        print(f"| {dim} | {name} | " + " | ".join(
            f"{m:+.4f} ({e:.4f})" for m, e in zip(diff.mean(axis=0), se, strict=True))
              + " |")


if __name__ == "__main__":
    main()
