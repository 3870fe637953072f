"""FLOWRClassifier: a skorch-trained torch encoder in front of the CRP-Gaussian head
(``fit``: :mod:`sklearn_flowr.training.pipeline`)."""

import copy

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import (
    _check_feature_names,
    _get_feature_names,
    check_is_fitted,
)

from . import validation
from .head import CRPGaussianClassifier
from .training import MetaTraining, SupE, pipeline

__all__ = ["FLOWRClassifier"]

# The parts a FLOWRClassifier() gets: each instance that takes one holds its
# own copy, so changing a part in place changes no other instance.
_DEFAULT_PARTS = {
    "head": CRPGaussianClassifier(covariance="full"),
    "pretrain": SupE(),
    "meta": MetaTraining(),
}


def _own_default(name, part):
    """A copy of the default part ``name`` if ``part`` is it, else ``part``."""
    return clone(part) if part is _DEFAULT_PARTS[name] else part


class FLOWRClassifier(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Few-shot open-world recognition: trained encoder + CRP-Gaussian head.

    ``fit`` pre-trains a torch encoder (``pretrain``), meta-trains it
    (``meta``) and builds the online ``head`` on its embeddings; new classes
    are then learned online without touching the network.

    Parameters
    ----------
    backbone : {"conv4", "resnet12", "resnet18", "mlp", "efficientnet-lite0"} \
or torch.nn.Module, default="conv4"
        Encoder; a module must end in a linear layer to the embedding.
        ``"mlp"`` and modules read feature vectors, the others images.
    setting : {"small", "large"}, default="small"
        Meta-training's context (``"large"``: the training classes' table in
        the episodes); the fitted model knows them either way.
    head : CRPGaussianClassifier or WhitenedCRPClassifier, \
default=CRPGaussianClassifier(covariance="full")
        Template of the online head (``head__a``, ...; ``"auto"`` values come
        from training). On a pretrained backbone's own features,
        ``WhitenedCRPClassifier()`` is the head to try. With its
        ``novelty_alpha``, 10% of each class's rows stay out of the encoder's
        training to calibrate :meth:`predict` (with no training stage, the
        share that makes about 150 rows, at most half of each class's).
    pretrain : SupE, SupFC or None, default=SupE()
        Pre-training stage (:class:`~sklearn_flowr.training.SupE`: the paper's).
    meta : MetaTraining or None, default=MetaTraining()
        Meta-training stage (``None``: the prior comes from the class means).
    calibration : "train", int, cross-validation generator, iterable or None, \
default="train"
        Platt map of P(novel): ``"train"`` fits it on tasks of the training
        classes; ``k`` or a group splitter cross-fits it on class-disjoint
        folds (one model each); ``None``: none.
    embedding_dim : int or None, default=64
        Dimension in [1, 65536] (the paper's 64); None: a pretrained backbone's own.
        A module instance passed as ``backbone`` keeps its own output dimension.
    fine_tune_steps : int, default=0
        Last-layer fine-tuning steps of :meth:`adapt`, >= 0.
    fine_tune_lr : float or None, default=None
        Its Adam rate, > 0; ``None``: the pre-training rate.
    update_known : bool, default=False
        Let online labels update the classes learned in ``fit``.
    reuse_encoder : bool, default=True
        Reuse an earlier fit's encoder in this process when the data, training
        settings, ``random_state`` and device are the same.
    device : {"auto", "cpu", "cuda"} or str, default="auto"
        Where the model runs (``"auto"``: CUDA when available).
    n_jobs : int or None, default=None
        torch's CPU threads, read as scikit-learn reads ``n_jobs`` (``None``: 1
        or a ``joblib.parallel_config`` block's, -1: every CPU). One suits a
        shared machine; more speed up a large network on a quiet one.
    accelerator : accelerate.Accelerator or None, default=None
        Train through Hugging Face accelerate; see :doc:`/multi_gpu`.
    random_state : int, RandomState or None, default=None
        Seeds training, episodes and calibration tasks.
    verbose : int, default=1
        0 silent; 1 epoch tables and progress bars; 2 also reused encoders.
    checkpoint_dir : str or None, default=None
        Save every epoch there; an interrupted ``fit`` resumes from it.

    Attributes
    ----------
    head_ : CRPGaussianClassifier or WhitenedCRPClassifier
        The online head.
    prior_head_ : CRPGaussianClassifier or WhitenedCRPClassifier
        The head with the fitted prior and no classes.
    encoder_ : torch.nn.Module
        The encoder in use (a fine-tuned copy after :meth:`adapt`).
    meta_module_ : FLOWRMetaModule
        Encoder and learned prior after ``fit``.
    pretrained_encoder_ : torch.nn.Module
        The encoder before meta-training.
    classes_ : ndarray of shape (n_classes,)
        Known classes, in ``predict_proba``'s column order.
    train_classes_ : ndarray of shape (n_train_classes,)
        Classes of the training data.
    input_shape_ : tuple
        Per-sample shape, channels first.
    n_features_in_ : int
        Number of input values per sample.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of a feature DataFrame given to ``fit``.
    novel_label_ : object
        Label :meth:`predict` gives the novel class (the head's).
    novelty_calibration_ : (float, float) or None
        Platt map ``(slope, intercept)`` of P(novel) built into the heads.
    calibration_results_ : Bunch or None
        A cross-fitted ``calibration``'s map and folds.
    noise_scale_ : float
        Factor ``meta.match_episode_noise`` applied to the embedding.
    history_ : dict
        skorch histories of the ``"pretrain"`` and ``"meta"`` stages.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.

    Examples
    --------

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
    >>> clf.predict_proba(X[:2]).shape  # 5 known classes + novel, last
    (2, 6)
    >>> clf.predict_log_proba(X[:2]).shape
    (2, 6)
    >>> clf.predict(X[:2])  # a known label, or novel_label_ (-1) where novel
    array([0, 1])
    >>> clf.transform(X[:2]).shape  # the embeddings
    (2, 4)
    >>> out = clf.open_world_step(X[y == 8][:3], y[y == 8][:3])
    >>> out.is_novel  # class 8 is new at its first sample only
    array([ True, False, False])
    >>> clf.partial_fit(X[y == 9][:1], y[y == 9][:1]).classes_  # one shot
    array([0, 1, 2, 3, 4, 8, 9])
    >>> clf.reset().classes_  # back to the state right after fit
    array([0, 1, 2, 3, 4])
    """

    _parameter_constraints: dict = pipeline.PARAMETER_CONSTRAINTS

    def __init__(self, *, backbone="conv4", setting="small",
                 head=_DEFAULT_PARTS["head"], pretrain=_DEFAULT_PARTS["pretrain"],
                 meta=_DEFAULT_PARTS["meta"], calibration="train",
                 embedding_dim=64, fine_tune_steps=0, fine_tune_lr=None,
                 update_known=False, reuse_encoder=True, device="auto",
                 n_jobs=None, accelerator=None, random_state=None, verbose=1,
                 checkpoint_dir=None):
        self.backbone = backbone
        self.setting = setting
        # The signature's defaults are shared objects: an instance copies them
        # (a part given, clone's too, is kept as it is).
        self.head = _own_default("head", head)
        self.pretrain = _own_default("pretrain", pretrain)
        self.meta = _own_default("meta", meta)
        self.calibration = calibration
        self.embedding_dim = embedding_dim
        self.fine_tune_steps = fine_tune_steps
        self.fine_tune_lr = fine_tune_lr
        self.update_known = update_known
        self.reuse_encoder = reuse_encoder
        self.device = device
        self.n_jobs = n_jobs
        self.accelerator = accelerator
        self.random_state = random_state
        self.verbose = verbose
        self.checkpoint_dir = checkpoint_dir

    def check_fit(self, X=None, y=None):
        """Run the checks of :meth:`fit` without training: the parameters,
        and with ``X`` and ``y`` the data against the episodes and folds.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import FLOWRClassifier
        >>> FLOWRClassifier(backbone="mlp").check_fit(np.zeros((4, 3)), [0] * 4)
        Traceback (most recent call last):
        ...
        ValueError: fit needs at least 2 classes; got 1 class.
        """
        self._check_fit(X, y)

    def _check_fit(self, X, y):
        # check_fit's work; returns pipeline.fit_parts's arguments.
        self._validate_params()
        pipeline.check_parts(self)
        if X is None:
            return None
        X = validation.as_model_input(X, allow_features=self._takes_features())
        y = validation.check_labels(y, X.shape[0])
        labels, y_index = np.unique(y, return_inverse=True)
        # Fail on a clashing novel label before any training.
        validation.check_new_labels(labels, validation.resolve_novel_label(
            pipeline.head_params(self.head)["novel_label"], labels, warn=True))
        runner, folds = pipeline.plan_fit(self, X, y, y_index, labels.shape[0])
        return X, y, labels, y_index, runner, folds

    def fit(self, X, y):
        """Train the encoder and build the head (after :meth:`check_fit`; the
        model changes only once all has succeeded). Returns ``self``.

        Parameters
        ----------
        X : array-like of shape (n_samples, H, W), (n_samples, H, W, C), \
(n_samples, C, H, W) or (n_samples, n_features)
            uint8 images are scaled to [0, 1].
        y : array-like of shape (n_samples,)
        """
        self._fit(X, y)
        return self

    def fit_transform(self, X, y):
        """``fit(X, y).transform(X)`` (to float32 rounding), without embedding
        ``X`` twice; shape (n_samples, embedding_dim).

        Examples
        --------
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # embedding_dim=4
        >>> import numpy as np
        >>> Z = clf.fit_transform(X[y < 3], y[y < 3])
        >>> Z.shape[1], bool(np.allclose(Z, clf.transform(X[y < 3]), atol=1e-5))
        (4, True)
        """
        return self._fit(X, y)

    def _fit(self, X, y):
        """:meth:`fit`'s work; the training rows' final embeddings."""
        checked = self._check_fit(X, y)
        fitted, embeddings = pipeline.fit_parts(self, *checked)
        state = {name: value for name, value in vars(self).items()
                 if name != "feature_names_in_"}
        names = _get_feature_names(X) if len(fitted["input_shape_"]) == 1 else None
        if names is not None:  # the column names of a feature DataFrame
            state["feature_names_in_"] = names
        # Unscaled images warned in fit: of that scale, not again after it.
        unscaled_max = (float(checked[0].max())
                        if validation.looks_unscaled(checked[0]) else None)
        state.update(fitted, _fitted_head=copy.deepcopy(fitted["head_"]),
                     _fitted_params=validation.snapshot_params(self, deep=True),
                     _unscaled_max=unscaled_max)
        self.__dict__ = state  # one update: an interrupt leaves the old fit or the new
        return embeddings

    def adapt(self, X_support, y_support, *, fine_tune=None):
        """Start a new few-shot task: fine-tune, condition on its support set
        (small context: from the prior alone). Returns ``self``.

        Parameters
        ----------
        X_support : array-like
        y_support : array-like of shape (n_support,)
        fine_tune : int, bool or None, default=None
            Last-layer fine-tuning steps: ``None`` uses ``fine_tune_steps``,
            ``True`` 20.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("small")  # the class example, small context
        >>> support = np.r_[np.flatnonzero(y == 5)[:3], np.flatnonzero(y == 6)[:3]]
        >>> clf = clf.adapt(X[support], y[support])
        >>> clf.classes_, clf.head_.class_count_
        (array([5, 6]), array([3., 3.]))
        >>> clf.predict_proba(X[y == 7][:4]).shape  # classes 5, 6 + novel
        (4, 3)
        """
        check_is_fitted(self)
        X_support = self._model_input(X_support)
        y_support = validation.check_labels(y_support, X_support.shape[0])
        # Everything that can fail runs on new objects; the model changes only
        # once the new task's encoder and head are ready.
        head = copy.deepcopy(self.prior_head_ if self.setting == "small"
                             else self._fitted_head)
        encoder = pipeline.task_encoder(self, X_support, y_support, fine_tune)
        head.partial_fit(self._embed(X_support, encoder), y_support)
        self.encoder_, self.head_ = encoder, head
        return self

    def reset(self):
        """Return to the state right after ``fit``. Returns ``self``.
        """
        check_is_fitted(self)
        head = copy.deepcopy(self._fitted_head)  # all that can fail, first
        self.encoder_, self.head_ = self.meta_module_.encoder, head
        return self

    def transform(self, X, *, encoder="current"):
        """Embeddings of ``X``, shape (n_samples, embedding_dim), under the
        encoder in use (``encoder="current"``) or the one right after
        pre-training (``"pretrained"``).
        """
        check_is_fitted(self)
        if encoder not in ("current", "pretrained"):
            raise ValueError("encoder must be 'current' or 'pretrained'; got "
                             f"{encoder!r}.")
        X = self._model_input(X)
        return self._embed(X, self.pretrained_encoder_ if encoder == "pretrained"
                           else self.encoder_)

    def partial_fit(self, X, y, classes=None):
        """Learn labelled samples online: the head's
        :meth:`CRPGaussianClassifier.partial_fit` on the embeddings of ``X``
        (on an unfitted model it runs :meth:`fit`, which trains the encoder on
        these rows, and says so when ``verbose``). Returns ``self``.
        """
        if not self.__sklearn_is_fitted__():
            if self.verbose:
                print("partial_fit on an unfitted FLOWRClassifier runs fit: the "
                      "encoder trains on these rows.", flush=True)
            return self.fit(X, y)
        self.head_.partial_fit(self.transform(X), y, classes=classes)
        return self

    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each sample, then learn from it: the head's
        :meth:`CRPGaussianClassifier.open_world_step` on the embeddings of
        ``X`` (same parameters and result).
        """
        check_is_fitted(self)
        return self.head_.open_world_step(self.transform(X), y, labelled=labelled)

    def correct(self, X, y_assigned, y_true):
        """Late labels of rows learned without one: the head's
        :meth:`CRPGaussianClassifier.correct` on the embeddings of ``X``.
        Returns ``self``.

        Examples
        --------
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("small")
        >>> clf = clf.adapt(X[y == 5][:2], y[y == 5][:2])
        >>> _ = clf.head_.set_params(unlabelled_threshold=0.0)  # learn them all
        >>> out = clf.open_world_step(X[y == 6][:2])  # no labels yet
        >>> out.y_assigned, out.learned  # a provisional class, -2
        (array([-2, -2]), array([ True,  True]))
        >>> clf = clf.correct(X[y == 6][:2], out.y_assigned, [6, 6])
        >>> clf.classes_, clf.head_.class_count_
        (array([5, 6]), array([2., 2.]))
        """
        check_is_fitted(self)
        self.head_.correct(self.transform(X), y_assigned, y_true)
        return self

    def predict_proba(self, X):
        """Probabilities of the known classes and, last, of the novel class,
        ndarray of shape (n_samples, n_classes + 1).
        """
        return self._head_for_prediction().predict_proba(self.transform(X))

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, shape (n_samples, n_classes + 1).
        """
        return self._head_for_prediction().predict_log_proba(self.transform(X))

    def predict(self, X):
        """Most probable known class, or the novel label where the conformal
        p-value is at most ``head__novelty_alpha`` (the head's :meth:`predict`).
        """
        return self._head_for_prediction().predict(self.transform(X))

    @property
    def classes_(self):
        check_is_fitted(self)
        return self._head_for_prediction().classes_

    @property
    def novel_label_(self):
        check_is_fitted(self)
        return self.head_.novel_label_

    def _takes_features(self):
        return not isinstance(self.backbone, str) or self.backbone == "mlp"

    def _head_for_prediction(self):
        check_is_fitted(self)
        if not self.head_.__sklearn_is_fitted__():
            raise NotFittedError(
                "The head has no classes yet: give it a support set with "
                "adapt(X, y) or partial_fit(X, y) (open_world_step works from "
                "the prior alone)."
            )
        return self.head_

    def _model_input(self, X):
        # Every method of a fitted model reads its input through here.
        validation.check_params_unchanged(
            self, getattr(self, "_fitted_params", None),
            runtime=pipeline.RUNTIME_PARAMS, deep=True)
        _check_feature_names(self, X, reset=False)  # those of fit's DataFrame
        return validation.as_model_input(
            X, allow_features=self._takes_features(), expected_shape=self.input_shape_,
            fitted_max=getattr(self, "_unscaled_max", None))

    def _embed(self, X, encoder):
        pipeline.place_fitted_modules(self)
        batch_size = getattr(self.pretrain, "batch_size", pipeline.BATCH_SIZE)
        return pipeline.embed_finite(encoder, X, 4 * batch_size, self.n_jobs)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "head_")

    def __getstate__(self):
        # Tensors as NumPy arrays: CUDA-trained models load on CPU-only
        # machines, and skops.io can store the model (it refuses tensors).
        return pipeline.store_modules(super().__getstate__())

    def __setstate__(self, state):
        super().__setstate__(pipeline.restore_modules(state))
