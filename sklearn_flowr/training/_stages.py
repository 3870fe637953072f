"""The training stages FLOWRClassifier is composed of, as parameter objects (each
says *what* to train; :mod:`._pretraining` and :mod:`._meta_training` train it)."""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from ._losses import LAMBDA_ADAPT, SUP_E_BETA

__all__ = ["MetaTraining", "SupE", "SupFC", "check_stages", "meta_encoder_lr",
           "pretraining_lr"]

_positive = Interval(Real, 0, None, closed="neither")
_rate = [_positive, None]
# Counts (epochs, episodes, batch and task sizes) up to what torch and NumPy
# index with 32-bit integers: a larger one is a typo, refused before any work.
MAX_COUNT = 2**31 - 1
_count = Interval(Integral, 1, MAX_COUNT, closed="both")
# Mini-batch of pre-training and of embedding (also without a pre-training stage).
BATCH_SIZE = 64


class _Stage(BaseEstimator):
    def validate(self) -> _Stage:
        """Check every setting against ``_parameter_constraints``; ``self``."""
        self._validate_params()
        return self


class _Pretraining(_Stage):
    _parameter_constraints: dict = {
        "epochs": [Interval(Integral, 0, MAX_COUNT, closed="both")],
        "lr": _rate,
        "batch_size": [_count],
    }

    def __init__(self, *, epochs=20, lr=None, batch_size=BATCH_SIZE):
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size


class SupE(_Pretraining):
    """Supervised-embedding pre-training (Sup-E, section 4 of the paper).

    Learns the encoder with a Gaussian class head in feature space: logits
    ``log N(z; mu_n, s_n I)``, loss ``NLL + beta * sum_n tr(Sigma_n^-1)``.

    Parameters
    ----------
    epochs : int, default=20
        Passes over the training data, >= 0 (0: the encoder stays as built).
    lr : float or None, default=None
        Adam learning rate of pre-training, > 0. ``None``: the paper's 1e-3
        for Conv4 and MLP, 1e-4 for ResNets.
    batch_size : int, default=64
        Mini-batch size, >= 1; also the batch of embedding.
    beta : float, default=0.1
        Weight of the variance penalty, >= 0 (the paper's 0.1).

    Examples
    --------
    >>> from sklearn_flowr.training import SupE
    >>> SupE(epochs=2).get_params()["epochs"]
    2
    """

    _parameter_constraints: dict = {
        **_Pretraining._parameter_constraints,
        "beta": [Interval(Real, 0, None, closed="left")],
    }

    def __init__(self, *, epochs=20, lr=None, batch_size=BATCH_SIZE, beta=SUP_E_BETA):
        super().__init__(epochs=epochs, lr=lr, batch_size=batch_size)
        self.beta = beta


class SupFC(_Pretraining):
    """Pre-training with the usual linear classification head (Sup-FC), the
    paper's baseline encoder; its settings are :class:`SupE`'s but ``beta``.

    Examples
    --------
    >>> from sklearn_flowr.training import SupFC
    >>> SupFC(epochs=5)
    SupFC(epochs=5)
    """


class MetaTraining(_Stage):
    """FLOWR's episodic meta-training (small or large context).

    Episodes train the encoder with the prior ``(mu0, s0)`` and ``b`` of the
    CRP-Gaussian model they score with; that model's fixed settings are the
    ``episode_*`` ones (the online head takes its own from ``head``).

    Parameters
    ----------
    epochs : int, default=10
        Meta-training epochs, >= 1.
    episodes_per_epoch : int, default=100
        Episodes per epoch, >= 1.
    n_way : int, default=10
        Support classes (small context) or known classes queried (large) per
        episode, >= 1; 10 matches the evaluation's tasks.
    n_query : int, default=5
        Query rows per class in an episode, >= 1.
    n_unknown : int, default=2
        Unknown-unknown classes per episode, >= 0.
    encoder_lr : float or None, default=None
        Adam learning rate of the encoder, > 0. ``None``: a tenth of the
        pre-training rate.
    prior_lr : float or None, default=1e-2
        Adam learning rate of the prior, ``b``, noise and known-class table,
        > 0. ``None``: ``encoder_lr`` (the paper's; the prior then barely moves).
    episode_discount : float, default=0.5
        CRP discount ``a`` of the episodes, in [0, 1) (the paper's 0.5).
    episode_noise : float, default=0.5
        Class-noise variance of the episodes, > 0 (the paper's 0.5).
    learn_episode_noise : bool, default=False
        Learn ``episode_noise`` too (the paper keeps it fixed).
    episode_class_prior : {"crp", "uniform"}, default="crp"
        Class prior of the episodes.
    episode_known_count : float, default=1.0
        CRP pseudo-count of the known-known classes (large context), >
        ``episode_discount``.
    lambda_adapt : float, default=0.1
        Weight of the adaptation loss, >= 0 (the paper's 0.1).
    class_stats : {"empirical", "learned"}, default="empirical"
        Class statistics that start meta-training: of the pre-trained
        embeddings, or Sup-E's learned ones (the paper's; needs ``SupE``).
    match_episode_noise : bool, default=True
        Rescale the encoder's last linear layer so the mean within-class
        variance equals ``episode_noise`` first (not in the paper).
    known_table : {"refit", "learned"}, default="refit"
        Large context, isotropic head: condition the prior on the known
        classes' final embeddings, or keep the meta-learned table (the paper's).
    autocast : {"bf16"} or None, default=None
        Run the encoder under bfloat16 autocast (a GPU speed option).

    Examples
    --------
    >>> from sklearn_flowr.training import MetaTraining
    >>> MetaTraining(epochs=2, n_way=5)
    MetaTraining(epochs=2, n_way=5)
    >>> MetaTraining(episode_noise=0.3).module_params()["sigma"]  # FLOWRMetaModule's
    0.3
    >>> MetaTraining(episode_discount=0.9, episode_known_count=0.5).validate()
    Traceback (most recent call last):
    ...
    ValueError: episode_known_count=0.5 must exceed episode_discount=0.9: ...
    """

    _parameter_constraints: dict = {
        "epochs": [_count],
        "episodes_per_epoch": [_count],
        "n_way": [_count],
        "n_query": [_count],
        "n_unknown": [Interval(Integral, 0, MAX_COUNT, closed="both")],
        "encoder_lr": _rate,
        "prior_lr": _rate,
        "episode_discount": [Interval(Real, 0, 1, closed="left")],
        "episode_noise": [_positive],
        "learn_episode_noise": ["boolean"],
        "episode_class_prior": [StrOptions({"crp", "uniform"})],
        "episode_known_count": [_positive],
        "lambda_adapt": [Interval(Real, 0, None, closed="left")],
        "class_stats": [StrOptions({"empirical", "learned"})],
        "match_episode_noise": ["boolean"],
        "known_table": [StrOptions({"refit", "learned"})],
        "autocast": [StrOptions({"bf16"}), None],
    }

    def __init__(self, *, epochs=10, episodes_per_epoch=100, n_way=10, n_query=5,
                 n_unknown=2, encoder_lr=None, prior_lr=1e-2, episode_discount=0.5,
                 episode_noise=0.5, learn_episode_noise=False,
                 episode_class_prior="crp", episode_known_count=1.0,
                 lambda_adapt=LAMBDA_ADAPT, class_stats="empirical",
                 match_episode_noise=True, known_table="refit", autocast=None):
        self.epochs = epochs
        self.episodes_per_epoch = episodes_per_epoch
        self.n_way = n_way
        self.n_query = n_query
        self.n_unknown = n_unknown
        self.encoder_lr = encoder_lr
        self.prior_lr = prior_lr
        self.episode_discount = episode_discount
        self.episode_noise = episode_noise
        self.learn_episode_noise = learn_episode_noise
        self.episode_class_prior = episode_class_prior
        self.episode_known_count = episode_known_count
        self.lambda_adapt = lambda_adapt
        self.class_stats = class_stats
        self.match_episode_noise = match_episode_noise
        self.known_table = known_table
        self.autocast = autocast

    def validate(self) -> MetaTraining:
        """Check every setting, and ``episode_known_count > episode_discount``."""
        super().validate()
        if not self.episode_known_count > self.episode_discount:
            raise ValueError(
                f"episode_known_count={self.episode_known_count} must exceed "
                f"episode_discount={self.episode_discount}: a class needs a CRP "
                "count c_n > a to have prior mass.")
        return self

    def module_params(self) -> dict:
        """The episodes' model as :class:`FLOWRMetaModule` keyword arguments."""
        return dict(a=self.episode_discount, sigma=self.episode_noise,
                    learn_sigma=self.learn_episode_noise,
                    class_prior=self.episode_class_prior,
                    known_count=self.episode_known_count)


def check_stages(pretrain, meta) -> None:
    """Validate each stage (``None`` allowed) and the two together."""
    for stage in (pretrain, meta):
        if stage is not None:
            stage.validate()
    if (meta is not None and meta.class_stats == "learned"
            and not isinstance(pretrain, SupE)):
        raise ValueError(
            "meta__class_stats='learned' takes Sup-E's learned class parameters "
            f"and needs pretrain=SupE(); got pretrain={pretrain!r}.")


def pretraining_lr(pretrain, backbone) -> float:
    """``pretrain.lr``, or the paper's rate: 1e-4 for ResNets, else 1e-3."""
    lr = getattr(pretrain, "lr", None)
    if lr is not None:
        return lr
    return 1e-4 if isinstance(backbone, str) and backbone.startswith("resnet") else 1e-3


def meta_encoder_lr(meta, pretrain, backbone) -> float:
    """``meta.encoder_lr``, or a tenth of :func:`pretraining_lr`."""
    rate = getattr(meta, "encoder_lr", None)
    return pretraining_lr(pretrain, backbone) / 10 if rate is None else rate
