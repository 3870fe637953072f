"""The CRP-Gaussian head: FLOWR's Bayesian non-parametric classifier on features."""

from numbers import Real

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._core import needs_moments
from ..base import all_or_nothing, on_a_copy
from ..validation import MAX_ABS_INPUT, check_magnitude, snapshot_params
from ._cross_fit import NO_SCORES, warn_if_too_few_scores
from ._decision import ConformalDecision
from ._discovery import (
    correct,
    mixed_steps,
    nothing_discovered,
    rows_and_digests,
    unlabelled_steps,
)
from ._merge import (
    MergeableHead,
    is_dask_collection,
    kept_moments,
)
from ._proba import _ProbabilisticOpenWorldClassifier
from ._state import (
    check_class_embeddings,
    check_novelty_map,
    state_for_params,
    state_of_embeddings,
)
from ._whitened import (
    RUNTIME_PARAMS,
    calibration_scores,
    fit_whitener,
    input_dtype,
    model_params,
    refuse_whitened,
    whiten,
)

__all__ = ["CRPGaussianClassifier"]


class CRPGaussianClassifier(MergeableHead, ConformalDecision,
                            _ProbabilisticOpenWorldClassifier):
    """Open-world Bayesian classifier: Gaussian class embeddings + CRP prior.

    Class means have a shared prior ``N(mu0, diag(s0))``, observations are
    ``N(mean, sigma I)``, and a Pitman-Yor (two-parameter CRP) prior over
    classes leaves mass for a *novel* class; a new class is learned from one
    labelled sample (an O(d) conjugate update). By default the rows are first
    mapped to the coordinates where PLDA's two-covariance model [2]_ is this
    diagonal one, by a whitener fitted in ``fit``.

    Parameters
    ----------
    a : float, default=0.5
        CRP discount, in [0, 1).
    b : float or "auto", default="auto"
        CRP concentration, ``> -a``; ``"auto"`` maximises the Pitman-Yor
        likelihood of the class sizes seen in ``fit``.
    sigma : float, array-like of shape (n_features, n_features) or "auto", \
default="auto"
        Class-noise variance ``Sigma_eps = sigma * I``, ``> 0`` (a matrix with
        ``covariance="full"``); ``"auto"``: the pooled within-class variance of
        ``fit`` (``"whitened"``: 1, in the whitener's coordinates, as given
        values are). Search it on classes the encoder did not see.
    prior_mean : float, array-like of shape (n_features,) or "auto", \
default="auto"
        ``mu0``; ``"auto"``: the mean of the class means in ``fit`` (whitened: 0).
    prior_var : float, array-like of shape (n_features,) or "auto", \
default="auto"
        ``s0`` (a matrix with ``covariance="full"``); ``"auto"``: the mean
        variance of the class means, floored (whitened: the whitener's
        ``prior_var_``).
    prior_scale : float, default=1.0
        Factor, ``> 0``, on an estimated ``s0``: above 1 when ``fit``'s classes
        are those the embedding was trained on (docs/results.rst).
    covariance : {"whitened", "isotropic", "full"}, default="whitened"
        ``"whitened"``: ``fit`` fits a
        :class:`~sklearn_flowr.head.TwoCovarianceWhitener` (rows to unit
        length, two covariances [2]_) and every method runs the head on its
        output (O(d^2) per row; 2 features or more, no zero row, no Dask);
        ``"isotropic"``: the paper's head [1]_ on the rows as given; ``"full"``:
        a full shared noise and prior covariance on the rows as given, exact,
        at an extra O(d^2) per row. Use "whitened" on a pretrained network's
        features, "full" on :class:`~sklearn_flowr.FLOWRClassifier`'s own.
    noise_shrinkage : "auto", "dof" or float in [0, 1], default="auto"
        Shrinkage of the estimated noise towards isotropic (1) with
        ``covariance="full"`` and ``sigma="auto"``, or the whitener's
        (``"dof"``: its degrees-of-freedom rule); ``"auto"``: ``"dof"`` when
        whitened, 0.0 when full. Choose it on classes the encoder did not see.
    class_prior : {"crp", "uniform"}, default="crp"
        ``"uniform"``: each known class and the novel class get ``1/(N+1)``
        (the paper's ablation).
    known_count : float, "observed" or "auto", default="auto"
        CRP count, ``> a``, of each class learned in ``fit`` (the paper's 0 is
        invalid for ``a > 0``); ``"observed"``: the class sizes (``partial_fit``
        after ``fit`` then equals ``fit`` on all rows); ``"auto"``:
        ``"observed"`` when whitened, else 1.0 (keep it).
    novel_label : object, default="auto"
        Label :meth:`predict` returns for the novel class, not one in ``y``;
        ``"auto"``: ``"novel"`` for string labels, -1 for numeric ones (below
        the smallest label, with a warning, when ``y`` uses -1).
    novelty_calibration : (float, float) or None, default=None
        Platt map ``(slope > 0, intercept)`` of P(novel)'s logit, fitted by
        :func:`~sklearn_flowr.protocol.calibrate_novelty`.
    unlabelled_threshold : float in [0, 1] or None, default=0.9
        An unlabelled row is learned into its MAP class when its posterior is
        at least this (``None``: never); see
        :func:`~sklearn_flowr.protocol.select_discovery_params`.
    novelty_alpha : float in (0, 1) or None, default=0.05
        :meth:`predict` says novel where the conformal p-value of P(novel) is
        at most this, the share of known-class rows called novel (``None``, or
        fewer than ``1 / novelty_alpha - 1`` calibration scores: the argmax
        over the classes and the novel class).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Known labels: sorted in ``fit``, then appended in order of arrival.
    class_count_ : ndarray of shape (n_classes,)
        Number of samples each class was conditioned on.
    conformal_scores_ : ndarray of shape (n_calibration,)
        Sorted novel log-odds of held-out known-class rows: ``fit``'s, each
        under the head and whitener fitted without its fold (of five; the
        first folds until 150 rows are scored), then each later labelled row
        of a class known before it, under the head just before it (the same
        however the rows are split into calls).
    crp_count_ : ndarray of shape (n_classes,)
        Counts ``c_n`` of the CRP prior.
    frozen_classes_ : ndarray of bool of shape (n_classes,)
        Classes later labels leave fixed (:meth:`freeze_classes`).
    class_mean_ : ndarray of shape (n_classes, n_features)
        Posterior means ``m_n = q_n / lam_n``.
    class_var_ : ndarray of shape (n_classes, n_features)
        Posterior variances ``1 / lam_n`` (diagonals when full).
    prior_mean_ : ndarray of shape (n_features,)
        ``mu0``.
    prior_var_ : ndarray of shape (1,), (n_features,) or \
(n_features, n_features)
        ``s0``.
    sigma_ : float or ndarray of shape (n_features, n_features)
        Class-noise variance in use.
    b_ : float
        Concentration in use.
    whitener_ : TwoCovarianceWhitener
        ``covariance="whitened"``: fitted in ``fit``, then frozen; the five
        attributes above are in its coordinates. An unfitted head holding one
        (and numeric ``b``, ``sigma`` and priors) starts streams from it.
    novel_label_ : object
        Label of the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (string column names only).

    See Also
    --------
    sklearn.naive_bayes.GaussianNB : closed-world Gaussian classifier.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.
    .. [2] S. Ioffe, "Probabilistic Linear Discriminant Analysis", ECCV, 2006.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.base import clone
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> y = np.repeat([0, 1, 2, 3, 4, 5], 4)
    >>> Z = np.random.default_rng(0).normal(size=(6, 8))[y]
    >>> Z += 0.1 * np.random.default_rng(1).normal(size=(24, 8))
    >>> CRPGaussianClassifier().fit(Z[:12], y[:12]).predict(Z[[0, 12]])  # whitened
    array([ 0, -1])

    The paper's head, on the rows as given (``[0, 0]`` has no direction):

    >>> X = [[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.2]]
    >>> clf = CRPGaussianClassifier(covariance="isotropic").fit(X, [0, 0, 1, 1])
    >>> clf.predict([[0.1, 0.0], [-6.0, 7.0]])
    array([ 0, -1])
    >>> clf.predict_proba([[0.1, 0.0]]).round(3)  # classes 0, 1, then novel
    array([[0.997, 0.   , 0.003]])
    >>> clf.predict_log_proba([[0.1, 0.0]]).shape  # log p(n|x); joint: log p(x, n)
    (1, 3)
    >>> clf.predict_joint_log_proba([[0.1, 0.0]]).shape
    (1, 3)
    >>> round(clf.sigma_, 6), clf.prior_mean_  # "auto": estimated in fit
    (0.01, array([2.05, 2.05]))

    A stream: each row is predicted, then learned; class 2 is novel at first
    sight. Unlabelled rows open provisional classes, relabelled by ``correct``.

    >>> clf.open_world_step([[-6.0, 7.0], [-6.1, 7.0], [0.1, 0.1]], [2, 2, 0]).y_pred
    array([-1,  2,  0])
    >>> out = clf.open_world_step([[9.0, -9.0], [9.1, -9.0]])
    >>> out.y_assigned, out.learned
    (array([-2, -2]), array([ True,  True]))
    >>> clf.correct([[9.0, -9.0], [9.1, -9.0]], out.y_assigned, [7, 7]).classes_
    array([0, 1, 2, 7])
    >>> clf.freeze_classes().frozen_classes_
    array([ True,  True,  True,  True])
    >>> round(clf.forget_classes().sigma, 6)  # no classes: a new task's start
    0.01

    Heads fitted on parts of the rows merge into the head fitted on all;
    ``fit_class_embeddings`` starts from classes given as Gaussians.

    >>> left = CRPGaussianClassifier(covariance="isotropic").fit(X, [0, 0, 1, 1])
    >>> right = clone(left).fit([[9, 0], [9.2, 0], [0, 9], [0, 9.2]], [5, 5, 6, 6])
    >>> left.merge(right).classes_
    array([0, 1, 5, 6])
    >>> emb = CRPGaussianClassifier(covariance="isotropic", b=1.0, sigma=0.5)
    >>> emb = emb.fit_class_embeddings(["a", "b"], [[0, 0], [3, 3]], [0.1, 0.1])
    >>> emb.predict([[2.9, 3.1], [-5.0, 5.0]])
    array(['b', 'novel'], dtype=object)
    """

    _positive = Interval(Real, 0, None, closed="neither")
    # Means within the input range, variances within its squares: beyond,
    # the probabilities become NaN in float64.
    _mean = Interval(Real, -MAX_ABS_INPUT, MAX_ABS_INPUT, closed="both")
    _variance = Interval(Real, 1.0 / MAX_ABS_INPUT**2, MAX_ABS_INPUT**2,
                         closed="both")
    _parameter_constraints: dict = {
        "a": [Interval(Real, 0, 1, closed="left")],
        "b": [StrOptions({"auto"}), Real],
        "sigma": [StrOptions({"auto"}), _variance, "array-like"],
        "prior_mean": [StrOptions({"auto"}), _mean, "array-like"],
        "prior_var": [StrOptions({"auto"}), _variance, "array-like"],
        "prior_scale": [_positive],
        "covariance": [StrOptions({"whitened", "isotropic", "full"})],
        "noise_shrinkage": [StrOptions({"auto", "dof"}),
                            Interval(Real, 0, 1, closed="both")],
        "class_prior": [StrOptions({"crp", "uniform"})],
        "known_count": [StrOptions({"observed", "auto"}), _positive],
        "novel_label": "no_validation",
        "novelty_calibration": [None, "array-like"],
        "unlabelled_threshold": [None, Interval(Real, 0, 1, closed="both")],
        "novelty_alpha": [None, Interval(Real, 0, 1, closed="neither")],
    }
    _runtime_params = RUNTIME_PARAMS
    _scale_free = property(lambda self: self.covariance == "whitened")  # unit rows
    # Changed in place: the unlabelled and mixed steps and correct copy them.
    _mutable = ("_state", "_registry", "_discovered")
    _discovered = nothing_discovered()  # heads saved before the record existed

    def __init__(self, *, a=0.5, b="auto", sigma="auto", prior_mean="auto",
                 prior_var="auto", prior_scale=1.0, covariance="whitened",
                 noise_shrinkage="auto", class_prior="crp", known_count="auto",
                 novel_label="auto", novelty_calibration=None,
                 unlabelled_threshold=0.9, novelty_alpha=0.05):
        self.a = a
        self.b = b
        self.sigma = sigma
        self.prior_mean = prior_mean
        self.prior_var = prior_var
        self.prior_scale = prior_scale
        self.covariance = covariance
        self.noise_shrinkage = noise_shrinkage
        self.class_prior = class_prior
        self.known_count = known_count
        self.novel_label = novel_label
        self.novelty_calibration = novelty_calibration
        self.unlabelled_threshold = unlabelled_threshold
        self.novelty_alpha = novelty_alpha

    def fit(self, X, y):
        """Learn the prior and sigma (when "auto") and the classes, forgetting
        any earlier state.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Training embeddings; a Dask array is summarised chunk by chunk.
        y : array-like or dask.array.Array of shape (n_samples,)
            Class labels (none equal to ``novel_label``).

        Returns
        -------
        self : CRPGaussianClassifier
        """
        if is_dask_collection(X) or is_dask_collection(y):
            return self._fit_dask(X, y)
        with all_or_nothing(self):  # a new whitener
            self.__dict__.pop("whitener_", None)
            super().fit(X, y)
            warn_if_too_few_scores(self, int(self.class_count_.sum()))
        return self

    def fit_class_embeddings(self, classes, means, variances, *, frozen=True):
        """Start from known classes given as Gaussian embeddings ``N(mu_n,
        s_n)``, forgetting earlier state (isotropic heads with numeric ``b``,
        ``sigma`` and ``known_count``).

        Parameters
        ----------
        classes : array-like of shape (n_classes,)
            Distinct labels.
        means : array-like of shape (n_classes, n_features)
            Class means ``mu_n``.
        variances : array-like of shape (n_classes,) or (n_classes, 1)
            Isotropic class variances ``s_n`` (positive).
        frozen : bool, default=True
            Keep these classes fixed online, as the paper does.

        Returns
        -------
        self : CRPGaussianClassifier
        """
        self._validate_params()
        refuse_whitened(self, "class embeddings without rows")
        params = model_params(self)
        with all_or_nothing(self):
            means = validate_data(self, means, dtype=np.float64, reset=True)
            check_magnitude(means, units=True)
            classes, variances = check_class_embeddings(
                classes, means, variances, covariance=self.covariance,
                known_count=params["known_count"], b=self.b, sigma=self.sigma)
            labels, y_index = self._check_labels(classes, None)
            self._start_labels(labels)
            self._take_state(*state_of_embeddings(
                means, variances, y_index, params, frozen))
            self._registry.add(labels)
        return self

    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each row with the state before it, then learn from it.

        With labels: ``predict`` then ``partial_fit`` row by row (an unfitted
        head needs the prior and ``sigma`` given). Without: each row goes to
        its MAP class, known or a new provisional one (``-2, -3, ...`` or
        ``"new-1", ...``), learned when that posterior is at least
        ``unlabelled_threshold``; late labels go to :meth:`correct`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,) or None, default=None
            True labels, revealed after each prediction; None: no labels.
        labelled : array-like of bool, shape (n_samples,), or None, default=None
            Rows learned under their ``y`` entry; the others are unlabelled.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred`` (:meth:`predict`; the MAP
            class for unlabelled rows), ``y_known``, ``p_novel``, ``is_novel``
            (unseen label, or the new class won), ``novelty_score`` (P(novel)'s
            log-odds), ``y_assigned`` (the class learned under), ``learned``.
        """
        if labelled is None and y is not None:
            return super().open_world_step(X, y)
        novelty_map = check_novelty_map(self.novelty_calibration)
        if labelled is not None:
            return on_a_copy(self, lambda work: mixed_steps(
                work, X, y, labelled, threshold=self.unlabelled_threshold,
                novelty_map=novelty_map), self._mutable)
        check_is_fitted(self, msg=(
            "open_world_step(X) without labels needs a fitted %(name)s: "
            "fit or partial_fit it on labelled rows first."))
        X, digests = rows_and_digests(self, X)
        return on_a_copy(self, lambda work: unlabelled_steps(
            work, X, digests, threshold=self.unlabelled_threshold,
            novelty_map=novelty_map), self._mutable)

    def correct(self, X, y_assigned, y_true):
        """Move rows learned without labels to their true class, as if they
        had been learned with their labels (a provisional class takes its
        first true label or, left empty, disappears).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows, as passed to ``open_world_step``.
        y_assigned : array-like of shape (n_samples,)
            The ``y_assigned`` that ``open_world_step`` returned for them.
        y_true : array-like of shape (n_samples,)
            Their true labels.

        Returns
        -------
        self : CRPGaussianClassifier
        """
        X, digests = rows_and_digests(self, X)
        on_a_copy(self, lambda work: correct(work, X, digests, y_assigned, y_true),
                  self._mutable)
        return self

    def _check_stream_start(self):
        if needs_moments(model_params(self)):
            raise NotFittedError(
                "open_world_step on an unfitted CRPGaussianClassifier needs the "
                "prior: call fit/partial_fit first or give prior_mean, prior_var, "
                "b and sigma (not 'auto').")

    def _validate_input(self, X, y=None, *, reset=False, fitting=False):
        X, y = super()._validate_input(X, y, reset=reset, dtype=input_dtype(self))
        if (reset and self.covariance == "whitened"
                and "whitener_" not in vars(self)):
            # fit's: and its refit without a fold of the rows, to calibrate.
            self.whitener_, X, refit = fit_whitener(self, X, y, refit=fitting)
            if fitting:
                self._refit = refit
            return X, y
        return whiten(self, X, y)

    def _start(self, X, y_index, labels, *, fitting):
        params = model_params(self)
        # fit's calibration first, so that its fold states are freed before
        # the state is built (the whitened head's refits its whitener too).
        refit = self.__dict__.pop("_refit", None)  # freed either way
        scores = NO_SCORES
        if fitting:
            scores = (calibration_scores(self, refit, y_index) if refit
                      else self._calibrate_fit(X, y_index))
        self._take_state(*state_for_params(X, y_index, labels.shape[0], params))
        self._conformal = scores
        # What merge re-estimates "auto" hyper-parameters from.
        self._fit_moments = kept_moments(params, X, y_index, labels.shape[0])

    def _learn(self, X, index):
        self._state.learn(X, index, len(self._registry))

    def _checkpoint(self, index):
        return self._state.checkpoint(index)

    def _end_fit(self, X, index):
        known_count = model_params(self)["known_count"]
        if known_count != "observed":
            self._state.set_crp_counts(float(known_count))

    def _stream(self, X, index, is_new):
        novelty_map = check_novelty_map(self.novelty_calibration)
        return self._decide_stream(self._state.stream(X, index, is_new, novelty_map),
                                   is_new, novelty_map)

    def _take_state(self, state, hyper, b):
        """A fresh state and the prior and hyper-parameters it fixes."""
        self._state, self._discovered = state, nothing_discovered()
        self._conformal = NO_SCORES
        self.prior_mean_, self.prior_var_ = hyper.prior_mean, hyper.prior_var
        self.b_, self.sigma_ = b, hyper.sigma
        self._fitted_params = snapshot_params(self)

    def _joint_log_numerators(self, X):
        X = self._validated_rows(X)
        return self._state.joint_log_numerators(
            X, check_novelty_map(self.novelty_calibration))

    def freeze_classes(self, frozen=True):
        """Keep the classes known so far fixed online (they still predict), or
        release them.

        Parameters
        ----------
        frozen : bool, default=True
            ``False`` lets labels update the known classes again.

        Returns
        -------
        self : CRPGaussianClassifier
        """
        self._fitted("freeze_classes")._state.freeze(bool(frozen))
        return self

    def forget_classes(self):
        """Drop every class, keeping ``fit``'s prior, ``b``, ``sigma`` (as given
        values) and whitener: the head a new task starts from.

        Returns
        -------
        self : CRPGaussianClassifier
        """
        self._fitted("forget_classes")
        params = {**self.get_params(deep=False), "prior_mean": self.prior_mean_,
                  "prior_var": self.prior_var_, "b": self.b_, "sigma": self.sigma_,
                  "prior_scale": 1.0}
        whitener = {key: val for key, val in vars(self).items() if key == "whitener_"}
        # A clone's state, its parameters (and whitener), swapped in at once.
        self.__dict__ = {**params, **whitener}
        return self

    class_count_ = property(lambda self: self._fitted("class_count_")
                            ._state.class_count())
    crp_count_ = property(lambda self: self._fitted("crp_count_")._state.crp_counts())
    frozen_classes_ = property(lambda self: self._fitted("frozen_classes_")
                               ._state.frozen[: self._state.n_classes].copy())
    class_mean_ = property(lambda self: self._fitted("class_mean_")
                           ._state.class_mean())
    class_var_ = property(lambda self: self._fitted("class_var_")._state.class_var())
