"""FLOWRClassifier: a skorch-trained torch encoder in front of the CRP-Gaussian head.

The estimator composes its parts as :class:`~sklearn.pipeline.Pipeline` does:
the online head (``head``, a :class:`~sklearn_flowr.CRPGaussianClassifier`)
and the training stages (``pretrain``, ``meta``) are objects passed in, their
settings reached as ``head__sigma`` or ``meta__episodes_per_epoch``. ``fit``
runs the stages (:func:`~sklearn_flowr.training._pipeline.train_encoder`),
builds the heads from the template (:mod:`~sklearn_flowr.training._head_building`)
and serves them (:class:`~sklearn_flowr._encoder_head.EncoderHeadMixin`).
"""

import copy

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.utils.validation import _check_feature_names

from ._encoder_head import EncoderHeadMixin
from ._head import CRPGaussianClassifier
from ._inputs import as_model_input, check_labels
from ._labels import check_new_labels, resolve_novel_label
from ._params import snapshot_params
from .protocol._cross_fit import cross_fit_on_plan
from .training._checkpoints import check_fingerprint
from .training._config import PARAMETER_CONSTRAINTS, FLOWRConfig
from .training._device import deterministic_cuda
from .training._head_building import build_heads, check_head_template
from .training._memo import ENCODER_MEMO
from .training._pipeline import (
    check_calibration_plan,
    check_training_plan,
    train_encoder,
)
from .training._runner import StageRunner
from .training._stages import MetaTraining, SupE

__all__ = ["FLOWRClassifier"]

# The parts a FLOWRClassifier() gets. Shared by every instance that takes the
# default, so FLOWRClassifier.set_params copies one before changing it.
_DEFAULT_PARTS = {
    "head": CRPGaussianClassifier(covariance="full"),
    "pretrain": SupE(),
    "meta": MetaTraining(),
}


class FLOWRClassifier(EncoderHeadMixin, ClassifierMixin, TransformerMixin,
                      BaseEstimator):
    """Few-shot open-world recognition: trained encoder + CRP-Gaussian head.

    ``fit`` pre-trains a torch encoder (``pretrain``), meta-trains it with
    the FLOWR head in the small or large context (``meta``), and builds the
    online ``head`` on its embeddings, with the training classes as its known
    classes. After that the model predicts, and learns new classes online from
    their labels (``partial_fit``, ``open_world_step``) without touching the
    network. :meth:`adapt` starts a new few-shot task from the prior alone;
    :meth:`reset` returns to the state right after ``fit``.

    Parameters
    ----------
    backbone : {"conv4", "resnet12", "resnet18", "mlp", "efficientnet-lite0"} \
or torch.nn.Module, default="conv4"
        Encoder. A module is used as given and must end in a linear layer to
        the embedding; ``"mlp"`` and modules read feature vectors, the others
        images. Use ``"mlp"`` for tabular features.
    setting : {"small", "large"}, default="small"
        Meta-training's context: ``"small"`` learns the representation and
        the prior from few-shot episodes; ``"large"`` also keeps the training
        classes' table in the episodes (the paper's large context). Either
        way the fitted model knows the training classes.
    head : CRPGaussianClassifier, default=CRPGaussianClassifier(covariance="full")
        Template of the online head; its settings are reached as
        ``head__a``, ``head__sigma``, ... Its ``"auto"`` values are filled by
        training: ``b`` is the meta-learned concentration; with
        ``covariance="full"`` (the default, not in the paper) ``mu0``, the
        prior covariance and the class noise come from empirical Bayes on the
        training embeddings; with ``covariance="isotropic"`` (the paper's
        head) they are the meta-learned ones. An explicit value is used as
        given: on the default head ``sigma=s`` means isotropic class noise
        ``s * I`` on an embedding whose within-class variance is near
        ``meta.sigma``. Changing only head settings reuses the trained encoder
        (``reuse_encoder``). Search them with ``GridSearchCV``.
    pretrain : SupE, SupFC or None, default=SupE()
        Pre-training stage (:class:`~sklearn_flowr.training.SupE`, the
        paper's; :class:`~sklearn_flowr.training.SupFC`, the linear-head
        baseline) or none.
    meta : MetaTraining or None, default=MetaTraining()
        Meta-training stage (:class:`~sklearn_flowr.training.MetaTraining`),
        or ``None`` for none (the prior then comes from the class means).
    calibration : "train", int, cross-validation generator, iterable or None, \
default="train"
        Platt map of P(novel) set on the head (not in the paper; it keeps the
        order of P(novel)). ``"train"``: fitted on open-world tasks of the
        training classes on the final embedding. An int ``k`` or a group
        splitter: cross-fitted on ``k`` class-disjoint folds, each training
        one more model (costly; helps with few training classes). ``None``:
        the model's own P(novel), as in the paper. ``"train"`` needs two or
        more rows in every class.
    embedding_dim : int, default=64
        Dimension of the embedding, in [1, 65536] (the paper's 64).
    fine_tune_steps : int, default=0
        Last-layer fine-tuning steps of :meth:`adapt`, >= 0.
    update_known : bool, default=False
        Let online labels update the classes learned in ``fit`` (the paper
        keeps them fixed); new classes always learn.
    reuse_encoder : bool, default=True
        When ``fit`` sees the same data, training settings, ``random_state``
        and device as an earlier fit in this process, reuse that trained
        encoder instead of training again (an in-memory store of the last
        few; a grid over ``head__*`` then trains once per fold). With
        ``random_state=None`` this makes such refits return the same encoder;
        set ``False`` to train afresh every time.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        ``"auto"`` uses CUDA when available. Read whenever the model runs, so
        ``set_params(device=...)`` after ``fit`` moves it.
    accelerator : accelerate.Accelerator or None, default=None
        Train through Hugging Face accelerate (DDP over the processes
        ``accelerate launch`` starts). See :doc:`/multi_gpu`.
    random_state : int, RandomState or None, default=None
        Seeds training, episodes and calibration tasks.
    verbose : int, default=1
        0 is silent; 1 prints skorch's epoch tables and tqdm bars; 2 also
        says when an earlier fit's encoder is reused.
    checkpoint_dir : str or None, default=None
        Save every epoch there and resume an interrupted ``fit`` from it. The
        folder remembers a fingerprint of the data and training settings; a
        fit that differs raises rather than resume another fit's checkpoints.

    Attributes
    ----------
    head_ : CRPGaussianClassifier
        The online head (its state changes with ``partial_fit``).
    prior_head_ : CRPGaussianClassifier
        The head with the fitted prior and no classes: where :meth:`adapt`
        and small-context tasks start.
    encoder_ : torch.nn.Module
        The encoder in use (a fine-tuned copy after :meth:`adapt`).
    meta_module_ : FLOWRMetaModule
        Encoder and learned head parameters after ``fit``.
    pretrained_encoder_ : torch.nn.Module
        The encoder after pre-training, before meta-training (what baselines
        are compared on).
    classes_ : ndarray of shape (n_classes,)
        Known classes of the head, in the order of ``predict_proba``'s
        columns: the training classes sorted, then classes learned online in
        order of arrival.
    train_classes_ : ndarray of shape (n_train_classes,)
        Classes of the training data.
    input_shape_ : tuple
        Per-sample shape, channels first.
    n_features_in_ : int
        Number of input values per sample (features, or pixels x channels).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of a feature DataFrame given to ``fit``.
    novel_label_ : object
        Label :meth:`predict` gives the novel class.
    calibration_results_ : Bunch or None
        With a cross-fitted ``calibration``: the map and its folds'
        figures (:func:`~sklearn_flowr.protocol.cross_fit_novelty_calibration`).
    noise_scale_ : float
        Factor ``meta.match_sigma`` applied to the embedding (1.0 when off).
    history_ : dict
        skorch histories of the ``"pretrain"`` and ``"meta"`` stages.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.

    Examples
    --------
    The model every method's example uses
    (:func:`sklearn_flowr._examples.flowr_example` fits it once):

    >>> from sklearn.datasets import load_digits
    >>> from sklearn_flowr import FLOWRClassifier
    >>> from sklearn_flowr.training import MetaTraining, SupE
    >>> X, y = load_digits(return_X_y=True)
    >>> X = X / 16.0  # 64 pixel features, for the "mlp" backbone
    >>> clf = FLOWRClassifier(backbone="mlp", setting="large", embedding_dim=4,
    ...                       pretrain=SupE(epochs=1),
    ...                       meta=MetaTraining(epochs=1, episodes_per_epoch=2,
    ...                                         n_way=3, n_unknown=1),
    ...                       verbose=0, random_state=0)
    >>> clf = clf.fit(X[y < 5], y[y < 5])
    >>> clf.predict_proba(X[:2]).shape  # 5 known classes + novel
    (2, 6)
    >>> out = clf.open_world_step(X[y == 8][:3], y[y == 8][:3])
    >>> out.is_novel  # class 8 is new at its first sample only
    array([ True, False, False])

    Images work the same with ``backbone="conv4"`` (the default) on arrays of
    shape ``(n, H, W)``, ``(n, H, W, C)`` or ``(n, C, H, W)``.
    """

    _parameter_constraints: dict = PARAMETER_CONSTRAINTS

    def __init__(self, *, backbone="conv4", setting="small",
                 head=_DEFAULT_PARTS["head"], pretrain=_DEFAULT_PARTS["pretrain"],
                 meta=_DEFAULT_PARTS["meta"], calibration="train",
                 embedding_dim=64, fine_tune_steps=0, update_known=False,
                 reuse_encoder=True, device="auto", accelerator=None,
                 random_state=None, verbose=1, checkpoint_dir=None):
        self.backbone = backbone
        self.setting = setting
        self.head = head
        self.pretrain = pretrain
        self.meta = meta
        self.calibration = calibration
        self.embedding_dim = embedding_dim
        self.fine_tune_steps = fine_tune_steps
        self.update_known = update_known
        self.reuse_encoder = reuse_encoder
        self.device = device
        self.accelerator = accelerator
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir

    def set_params(self, **params):
        """Set parameters, nested ones as ``head__sigma`` (see Pipeline).

        A part that is still the shared default is copied before a nested
        setting changes it, so no other instance sees the change.

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        >>> from sklearn_flowr import FLOWRClassifier
        >>> clf = FLOWRClassifier().set_params(head__prior_scale=2.0,
        ...                                    meta__epochs=5, calibration=None)
        >>> clf.head.prior_scale, clf.meta.epochs, clf.calibration
        (2.0, 5, None)
        >>> FLOWRClassifier().head.prior_scale  # the shared default is unchanged
        1.0
        """
        for name, default in _DEFAULT_PARTS.items():
            if (getattr(self, name, None) is default
                    and any(key.startswith(name + "__") for key in params)):
                setattr(self, name, clone(default))
        return super().set_params(**params)

    # ------------------------------------------------------------------ fitting
    def _training_config(self) -> FLOWRConfig:
        """The training configuration of the parts (each validated)."""
        return FLOWRConfig.from_parts(
            backbone=self.backbone, setting=self.setting,
            embedding_dim=self.embedding_dim, pretrain=self.pretrain,
            meta=self.meta, verbose=self.verbose,
            checkpoint_dir=self.checkpoint_dir)

    def fit(self, X, y):
        """Train the encoder and build the head on labelled inputs.

        Every parameter is checked, alone and together, and the labels
        against the episodes meta-training will draw, before any training;
        the model's attributes change only once everything has succeeded.

        Parameters
        ----------
        X : array-like of shape (n_samples, H, W), (n_samples, H, W, C), \
(n_samples, C, H, W) or (n_samples, n_features)
            uint8 images are scaled to [0, 1]; feature vectors need
            ``backbone="mlp"`` or a module.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        >>> from sklearn_flowr._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted as in the class example
        >>> clf = clf.fit(X[y < 3], y[y < 3])  # a refit forgets digits 3, 4
        >>> clf.classes_
        array([0, 1, 2])
        """
        self._fit(X, y)
        return self

    def fit_transform(self, X, y):
        """Fit, and return the training inputs' embeddings under the final
        encoder (computed once, during ``fit``).

        The same as ``fit(X, y).transform(X)`` (to float32 rounding: the
        batches may differ), without embedding ``X`` a second time.

        Parameters
        ----------
        X : array-like
            As in :meth:`fit`.
        y : array-like of shape (n_samples,)
            Class labels.

        Returns
        -------
        Z : ndarray of shape (n_samples, embedding_dim)

        Examples
        --------
        >>> from sklearn_flowr._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # embedding_dim=4
        >>> import numpy as np
        >>> Z = clf.fit_transform(X[y < 3], y[y < 3])
        >>> Z.shape[1], bool(np.allclose(Z, clf.transform(X[y < 3]), atol=1e-5))
        (4, True)
        """
        return self._fit(X, y)

    def _fit(self, X, y):
        """:meth:`fit`'s work; the training rows' final embeddings."""
        self._validate_params()
        config = self._training_config()
        self.head._validate_params()
        check_head_template(self.head, self.meta)
        X_raw = X
        X = as_model_input(X, allow_features=config.takes_features)
        y = check_labels(y, X.shape[0])
        labels, y_index = np.unique(y, return_inverse=True)
        # Fail on a clashing novel label before any training.
        check_new_labels(labels, resolve_novel_label(
            self.head.get_params()["novel_label"], labels))
        runner = StageRunner.for_fit(
            device=self.device, random_state=self.random_state,
            accelerator=self.accelerator, checkpoint_dir=self.checkpoint_dir,
            verbose=self.verbose)
        check_training_plan(config, y_index, labels.shape[0], runner.seed)
        plan = self._check_calibration(config, X, y, y_index, runner.seed)
        if self.checkpoint_dir is not None:
            check_fingerprint(self.checkpoint_dir, X, y, _training_fields(config))
        with deterministic_cuda(runner.device.type == "cuda"):
            trained = self._train_encoder(X, labels, y_index, config, runner)
            prior_head, head = build_heads(
                self.head, trained["meta_module_"], trained["embeddings"], y_index,
                labels, setting=self.setting, update_known=self.update_known,
                known_table=config.known_table,
                calibrate=isinstance(self.calibration, str),
                random_state=runner.seed, verbose=self.verbose)
            crossed = None
            if plan is not None:
                if self.verbose:
                    print(f"Cross-fitting the novelty map: {len(plan)} models "
                          "trained on class-disjoint folds.")
                crossed = cross_fit_on_plan(self, X, y, plan)
                for fitted in (prior_head, head):
                    fitted.set_params(
                        novelty_calibration=(crossed.slope, crossed.intercept))
        trained = dict(trained)
        embeddings = trained.pop("embeddings")
        fitted = dict(trained, head_=head, prior_head_=prior_head,
                      encoder_=trained["meta_module_"].encoder,
                      train_classes_=labels, input_shape_=X.shape[1:],
                      n_features_in_=int(np.prod(X.shape[1:])),
                      calibration_results_=crossed)
        if X.ndim == 2:
            _check_feature_names(self, X_raw, reset=True)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        for name, value in fitted.items():
            setattr(self, name, value)
        self._fitted_head = copy.deepcopy(head)
        self._fitted_params = snapshot_params(self, deep=True)
        return embeddings

    def _check_calibration(self, config, X, y, y_index, seed):
        """Fail before training on what ``calibration`` cannot do; its folds."""
        if self.calibration is None:
            return None
        if isinstance(self.calibration, str):
            smallest = int(np.bincount(y_index).min())
            if smallest < 2:
                raise ValueError(
                    "calibration='train' draws open-world tasks from the "
                    "training classes and needs at least 2 rows in every class; "
                    f"the smallest has {smallest}. Give more rows or set "
                    "calibration=None.")
            return None
        if self.accelerator is not None:
            raise ValueError(
                "A cross-fitted calibration trains one model per fold on this "
                "process; it does not run through an accelerator. Use "
                "calibration='train' or None.")
        return check_calibration_plan(self.calibration, config, X, y, seed)

    def _train_encoder(self, X, labels, y_index, config, runner):
        """``train_encoder``, or a copy of an identical earlier run's result."""
        key = None
        if self.reuse_encoder and self.accelerator is None:
            key = ENCODER_MEMO.key(X, y_index, _training_fields(config),
                                   random_state=self.random_state,
                                   device=runner.device)
            reused = ENCODER_MEMO.get(key)
            if reused is not None:
                # Only at verbose >= 2: a grid over head settings would
                # print it once per candidate.
                if self.verbose >= 2:
                    print("Reusing the encoder trained on the same data and "
                          "settings in this process (reuse_encoder=True).")
                return reused
        trained = train_encoder(X, labels, y_index, config, runner)
        ENCODER_MEMO.put(key, trained)
        return trained


def _training_fields(config: FLOWRConfig) -> dict:
    """What shapes the trained encoder: the configuration without run settings."""
    return {name: getattr(config, name) for name in config.__dataclass_fields__
            if name not in ("verbose", "checkpoint_dir")}
