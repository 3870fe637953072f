"""The training stages FLOWRClassifier is composed of, as parameter objects.

``FLOWRClassifier(pretrain=SupE(...), meta=MetaTraining(...))`` takes its
training schedule the way :class:`~sklearn.pipeline.Pipeline` takes its steps:
each stage is a small scikit-learn-style object whose settings are reached as
``pretrain__epochs`` or ``meta__episodes_per_epoch`` through ``get_params`` /
``set_params``, validated by its own ``_parameter_constraints``. A stage says
*what* to train; :mod:`._pretraining` and :mod:`._meta_training` train it.
Each stage turns its settings into the fields of the internal
:class:`~._config.FLOWRConfig` (:meth:`config_fields`), which checks them
together before any training.
"""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

__all__ = ["MetaTraining", "SupE", "SupFC"]

_positive = Interval(Real, 0, None, closed="neither")
_rate = [_positive, None]
# Counts (epochs, episodes, batch and task sizes) up to what torch and NumPy
# index with 32-bit integers: a larger one is a typo, refused before any work
# rather than met as an OverflowError or an allocation failure.
MAX_COUNT = 2**31 - 1
_count = Interval(Integral, 1, MAX_COUNT, closed="both")


class _Stage(BaseEstimator):
    """Validation shared by the stages (``_parameter_constraints``)."""

    def validate(self) -> _Stage:
        """Check every setting against ``_parameter_constraints``.

        Returns
        -------
        self

        Raises
        ------
        sklearn.utils._param_validation.InvalidParameterError
            Naming the setting and its allowed values.
        """
        self._validate_params()
        return self


class _Pretraining(_Stage):
    _parameter_constraints: dict = {
        "epochs": [Interval(Integral, 0, MAX_COUNT, closed="both")],
        "lr": _rate,
        "batch_size": [_count],
    }
    method = ""

    def config_fields(self) -> dict:
        """The :class:`~._config.FLOWRConfig` fields this stage sets."""
        self.validate()
        return dict(pretrain=self.method, pretrain_epochs=self.epochs, lr=self.lr,
                    batch_size=self.batch_size)


class SupE(_Pretraining):
    """Supervised-embedding pre-training (Sup-E, section 4 of the paper).

    Learns the encoder with a Gaussian class head in feature space: logits
    ``log N(z; mu_n, s_n I)``, loss ``NLL + beta * sum_n tr(Sigma_n^-1)``.

    Parameters
    ----------
    epochs : int, default=20
        Passes over the training data, >= 0 (0: the encoder stays as built).
    lr : float or None, default=None
        Adam learning rate, > 0. ``None``: the paper's 1e-3 for Conv4 and MLP,
        1e-4 for ResNets. Also the rate of ``adapt``'s fine-tuning.
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
    method = "sup-e"

    def __init__(self, *, epochs=20, lr=None, batch_size=64, beta=0.1):
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.beta = beta

    def config_fields(self) -> dict:
        """The :class:`~._config.FLOWRConfig` fields this stage sets.

        Examples
        --------
        >>> from sklearn_flowr.training import SupE
        >>> fields = SupE(epochs=3).config_fields()
        >>> fields["pretrain"], fields["pretrain_epochs"], fields["beta"]
        ('sup-e', 3, 0.1)
        """
        return {**super().config_fields(), "beta": self.beta}


class SupFC(_Pretraining):
    """Pre-training with the usual linear classification head (Sup-FC).

    The paper's baseline encoder.

    Parameters
    ----------
    epochs : int, default=20
        Passes over the training data, >= 0.
    lr : float or None, default=None
        Adam learning rate, > 0. ``None``: 1e-3 for Conv4 and MLP, 1e-4 for
        ResNets.
    batch_size : int, default=64
        Mini-batch size, >= 1.

    Examples
    --------
    >>> from sklearn_flowr.training import SupFC
    >>> SupFC(epochs=5)
    SupFC(epochs=5)
    """

    method = "sup-fc"

    def __init__(self, *, epochs=20, lr=None, batch_size=64):
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size


class MetaTraining(_Stage):
    """FLOWR's episodic meta-training (small or large context).

    Episodes of ``n_way`` classes and ``n_unknown`` unknown-unknown classes
    train the encoder together with the head's prior ``(mu0, s0)`` and ``b``
    (and, in the large context, the known-known class table). The ``a``,
    ``sigma``, ``class_prior`` and ``known_count`` here are those of the head
    *inside the episodes*; the online head built after training takes its own
    from ``FLOWRClassifier(head=...)``, so a grid over ``head__sigma`` never
    retrains the encoder.

    Parameters
    ----------
    epochs : int, default=10
        Meta-training epochs, >= 1.
    episodes_per_epoch : int, default=100
        Episodes per epoch, >= 1.
    n_way : int, default=10
        Support classes of a small-context episode / known classes queried per
        large-context episode, >= 1. 10 matches the evaluation's tasks.
    n_query : int, default=5
        Query rows per class in an episode, >= 1.
    n_unknown : int, default=2
        Unknown-unknown classes per episode, >= 0.
    lr : float or None, default=None
        Learning rate of the encoder, > 0. ``None``: a tenth of the
        pre-training rate (a pre-trained encoder is refined, not re-learned).
    head_lr : float or None, default=1e-2
        Learning rate of the head's parameters, > 0. ``None``: ``lr``, as in
        the paper; at that rate the prior barely moves.
    a : float, default=0.5
        CRP discount of the episodes' head, in [0, 1).
    sigma : float, default=0.5
        Class-noise variance of the episodes' head, > 0 (the paper's 0.5).
    learn_sigma : bool, default=False
        Learn ``sigma`` too (the paper keeps it fixed).
    class_prior : {"crp", "uniform"}, default="crp"
        Class prior of the episodes' head.
    known_count : float, default=1.0
        CRP pseudo-count of the known-known classes (large context), > ``a``.
    lambda_adapt : float, default=0.1
        Weight of the adaptation loss, >= 0.
    class_stats : {"empirical", "learned"}, default="empirical"
        Class statistics that start meta-training: mean and variance of each
        class's pre-trained embeddings, or Sup-E's learned class parameters
        (the paper's reading; needs ``SupE`` pre-training).
    match_sigma : bool, default=True
        Before meta-training, rescale the encoder's last linear layer so the
        training classes' mean within-class variance equals ``sigma`` (the
        scale the episodes' Gaussian model assumes). Not in the paper.
    known_table : {"refit", "learned"}, default="refit"
        Large context with an isotropic head: build the known classes by
        conditioning the prior on their final embeddings, or keep the
        meta-learned table (the paper's reading).
    autocast : {"bf16"} or None, default=None
        Run the encoder under bfloat16 autocast (a GPU speed option).

    Examples
    --------
    >>> from sklearn_flowr.training import MetaTraining
    >>> MetaTraining(epochs=2, n_way=5)
    MetaTraining(epochs=2, n_way=5)
    """

    _parameter_constraints: dict = {
        "epochs": [_count],
        "episodes_per_epoch": [_count],
        "n_way": [_count],
        "n_query": [_count],
        "n_unknown": [Interval(Integral, 0, MAX_COUNT, closed="both")],
        "lr": _rate,
        "head_lr": _rate,
        "a": [Interval(Real, 0, 1, closed="left")],
        "sigma": [_positive],
        "learn_sigma": ["boolean"],
        "class_prior": [StrOptions({"crp", "uniform"})],
        "known_count": [_positive],
        "lambda_adapt": [Interval(Real, 0, None, closed="left")],
        "class_stats": [StrOptions({"empirical", "learned"})],
        "match_sigma": ["boolean"],
        "known_table": [StrOptions({"refit", "learned"})],
        "autocast": [StrOptions({"bf16"}), None],
    }

    def __init__(self, *, epochs=10, episodes_per_epoch=100, n_way=10, n_query=5,
                 n_unknown=2, lr=None, head_lr=1e-2, a=0.5, sigma=0.5,
                 learn_sigma=False, class_prior="crp", known_count=1.0,
                 lambda_adapt=0.1, class_stats="empirical", match_sigma=True,
                 known_table="refit", autocast=None):
        self.epochs = epochs
        self.episodes_per_epoch = episodes_per_epoch
        self.n_way = n_way
        self.n_query = n_query
        self.n_unknown = n_unknown
        self.lr = lr
        self.head_lr = head_lr
        self.a = a
        self.sigma = sigma
        self.learn_sigma = learn_sigma
        self.class_prior = class_prior
        self.known_count = known_count
        self.lambda_adapt = lambda_adapt
        self.class_stats = class_stats
        self.match_sigma = match_sigma
        self.known_table = known_table
        self.autocast = autocast

    def config_fields(self) -> dict:
        """The :class:`~._config.FLOWRConfig` fields this stage sets.

        Examples
        --------
        >>> from sklearn_flowr.training import MetaTraining
        >>> fields = MetaTraining(epochs=2, lr=1e-4).config_fields()
        >>> fields["meta_epochs"], fields["meta_lr"], fields["n_way"]
        (2, 0.0001, 10)
        """
        self.validate()
        fields = self.get_params(deep=False)
        fields["meta_epochs"] = fields.pop("epochs")
        fields["meta_lr"] = fields.pop("lr")
        return fields
