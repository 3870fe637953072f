"""Bad-input sweep of the public API (issue 12's audit, re-runnable).

Every case is an invalid input or parameter for a public function; a clean
rejection raises an error with a message (or a usage error for the CLI) and
leaves the estimator byte-identical (its pickle). Prints one line a case and
the counts: tried / rejected cleanly / state-changing / silent (accepted).

Usage::

    .venv/bin/python tools/bad_input_sweep.py
"""

import contextlib
import copy
import io
import pickle
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

from sklearn_flowr import CRPGaussianClassifier, FLOWRClassifier
from sklearn_flowr.baselines import (
    EVMClassifier,
    NCMClassifier,
    PEELERClassifier,
)
from sklearn_flowr.cli import benchmark_main
from sklearn_flowr.metrics import h_measure, open_world_report
from sklearn_flowr.protocol import (
    LargeContextTasks,
    SmallContextTasks,
    calibrate_novelty,
    cross_fit_novelty_calibration,
    evaluate_online,
    select_head_params,
)
from sklearn_flowr.training import MetaTraining, SupE, SupFC

warnings.simplefilter("ignore")
SCRATCH = Path(tempfile.mkdtemp(prefix="flowr-sweep-"))
torch.set_num_threads(1)
X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32)
IMAGES = X.reshape(-1, 8, 8)


def tiny(**params):
    """A tiny FLOWRClassifier (its own stage objects), ``params`` on top."""
    return FLOWRClassifier(
        embedding_dim=4,
        pretrain=SupE(epochs=1),
        meta=MetaTraining(epochs=1, episodes_per_epoch=2, n_way=3, n_unknown=1),
        verbose=0,
        random_state=0,
        **params,
    )


# The default head (full covariance, calibration="train") in both contexts,
# and the paper's model (isotropic head, no novelty map).
large = tiny(setting="large").fit(IMAGES[y < 5], y[y < 5])
small = tiny(setting="small").fit(IMAGES[y < 5], y[y < 5])
small.adapt(IMAGES[y == 6][:3], y[y == 6][:3])
# The small context resolves novel_label="auto" per task (adapt may pick a new
# one); an explicit novel label must be refused in a task's labels.
pinned = tiny(
    setting="small", head=CRPGaussianClassifier(covariance="full", novel_label=-1)
).fit(IMAGES[y < 5], y[y < 5])
paper = tiny(setting="large", head=CRPGaussianClassifier(), calibration=None).fit(
    IMAGES[y < 5], y[y < 5]
)
head = CRPGaussianClassifier().fit(X[y < 5], y[y < 5])
headf = CRPGaussianClassifier(covariance="full").fit(X[y < 5], y[y < 5])
ncm = NCMClassifier().fit(X[y < 5], y[y < 5])
peeler = PEELERClassifier().fit(X[y < 5], y[y < 5])
nan = IMAGES[:3].copy()
nan[0, 0, 0] = np.nan
inf = IMAGES[:3].copy()
inf[1, 2, 2] = np.inf
cases = []


def case(name, obj, fn, prepare=None):
    cases.append((name, obj, fn, prepare))


for nm, m in (("large", large), ("small", small), ("paper", paper)):
    case(f"{nm}.predict_proba nan", m, lambda m: m.predict_proba(nan))
    case(f"{nm}.predict_proba inf", m, lambda m: m.predict_proba(inf))
    case(
        f"{nm}.predict_proba wrong shape",
        m,
        lambda m: m.predict_proba(IMAGES[:3, :7, :7]),
    )
    case(f"{nm}.predict_proba 1-d", m, lambda m: m.predict_proba(IMAGES[0, 0]))
    case(f"{nm}.predict_proba empty", m, lambda m: m.predict_proba(IMAGES[:0]))
    case(
        f"{nm}.predict_proba strings",
        m,
        lambda m: m.predict_proba(np.full((2, 8, 8), "a")),
    )
    case(
        f"{nm}.predict_proba int64 images",
        m,
        lambda m: m.predict_proba((IMAGES[:3] * 255).astype(np.int64)),
    )
    case(
        f"{nm}.predict_proba 1e200",
        m,
        lambda m: m.predict_proba(np.full((1, 8, 8), 1e200, np.float64)),
    )
    case(f"{nm}.partial_fit y len", m, lambda m: m.partial_fit(IMAGES[:3], y[:2]))
    case(
        f"{nm}.partial_fit nan y", m, lambda m: m.partial_fit(IMAGES[:2], [0.0, np.nan])
    )
    case(
        f"{nm}.partial_fit novel label",
        m,
        lambda m: m.partial_fit(IMAGES[:2], [m.novel_label_, m.novel_label_]),
    )
    case(f"{nm}.partial_fit nan X", m, lambda m: m.partial_fit(nan, y[:3]))
    case(
        f"{nm}.partial_fit classes typo",
        m,
        lambda m: m.partial_fit(IMAGES[:2], [1, 2], classes=[1]),
    )
    case(
        f"{nm}.partial_fit 2-d y",
        m,
        lambda m: m.partial_fit(IMAGES[:2], np.zeros((2, 2))),
    )
    case(
        f"{nm}.open_world_step y len", m, lambda m: m.open_world_step(IMAGES[:3], y[:4])
    )
    case(f"{nm}.open_world_step nan X", m, lambda m: m.open_world_step(nan, y[:3]))
    case(
        f"{nm}.open_world_step novel label",
        m,
        lambda m: m.open_world_step(IMAGES[:1], [m.novel_label_]),
    )
    case(
        f"{nm}.open_world_step wrong shape",
        m,
        lambda m: m.open_world_step(IMAGES[:3, :5], y[:3]),
    )
    case(f"{nm}.transform nan", m, lambda m: m.transform(nan))
    case(f"{nm}.transform encoder=x", m, lambda m: m.transform(IMAGES[:2], encoder="x"))
    for kw in (
        dict(head__a=1.5),
        dict(head__a=-1),
        dict(head__sigma=-1),
        dict(head__known_count=0.1),
        dict(head__covariance="diag"),
        dict(embedding_dim=0),
        dict(head__class_prior="x"),
        dict(meta__episode_noise=2.0),
        dict(setting="medium"),
        dict(device="gpu0"),
        dict(pretrain__batch_size=0),
    ):
        case(
            f"{nm}.set_params({kw}) then predict",
            m,
            lambda m: m.predict_proba(IMAGES[:2]),
            prepare=lambda m, kw=kw: m.set_params(**kw),
        )
    case(f"{nm}.adapt y len", m, lambda m: m.adapt(IMAGES[y == 7][:3], [7, 7]))
    case(f"{nm}.adapt nan y", m, lambda m: m.adapt(IMAGES[:2], [1.0, np.nan]))
    case(
        f"{nm}.adapt fine_tune=-1",
        m,
        lambda m: m.adapt(IMAGES[:2], [1, 2], fine_tune=-1),
    )
    case(
        f"{nm}.adapt fine_tune=x",
        m,
        lambda m: m.adapt(IMAGES[:2], [1, 2], fine_tune="x"),
    )
    case(
        f"{nm}.adapt novel label",
        pinned if nm == "small" else m,
        lambda m: m.adapt(IMAGES[:2], [-1, -1]),
    )
    case(f"{nm}.adapt nan X", m, lambda m: m.adapt(nan, [1, 2, 3]))
for kw in (
    dict(head__a=1.0),
    dict(head__a=0.9, head__known_count=0.5),
    dict(meta__episode_discount=0.9, meta__episode_known_count=0.5),
    dict(meta__n_unknown=9),
    dict(meta__n_query=1000),
    dict(meta__n_way=0),
    dict(meta__epochs=0),
    dict(meta__episode_noise=0),
    dict(head__sigma=0),
    dict(meta__encoder_lr=-1),
    dict(pretrain__epochs=-1),
    dict(backbone="vgg"),
    dict(pretrain="x"),
    dict(meta="x"),
    dict(head="x"),
    dict(meta__class_stats="learned", pretrain=SupFC(epochs=1)),
    dict(meta__class_stats="learned", pretrain=None),
    dict(checkpoint_dir=3.5),
    dict(meta__autocast="fp8"),
    dict(verbose=-1),
    dict(calibration=1),
    dict(calibration="classes"),
    dict(calibration=9),
    dict(calibration=[(np.arange(10), np.arange(5))]),
    dict(head__noise_shrinkage=2.0),
    dict(head__prior_scale=0),
    dict(calibration=[(np.arange(100) < 50, np.arange(100) >= 50)]),
):
    case(
        f"fit {kw}",
        large,
        lambda m, kw=kw: (
            copy.deepcopy(m).set_params(**kw).fit(IMAGES[y < 5][:200], y[y < 5][:200])
        ),
    )
case("fit one class", large, lambda m: copy.deepcopy(m).fit(IMAGES[y == 1], y[y == 1]))
case("fit y len", large, lambda m: copy.deepcopy(m).fit(IMAGES[:10], y[:9]))
case(
    "fit nan X",
    large,
    lambda m: copy.deepcopy(m).fit(np.concatenate([nan, IMAGES[3:100]]), y[:100]),
)
case(
    "fit novel label in y",
    large,
    lambda m: copy.deepcopy(m)
    .set_params(head__novel_label=1)
    .fit(IMAGES[:100], y[:100]),
)
case("fit float y", large, lambda m: copy.deepcopy(m).fit(IMAGES[:100], y[:100] + 0.5))
for nm, h in (("head", head), ("headfull", headf), ("ncm", ncm), ("peeler", peeler)):
    Xs = X[:3].copy()
    Xn = Xs.copy()
    Xn[0, 0] = np.nan
    case(
        f"{nm}.predict_proba nan"
        if nm.startswith("head")
        else f"{nm}.open_world_step nan",
        h,
        (lambda h, Xn=Xn: h.predict_proba(Xn))
        if nm.startswith("head")
        else (lambda h, Xn=Xn: h.open_world_step(Xn, y[:3])),
    )
    case(f"{nm}.partial_fit width", h, lambda h: h.partial_fit(X[:3, :10], y[:3]))
    case(f"{nm}.partial_fit y len", h, lambda h: h.partial_fit(X[:3], y[:2]))
    case(
        f"{nm}.open_world_step inf",
        h,
        lambda h: h.open_world_step(np.full((1, 64), np.inf), [1]),
    )
    case(
        f"{nm}.open_world_step 1e200",
        h,
        lambda h: h.open_world_step(np.full((1, 64), 1e200), [1]),
    )
    case(
        f"{nm}.partial_fit novel label",
        h,
        lambda h: h.partial_fit(X[:1], [h.novel_label_]),
    )
    case(f"{nm}.partial_fit empty", h, lambda h: h.partial_fit(X[:0], y[:0]))
    case(f"{nm}.partial_fit 3-d", h, lambda h: h.partial_fit(IMAGES[:2], y[:2]))
for kw in (
    dict(a=1.0),
    dict(b=-0.7),
    dict(b=np.inf),
    dict(sigma=0),
    dict(prior_var=-1),
    dict(known_count=0),
    dict(covariance="x"),
    dict(class_prior="x"),
    dict(sigma=np.nan),
    dict(noise_shrinkage=1.5),
    dict(noise_shrinkage=-0.1),
):
    case(
        f"head fit {kw}",
        head,
        lambda h, kw=kw: copy.deepcopy(h).set_params(**kw).fit(X[y < 5], y[y < 5]),
    )
    case(
        f"head set_params({kw}) then partial_fit",
        head,
        lambda h: h.partial_fit(X[:2], y[:2]),
        prepare=lambda h, kw=kw: h.set_params(**kw),
    )
# Valid tasks on digits' ten classes, so evaluate_online's own checks are hit.
TWO_TASKS = SmallContextTasks(y, n_support_classes=3, n_novel_classes=2, n_tasks=2)
yt = np.array([0, 1, 0, 1])
st = np.array([0.1, 0.9, 0.2, 0.8])
for nm, fn in (
    ("h_measure len", lambda: h_measure(yt, st[:3])),
    ("h_measure one class", lambda: h_measure([1, 1, 1], [0.1, 0.2, 0.3])),
    ("h_measure nan", lambda: h_measure(yt, [0.1, np.nan, 0.2, 0.3])),
    ("h_measure severity", lambda: h_measure(yt, st, severity_ratio=-1)),
    ("h_measure 2-d", lambda: h_measure(yt, np.ones((4, 2)))),
    ("h_measure labels 3", lambda: h_measure([0, 1, 2, 1], st)),
    (
        "SmallContextTasks too many classes",
        lambda: SmallContextTasks(y, n_support_classes=20),
    ),
    ("SmallContextTasks shots", lambda: SmallContextTasks(y, shots=(5, 1))),
    ("SmallContextTasks n_tasks 0", lambda: SmallContextTasks(y, n_tasks=0)),
    ("SmallContextTasks seed -1", lambda: SmallContextTasks(y, random_state=-1)),
    ("LargeContextTasks unknown known", lambda: LargeContextTasks(y, [42])),
    (
        "evaluate_online setting",
        lambda: evaluate_online(
            NCMClassifier(), X, y, TWO_TASKS, setting="x"
        ),
    ),
    (
        "evaluate_online tpr",
        lambda: evaluate_online(
            NCMClassifier(), X, y, TWO_TASKS, tpr=1.5
        ),
    ),
    (
        "evaluate_online y mismatch",
        lambda: evaluate_online(
            NCMClassifier(), X, y[:-1], TWO_TASKS
        ),
    ),
    ("open_world_report bad", lambda: open_world_report(y[:4], y[:3], st, yt)),
    (
        "select_head_params overlapping classes",
        lambda: select_head_params(CRPGaussianClassifier(covariance="full"), X, y,
                                   X, y, {"noise_shrinkage": [0.0]}),
    ),
    (
        "select_head_params isotropic grid",
        lambda: select_head_params(CRPGaussianClassifier(), X[y < 5], y[y < 5],
                                   X[y >= 5], y[y >= 5],
                                   {"noise_shrinkage": [0.0, 0.1]}),
    ),
    (
        "cross_fit_novelty_calibration one fold class",
        lambda: cross_fit_novelty_calibration(
            tiny(), IMAGES[y < 5], y[y < 5],
            cv=[(np.flatnonzero(y[y < 5] > 0), np.flatnonzero(y[y < 5] == 0))]),
    ),
    (
        "cross_fit_novelty_calibration n_tasks 0",
        lambda: cross_fit_novelty_calibration(tiny(),
                                              IMAGES[y < 5], y[y < 5], n_tasks=0),
    ),
    (
        "cross_fit_novelty_calibration y mismatch",
        lambda: cross_fit_novelty_calibration(tiny(),
                                              IMAGES[:10], y[:9]),
    ),
    (
        "cross_fit_novelty_calibration n_jobs",
        lambda: cross_fit_novelty_calibration(tiny(),
                                              IMAGES[y < 5], y[y < 5], n_jobs="x"),
    ),
    (
        "cross_fit_novelty_calibration shrinkages",
        lambda: cross_fit_novelty_calibration(tiny(),
                                              IMAGES[y < 5], y[y < 5],
                                              noise_shrinkages=[2.0]),
    ),
    (
        "cross_fit_novelty_calibration accuracy_tolerance",
        lambda: cross_fit_novelty_calibration(tiny(),
                                              IMAGES[y < 5], y[y < 5],
                                              noise_shrinkages=[0.0, 0.1],
                                              accuracy_tolerance=1.5),
    ),
    (
        "cross_fit_novelty_calibration targets",
        lambda: cross_fit_novelty_calibration(tiny(),
                                              IMAGES[y < 5], y[y < 5],
                                              targets="soft"),
    ),
    (
        "calibrate_novelty targets",
        lambda: calibrate_novelty(CRPGaussianClassifier(), X[:60], y[:60],
                                  targets=None),
    ),
    ("EVM tailsize", lambda: EVMClassifier(tailsize=-1).fit(X[:50], y[:50])),
):
    case(nm, None, lambda _, fn=fn: fn())
for args in (
    ["--max-per-class", "-3"],
    ["--evm-tasks", "-1"],
    ["--lc-known-query-classes", "0"],
    ["--max-per-class", "0"],
    ["--seed", "-5"],
    ["--tasks", "x"],
    ["--dataset", "cifar"],
    ["--out", "/proc/nope"],
    ["--embedding-dim", "0"],
    ["--n-jobs", "0"],
    ["--meta-epochs", "0"],
    ["--set", "head__sigma=-1"],
    ["--set", "head__covariance=diag"],
    ["--set", "nope=1"],
    ["--set", "setting=large"],
    ["--set", "head__sigma"],
    ["--set", "meta__n_way=0"],
):
    case(
        f"cli {args}",
        None,
        lambda _, a=args: benchmark_main(
            [
                "--quick",
                *a,
                "--cache-dir",
                str(SCRATCH / "cache"),
                "--out",
                str(SCRATCH / "out"),
            ]
            if "--out" not in a
            else ["--quick", *a]
        ),
    )
counts = dict(tried=0, rejected=0, state_changing=0, silent=0)
for name, obj, fn, prepare in cases:
    counts["tried"] += 1
    target = copy.deepcopy(obj) if obj is not None else None
    if prepare is not None:
        prepare(target)
    before = pickle.dumps(target) if target is not None else None
    err = None
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
            fn(target)
    except SystemExit as e:
        err = f"SystemExit({e.code})" if e.code not in (0, None) else None
    except Exception as e:
        err = f"{type(e).__name__}: {str(e)[:90]}"
    if err is None:
        counts["silent"] += 1
        print("SILENT  ", name)
    elif target is not None and pickle.dumps(target) != before:
        counts["state_changing"] += 1
        print("STATE   ", name, "|", err)
    else:
        counts["rejected"] += 1
        print("ok      ", name, "|", err)
print(counts)
