"""FLOWRClassifier: a skorch-trained torch encoder in front of the CRP-Gaussian head.

The estimator composes its parts as :class:`~sklearn.pipeline.Pipeline` does:
the online head (``head``) and the training stages (``pretrain``, ``meta``)
are objects passed in, their settings reached as ``head__sigma`` or
``meta__episodes_per_epoch``. ``fit`` trains the encoder
(:mod:`sklearn_flowr.training.pipeline`) and builds the heads from the
template; the other methods embed and hand the rows to the head.
"""

import copy
import os
from numbers import Integral, Real

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import _check_feature_names, check_is_fitted

from ._head import CRPGaussianClassifier
from ._inputs import as_model_input, check_labels
from ._labels import check_new_labels, resolve_novel_label
from ._params import check_params_unchanged, snapshot_params
from .encoders._factory import BACKBONE_NAMES
from .training import MetaTraining, SupE, fine_tune_last_layer
from .training.pipeline import (
    BATCH_SIZE,
    MAX_COUNT,
    check_parts,
    embed_finite,
    fit_parts,
    place_modules,
    plan_fit,
    pretraining_lr,
    resolve_device,
    restore_modules,
    store_modules,
)

__all__ = ["FLOWRClassifier"]

# The parts a FLOWRClassifier() gets. Shared by every instance that takes the
# default, so FLOWRClassifier.set_params copies one before changing it.
_DEFAULT_PARTS = {
    "head": CRPGaussianClassifier(covariance="full"),
    "pretrain": SupE(),
    "meta": MetaTraining(),
}
# Parameters a fitted model reads when it runs, so set_params may change them
# after fit; any other change needs a refit (sklearn_flowr._params).
RUNTIME_PARAMS = frozenset({"device", "verbose", "fine_tune_steps", "fine_tune_lr",
                            "accelerator", "checkpoint_dir", "reuse_encoder",
                            "pretrain__batch_size"})
# Steps of adapt(fine_tune=True).
_DEFAULT_FINE_TUNE_STEPS = 20


class FLOWRClassifier(ClassifierMixin, TransformerMixin, BaseEstimator):
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
        classes' table in the episodes. Either way the fitted model knows the
        training classes.
    head : CRPGaussianClassifier, default=CRPGaussianClassifier(covariance="full")
        Template of the online head, its settings reached as ``head__a``,
        ``head__sigma``, ... Its ``"auto"`` values are filled by training:
        ``b`` is the meta-learned concentration; with ``covariance="full"``
        (not in the paper) the prior and class noise come from empirical Bayes
        on the training embeddings, with ``covariance="isotropic"`` (the
        paper's head) they are the meta-learned ones. Changing only head
        settings reuses the trained encoder: search them with ``GridSearchCV``.
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
        training classes (needs 2 or more rows in every class). An int ``k``
        or a group splitter: cross-fitted on ``k`` class-disjoint folds, each
        training one more model. ``None``: the model's own P(novel).
    embedding_dim : int, default=64
        Dimension of the embedding, in [1, 65536] (the paper's 64).
    fine_tune_steps : int, default=0
        Last-layer fine-tuning steps of :meth:`adapt`, >= 0.
    fine_tune_lr : float or None, default=None
        Adam learning rate of :meth:`adapt`'s fine-tuning, > 0. ``None``: the
        pre-training rate (``pretrain.lr``, or its default for the backbone).
    update_known : bool, default=False
        Let online labels update the classes learned in ``fit`` (the paper
        keeps them fixed); new classes always learn.
    reuse_encoder : bool, default=True
        Reuse the encoder of an earlier fit in this process on the same data,
        training settings, ``random_state`` and device (a grid over
        ``head__*`` then trains once per fold). ``False``: train afresh.
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
        Save every epoch there and resume an interrupted ``fit`` from it; a
        fit on other data or settings raises rather than resume.

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
        Factor ``meta.match_episode_noise`` applied to the embedding (1.0 when
        off).
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
    (:func:`sklearn_flowr.training._examples.flowr_example` fits it once):

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

    _parameter_constraints: dict = {
        "backbone": [StrOptions(set(BACKBONE_NAMES)), torch.nn.Module],
        "setting": [StrOptions({"small", "large"})],
        "head": [HasMethods(["fit", "partial_fit", "predict_proba",
                             "open_world_step"])],
        "pretrain": [HasMethods(["validate"]), None],
        "meta": [HasMethods(["validate"]), None],
        "calibration": [StrOptions({"train"}), "cv_object", None],
        "embedding_dim": [Interval(Integral, 1, 65536, closed="both")],
        "fine_tune_steps": [Interval(Integral, 0, MAX_COUNT, closed="both")],
        "fine_tune_lr": [Interval(Real, 0, None, closed="neither"), None],
        "update_known": ["boolean"],
        "reuse_encoder": ["boolean"],
        "device": [str, torch.device],
        "accelerator": [HasMethods(["prepare", "backward"]), None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "checkpoint_dir": [str, os.PathLike, None],
    }

    def __init__(self, *, backbone="conv4", setting="small",
                 head=_DEFAULT_PARTS["head"], pretrain=_DEFAULT_PARTS["pretrain"],
                 meta=_DEFAULT_PARTS["meta"], calibration="train",
                 embedding_dim=64, fine_tune_steps=0, fine_tune_lr=None,
                 update_known=False, reuse_encoder=True, device="auto",
                 accelerator=None, random_state=None, verbose=1,
                 checkpoint_dir=None):
        self.backbone = backbone
        self.setting = setting
        self.head = head
        self.pretrain = pretrain
        self.meta = meta
        self.calibration = calibration
        self.embedding_dim = embedding_dim
        self.fine_tune_steps = fine_tune_steps
        self.fine_tune_lr = fine_tune_lr
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
    def check_fit(self, X=None, y=None):
        """Run the checks of :meth:`fit` without training.

        Every parameter, alone and together (the stages, the head template,
        the device); with ``X`` and ``y`` also the data, the labels against
        the episodes meta-training will draw and the calibration's folds.

        Parameters
        ----------
        X : array-like or None, default=None
            As in :meth:`fit`; ``None`` checks the parameters only.
        y : array-like of shape (n_samples,) or None, default=None

        Raises
        ------
        ValueError
            Naming the parameter or the data's problem.

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
        """:meth:`check_fit`'s work: ``fit_parts``'s arguments."""
        self._validate_params()
        check_parts(self)
        if X is None:
            return None
        X = as_model_input(X, allow_features=self._takes_features())
        y = check_labels(y, X.shape[0])
        labels, y_index = np.unique(y, return_inverse=True)
        # Fail on a clashing novel label before any training.
        check_new_labels(labels, resolve_novel_label(
            self.head.get_params()["novel_label"], labels))
        runner, plan = plan_fit(self, X, y, y_index, labels.shape[0])
        return X, y, labels, y_index, runner, plan

    def fit(self, X, y):
        """Train the encoder and build the head on labelled inputs.

        Every check of :meth:`check_fit` runs before any training; the
        model's attributes change only once everything has succeeded.

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
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted as in the class example
        >>> clf = clf.fit(X[y < 3], y[y < 3])  # a refit forgets digits 3, 4
        >>> clf.classes_
        array([0, 1, 2])
        """
        self._fit(X, y)
        return self

    def fit_transform(self, X, y):
        """Fit, and return the training inputs' embeddings under the final
        encoder (computed once, during ``fit``; equal to
        ``fit(X, y).transform(X)`` to float32 rounding).

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
        fitted, embeddings = fit_parts(self, *checked)
        X_model = checked[0]
        if X_model.ndim == 2:
            _check_feature_names(self, X, reset=True)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        fitted.update(input_shape_=X_model.shape[1:],
                      n_features_in_=int(np.prod(X_model.shape[1:])))
        for name, value in fitted.items():
            setattr(self, name, value)
        self._fitted_head = copy.deepcopy(self.head_)
        self._fitted_params = snapshot_params(self, deep=True)
        return embeddings

    # ------------------------------------------------------------- adaptation
    def adapt(self, X_support, y_support, *, fine_tune=None):
        """Start a new few-shot task: fine-tune, condition on its support set.

        In the small context the task starts from the prior alone
        (``prior_head_``: the training classes are forgotten); in the large
        context from the fitted head (the training classes stay known).

        Parameters
        ----------
        X_support : array-like
            Support inputs (same format as in ``fit``).
        y_support : array-like of shape (n_support,)
            Their labels.
        fine_tune : int, bool or None, default=None
            Steps of last-layer fine-tuning on the support set: ``None`` uses
            ``fine_tune_steps``, ``False`` none, ``True`` 20.

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        A small-context task with two classes of three shots:

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
        y_support = check_labels(y_support, X_support.shape[0])
        if fine_tune is None:
            steps = self.fine_tune_steps
        elif isinstance(fine_tune, (bool, np.bool_)):
            steps = _DEFAULT_FINE_TUNE_STEPS if fine_tune else 0
        elif isinstance(fine_tune, Integral) and fine_tune >= 0:
            steps = int(fine_tune)
        else:
            raise ValueError("fine_tune must be None, a bool or an int >= 0; got "
                             f"{fine_tune!r}.")
        # Everything that can fail runs on new objects; the model changes only
        # once the new task's encoder and head are ready.
        head = copy.deepcopy(self.prior_head_ if self.setting == "small"
                             else self._fitted_head)
        head._check_labels(y_support, None if self.setting == "small"
                           else head._registry)
        device = self._place_modules()
        encoder = self.meta_module_.encoder
        if steps:
            lr = (pretraining_lr(self.pretrain, self.backbone)
                  if self.fine_tune_lr is None else self.fine_tune_lr)
            encoder = fine_tune_last_layer(
                encoder, self.meta_module_, X_support, y_support, steps=steps,
                lr=lr, device=device, verbose=self.verbose)
        head.partial_fit(self._embed(X_support, encoder), y_support)
        self.encoder_, self.head_ = encoder, head
        return self

    def reset(self):
        """Return to the state right after ``fit`` (encoder and head).

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted on digits 0-4
        >>> clf = clf.partial_fit(X[y == 9][:2], y[y == 9][:2])
        >>> clf.classes_
        array([0, 1, 2, 3, 4, 9])
        >>> clf.reset().classes_  # the class learned online is forgotten
        array([0, 1, 2, 3, 4])
        """
        check_is_fitted(self)
        head = copy.deepcopy(self._fitted_head)  # all that can fail, first
        self.encoder_, self.head_ = self.meta_module_.encoder, head
        return self

    # ------------------------------------------------------- online and predict
    def transform(self, X, *, encoder="current"):
        """Embeddings of ``X`` (batched, no gradient).

        Parameters
        ----------
        X : array-like
            Images or features, as in ``fit``.
        encoder : {"current", "pretrained"}, default="current"
            ``"current"``: the encoder in use (meta-trained, fine-tuned after
            :meth:`adapt`). ``"pretrained"``: the encoder right after
            pre-training, as baselines use it.

        Returns
        -------
        Z : ndarray of shape (n_samples, embedding_dim)

        Examples
        --------
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # embedding_dim=4
        >>> Z = clf.transform(X[:3])
        >>> Z.shape, Z.dtype
        ((3, 4), dtype('float64'))
        >>> clf.transform(X[:3], encoder="pretrained").shape
        (3, 4)
        """
        check_is_fitted(self)
        if encoder not in ("current", "pretrained"):
            raise ValueError("encoder must be 'current' or 'pretrained'; got "
                             f"{encoder!r}.")
        X = self._model_input(X)
        return self._embed(X, self.pretrained_encoder_ if encoder == "pretrained"
                           else self.encoder_)

    def partial_fit(self, X, y, classes=None):
        """Learn labelled samples online (new labels become classes).

        On an unfitted model the first call trains it with :meth:`fit` on
        this batch (as scikit-learn's incremental learners start).

        Parameters
        ----------
        X : array-like
        y : array-like of shape (n_samples,)
        classes : array-like, default=None
            Optional guard, as in :meth:`CRPGaussianClassifier.partial_fit`.

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("small")  # fitted on digits 0-4
        >>> clf = clf.partial_fit(X[y == 9][:1], y[y == 9][:1])  # one shot
        >>> clf.classes_
        array([0, 1, 2, 3, 4, 9])
        """
        if not self.__sklearn_is_fitted__():
            return self.fit(X, y)
        self.head_.partial_fit(self.transform(X), y, classes=classes)
        return self

    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each sample, then learn from it; see the head's method.

        Without ``y``, the head assigns each sample by its CRP posterior to a
        known or a new provisional class; late labels go to :meth:`correct`.

        Parameters
        ----------
        X : array-like
        y : array-like of shape (n_samples,) or None, default=None
            Labels revealed after each prediction; None: no labels.
        labelled : array-like of bool, shape (n_samples,), or None, default=None
            Rows of ``y`` that carry a label (a mixed batch).

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            ``y_pred``, ``y_known``, ``p_novel``, ``is_novel``,
            ``y_assigned`` and ``learned`` per sample.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted on digits 0-4
        >>> stream = np.r_[np.flatnonzero(y == 8)[:3], np.flatnonzero(y == 0)[:2]]
        >>> out = clf.open_world_step(X[stream], y[stream])
        >>> out.is_novel  # class 8 is new at its first sample only
        array([ True, False, False, False, False])
        >>> clf.classes_
        array([0, 1, 2, 3, 4, 8])
        """
        check_is_fitted(self)
        return self.head_.open_world_step(self.transform(X), y, labelled=labelled)

    def correct(self, X, y_assigned, y_true):
        """Late labels of samples learned without one; see
        :meth:`CRPGaussianClassifier.correct`.

        Parameters
        ----------
        X : array-like
        y_assigned : array-like of shape (n_samples,)
        y_true : array-like of shape (n_samples,)

        Returns
        -------
        self : FLOWRClassifier

        Examples
        --------
        >>> import numpy as np
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
        """Probabilities of the known classes and, last, of the novel class.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes + 1)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted on digits 0-4
        >>> proba = clf.predict_proba(X[:3])
        >>> proba.shape  # 5 known classes, then the novel class
        (3, 6)
        >>> bool(np.allclose(proba.sum(axis=1), 1.0))
        True
        """
        return self._head_for_prediction().predict_proba(self.transform(X))

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes + 1)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted on digits 0-4
        >>> log_proba = clf.predict_log_proba(X[:3])
        >>> bool(np.allclose(np.exp(log_proba), clf.predict_proba(X[:3])))
        True
        """
        return self._head_for_prediction().predict_log_proba(self.transform(X))

    def predict(self, X):
        """Most probable known class, or the novel label.

        Parameters
        ----------
        X : array-like

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr.training._examples import flowr_example
        >>> clf, X, y = flowr_example("large")  # fitted on digits 0-4
        >>> y_pred = clf.predict(X[:5])
        >>> labels = np.r_[clf.classes_, -1]  # -1: the "auto" novel label
        >>> bool(np.array_equal(y_pred, labels[clf.predict_proba(X[:5]).argmax(1)]))
        True
        """
        return self._head_for_prediction().predict(self.transform(X))

    @property
    def classes_(self):
        check_is_fitted(self)
        return self._head_for_prediction().classes_

    @property
    def novel_label_(self):
        """The label :meth:`predict` gives the novel class (as the head's)."""
        check_is_fitted(self)
        return self.head_.novel_label_

    # ------------------------------------------------------------------ helpers
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
        check_params_unchanged(self, getattr(self, "_fitted_params", None),
                               runtime=RUNTIME_PARAMS, deep=True)
        return as_model_input(X, allow_features=self._takes_features(),
                              expected_shape=self.input_shape_)

    def _embed(self, X, encoder):
        self._place_modules()
        batch_size = getattr(self.pretrain, "batch_size", BATCH_SIZE)
        return embed_finite(encoder, X, 4 * batch_size)

    def _place_modules(self):
        # The one place a fitted model's modules move, before any of them
        # runs: after set_params(device=...), unpickling (CPU tensors), copies.
        device = resolve_device(self.device)
        place_modules(device, self.meta_module_, self.encoder_,
                      self.pretrained_encoder_)
        return device

    def __sklearn_is_fitted__(self):
        return hasattr(self, "head_")

    def __getstate__(self):
        # Tensors as NumPy arrays: CUDA-trained models load on CPU-only
        # machines, and skops.io can store the model (it refuses tensors).
        return store_modules(super().__getstate__())

    def __setstate__(self, state):
        super().__setstate__(restore_modules(state))
