"""Serving a fitted encoder and online head: the methods after ``fit``.

:class:`EncoderHeadMixin` holds what :class:`~sklearn_flowr.FLOWRClassifier`
does once trained: start a task (``adapt``, ``reset``), embed
(``transform``), learn and predict online through the CRP-Gaussian head, put
its modules on the device ``device`` names, and pickle them without tensors
(docs/design.rst, section 4).
"""

import copy
from numbers import Integral

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from ._inputs import as_model_input, check_labels
from ._params import check_params_unchanged
from .training import embed, fine_tune_last_layer
from .training._device import place_modules, resolve_device
from .training._persistence import restore_modules, store_modules

__all__ = ["RUNTIME_PARAMS", "EncoderHeadMixin"]

# Parameters a fitted model reads when it runs, so set_params may change them
# after fit: where it runs, how much it prints, adapt's fine-tuning and its
# rate, the embedding batch. Any other change needs a refit
# (sklearn_flowr._params).
RUNTIME_PARAMS = frozenset({"device", "verbose", "fine_tune_steps", "accelerator",
                            "checkpoint_dir", "reuse_encoder", "pretrain__lr",
                            "pretrain__batch_size"})
# Embedding batch without a pre-training stage to take it from.
_DEFAULT_BATCH_SIZE = 64
# Steps of adapt(fine_tune=True).
_DEFAULT_FINE_TUNE_STEPS = 20


class EncoderHeadMixin:
    """The methods of a fitted encoder + CRP-Gaussian head model.

    The estimator's ``fit`` sets ``encoder_``, ``meta_module_``,
    ``pretrained_encoder_``, ``head_``, ``prior_head_``, ``input_shape_``, and
    the snapshots ``_fitted_head`` and ``_fitted_params``; its parameters
    ``backbone``, ``setting``, ``pretrain``, ``device``, ``verbose`` and
    ``fine_tune_steps`` are read here.
    """

    # -------------------------------------------------------------- adaptation
    def adapt(self, X_support, y_support, *, fine_tune=None):
        """Start a new few-shot task: fine-tune, condition on its support set.

        In the small context the task starts from the prior alone
        (``prior_head_``: the training classes are forgotten); in the large
        context from the fitted head (the training classes stay known).

        Parameters
        ----------
        X_support : array-like
            Support images (same format as in ``fit``).
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
        >>> from sklearn_flowr._examples import flowr_example
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
            encoder = fine_tune_last_layer(
                encoder, self.meta_module_, X_support, y_support, steps=steps,
                lr=self._training_config().lr, device=device,
                verbose=self.verbose)
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
        >>> from sklearn_flowr._examples import flowr_example
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
        >>> from sklearn_flowr._examples import flowr_example
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
        On the fitted model a class is learned from one shot:

        >>> from sklearn_flowr._examples import flowr_example
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
        known or a new provisional class (see
        :meth:`CRPGaussianClassifier.open_world_step`); late labels go to
        :meth:`correct`.

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
        >>> from sklearn_flowr._examples import flowr_example
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
        self
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
        >>> from sklearn_flowr._examples import flowr_example
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
        >>> from sklearn_flowr._examples import flowr_example
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
        >>> from sklearn_flowr._examples import flowr_example
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
        takes_features = not isinstance(self.backbone, str) or self.backbone == "mlp"
        return as_model_input(X, allow_features=takes_features,
                              expected_shape=self.input_shape_)

    def _embed(self, X, encoder=None):
        self._place_modules()
        encoder = self.encoder_ if encoder is None else encoder
        batch_size = getattr(self.pretrain, "batch_size", _DEFAULT_BATCH_SIZE)
        Z = embed(encoder, X, batch_size=4 * batch_size).astype(np.float64)
        finite = np.isfinite(Z).all(axis=1)
        if not finite.all():
            # Say so here: the head would report NaN in data that had none.
            raise ValueError(
                f"The encoder gave non-finite embeddings for {int((~finite).sum())} "
                f"of {Z.shape[0]} rows (inputs up to "
                f"{float(np.abs(X).max()):.3g} in magnitude): rescale the inputs "
                "to the range the model was trained on.")
        return Z

    def _place_modules(self):
        """Put every fitted module on the device ``device`` names now.

        The one place a fitted model's modules move: called before any of
        them runs, so ``set_params(device=...)``, unpickling (CPU tensors) and
        copies all run where ``device`` says, with inputs following the
        module (see :func:`~sklearn_flowr.training.embed`).
        """
        device = resolve_device(self.device)
        place_modules(device, self.meta_module_, self.encoder_,
                      self.pretrained_encoder_)
        return device

    def __sklearn_is_fitted__(self):
        return hasattr(self, "head_")

    def __getstate__(self):
        # Tensors as NumPy arrays: CUDA-trained models load on CPU-only
        # machines, and skops.io can store the model (it refuses tensors).
        # Unpickled modules are on the CPU; _place_modules moves them on
        # first use.
        return store_modules(super().__getstate__())

    def __setstate__(self, state):
        super().__setstate__(restore_modules(state))
