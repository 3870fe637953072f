"""The CRP-Gaussian head: FLOWR's Bayesian non-parametric classifier on features."""

from numbers import Real

import numpy as np
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._core._covariance import scale_prior_var
from ..base import (
    all_or_nothing,
    check_new_labels,
    resolve_novel_label,
)
from ..validation import (
    MAX_ABS_INPUT,
    check_magnitude,
    snapshot_params,
)
from ._discovery import NOTHING_DISCOVERED, corrected, mixed_steps, unlabelled_steps
from ._merge import (
    check_mergeable,
    dask_moments,
    is_dask_collection,
    kept_moments,
    moments_of_head,
    state_of_moments,
)
from ._moments import combine_moments, needs_fourth_moments, needs_scatter
from ._proba import ProbabilisticOpenWorldClassifier
from ._state import check_class_embeddings, check_novelty_map, new_state

__all__ = ["CRPGaussianClassifier"]


class CRPGaussianClassifier(ProbabilisticOpenWorldClassifier):
    """Open-world Bayesian classifier: Gaussian class embeddings + CRP prior.

    Every class ``n`` has a Gaussian mean with a shared prior
    ``N(mu0, diag(s0))``; observations of the class are ``N(mean, sigma I)``.
    A two-parameter Chinese-restaurant-process (Pitman-Yor) prior over classes
    leaves mass for a class never seen, so the classifier returns, next to the
    probabilities of the known classes, the probability that a sample belongs
    to a *novel* class, and learns a new class from a single labelled sample
    (an O(d) conjugate update, no refitting).

    Parameters
    ----------
    a : float, default=0.5
        CRP discount, in [0, 1).
    b : float or "auto", default="auto"
        CRP concentration, ``> -a``. ``"auto"`` maximises the Pitman-Yor
        likelihood of the class sizes seen in ``fit``.
    sigma : float, array-like of shape (n_features, n_features) or "auto", \
default="auto"
        Class-noise variance ``Sigma_eps = sigma * I``, ``> 0``. ``"auto"``
        takes the pooled within-class variance of ``fit`` (it needs a class
        with two samples); with ``covariance="full"`` the full, Ledoit-Wolf
        shrunk covariance, and a matrix is used as given. The paper fixes 0.5
        on embeddings meta-learned to that scale; search it on classes the
        encoder did not see.
    prior_mean : float, array-like of shape (n_features,) or "auto", \
default="auto"
        ``mu0``; ``"auto"`` takes the mean of the class means in ``fit``.
    prior_var : float, array-like of shape (n_features,) or "auto", \
default="auto"
        ``s0`` (a variance); ``"auto"`` takes the mean variance of the class
        means (floored; with ``covariance="full"`` their shrunk covariance).
        ``covariance="full"`` also takes a matrix.
    prior_scale : float, default=1.0
        Factor, ``> 0``, on the estimated ``s0`` (``prior_var="auto"``
        only): new classes spread ``prior_scale`` times as far around ``mu0``
        as ``fit``'s. Above 1 when ``fit``'s classes are those an embedding
        was trained on (docs/results.rst).
    covariance : {"isotropic", "full"}, default="isotropic"
        ``"full"``: a full shared class noise and prior covariance (PLDA's
        two-covariance model [2]_ under the CRP prior), exact and conjugate,
        at an extra O(d^2) per row. Not in the paper.
    noise_shrinkage : float in [0, 1], default=0.0
        With ``covariance="full"`` and ``sigma="auto"``: shrink the estimated
        noise covariance towards its mean eigenvalue times ``I`` (0: the
        Ledoit-Wolf estimate; 1: isotropic). Choose it on classes the encoder
        did not see (docs/user_guide.rst). Not in the paper.
    class_prior : {"crp", "uniform"}, default="crp"
        ``"uniform"`` gives each known class and the novel class mass
        ``1/(N+1)`` (the paper's ablation).
    known_count : float or "observed", default=1.0
        CRP count, ``> a``, given to each class learned in ``fit`` (the
        paper's 0 is invalid for ``a > 0``); ``"observed"`` uses the class
        sizes. Online labels add 1 per row.
    novel_label : object, default="auto"
        Label :meth:`predict` returns for the novel class. ``"auto"``:
        ``"novel"`` for string labels, -1 for numeric ones (or one less than
        the smallest label when labels reach -1). It may not occur in ``y``.
    novelty_calibration : (float, float) or None, default=None
        Platt map ``logit p' = slope * logit p + intercept`` of P(novel)
        (``slope > 0``; the order of P(novel) is kept), fitted by
        :func:`~sklearn_flowr.protocol.calibrate_novelty`, read at call time.
    unlabelled_threshold : float in [0, 1] or None, default=0.9
        An unlabelled row (``open_world_step(X)``) is learned into its MAP
        class -- known, or a new provisional one -- when that assignment's
        posterior is at least this; ``None`` never learns from unlabelled
        rows. Higher is safer and slower to discover;
        :func:`~sklearn_flowr.protocol.select_discovery_params` chooses it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Known class labels: sorted in ``fit``; online calls append new ones
        in order of arrival.
    class_count_ : ndarray of shape (n_classes,)
        Number of samples each class was conditioned on.
    crp_count_ : ndarray of shape (n_classes,)
        Counts ``c_n`` of the CRP prior.
    frozen_classes_ : ndarray of bool of shape (n_classes,)
        Which classes later labels leave fixed (:meth:`freeze_classes`).
    class_mean_ : ndarray of shape (n_classes, n_features)
        Posterior mean ``m_n = q_n / lam_n`` of each class embedding.
    class_var_ : ndarray of shape (n_classes, n_features)
        Posterior variance ``1 / lam_n`` of each class embedding (its
        diagonal with ``covariance="full"``).
    prior_mean_ : ndarray of shape (n_features,)
        ``mu0``.
    prior_var_ : ndarray of shape (1,), (n_features,) or \
(n_features, n_features)
        ``s0``; one entry when isotropic, a matrix with ``covariance="full"``.
    sigma_ : float or ndarray of shape (n_features, n_features)
        Class-noise variance in use (the estimate when "auto").
    b_ : float
        Concentration in use.
    novel_label_ : object
        Label used for the novel class.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (only when ``X`` has string
        column names).

    See Also
    --------
    sklearn.naive_bayes.GaussianNB : closed-world Gaussian classifier.

    Notes
    -----
    Two deliberate corrections of the seed paper: the novel-class mass is the
    Pitman-Yor ``(b + a N) / (k + b)`` (the paper prints ``(a + b N)/(k + b)``,
    which does not normalise), and classes learned in ``fit`` get the
    pseudo-count ``known_count`` rather than 0.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.
    .. [2] S. Ioffe, "Probabilistic Linear Discriminant Analysis", ECCV, 2006.

    Examples
    --------
    >>> from sklearn_flowr import CRPGaussianClassifier
    >>> X = [[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.2]]
    >>> clf = CRPGaussianClassifier().fit(X, [0, 0, 1, 1])
    >>> clf.predict([[0.1, 0.0], [-6.0, 7.0]])
    array([ 0, -1])
    >>> clf.predict_proba([[0.1, 0.0]]).shape  # two known classes + novel
    (1, 3)
    >>> round(clf.sigma_, 6)  # "auto": pooled within-class variance
    0.01
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
        "covariance": [StrOptions({"isotropic", "full"})],
        "noise_shrinkage": [Interval(Real, 0, 1, closed="both")],
        "class_prior": [StrOptions({"crp", "uniform"})],
        "known_count": [StrOptions({"observed"}), _positive],
        "novel_label": "no_validation",
        "novelty_calibration": [None, "array-like"],
        "unlabelled_threshold": [None, Interval(Real, 0, 1, closed="both")],
    }
    _runtime_params = ("novelty_calibration", "unlabelled_threshold")
    # What the unlabelled stream opened and learned (``_discovery``).
    _discovered = NOTHING_DISCOVERED

    def __init__(self, *, a=0.5, b="auto", sigma="auto", prior_mean="auto",
                 prior_var="auto", prior_scale=1.0, covariance="isotropic",
                 noise_shrinkage=0.0, class_prior="crp", known_count=1.0,
                 novel_label="auto", novelty_calibration=None,
                 unlabelled_threshold=0.9):
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

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Learn the prior and sigma (when "auto") and the class statistics.

        Any state from earlier ``partial_fit`` or ``open_world_step`` calls is
        forgotten.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)
            Training embeddings. A Dask array is summarised chunk by chunk on
            Dask's active scheduler, then the summaries are merged as
            :meth:`merge` does: the head ``fit`` gives in memory, to float64
            rounding.
        y : array-like or dask.array.Array of shape (n_samples,)
            Class labels (none equal to ``novel_label``).

        Returns
        -------
        self : CRPGaussianClassifier
            The fitted head.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> X = [[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.2]]
        >>> clf = CRPGaussianClassifier().fit(X, [0, 0, 1, 1])
        >>> clf.prior_mean_  # "auto": the mean of the class means
        array([2.05, 2.05])
        """
        if is_dask_collection(X) or is_dask_collection(y):
            self._validate_params()
            moments, n_features = dask_moments(
                X, y, fourth=needs_fourth_moments(self.covariance, self.sigma))
            labels = moments["labels"]
            check_new_labels(labels, resolve_novel_label(self.novel_label, labels))
            return self._install(moments, n_features=n_features)
        return super().fit(X, y)

    def partial_fit(self, X, y, classes=None):
        """Condition on labelled samples; unseen labels instantiate classes.

        On an unfitted head the prior must be given (``prior_mean``,
        ``prior_var``, ``b``) or estimable from this batch (two or more
        classes), and so must ``sigma`` (a class with two or more samples).
        Once fitted, ``sigma_`` stays fixed, so later batches in any chunking
        give the same state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.
        y : array-like of shape (n_samples,)
            Labels; new ones create classes in order of first appearance.
        classes : array-like of shape (n_classes,), default=None
            Accepted for scikit-learn's incremental learners; when given, it
            must hold every label of ``y``.

        Returns
        -------
        self : CRPGaussianClassifier
            The updated head.

        Examples
        --------
        With the prior and the noise given, one sample is enough to start:

        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier(prior_mean=0.0, prior_var=10.0, b=1.0,
        ...                             sigma=0.5)
        >>> clf = clf.partial_fit([[0.0, 0.0]], ["cat"])
        >>> clf = clf.partial_fit([[5.0, 5.0], [0.1, 0.0]], ["dog", "cat"])
        >>> clf.classes_, clf.class_count_
        (array(['cat', 'dog'], dtype=object), array([2., 1.]))
        >>> clf.predict([[4.8, 5.1], [-9.0, 9.0]])
        array(['dog', 'novel'], dtype=object)
        """
        return super().partial_fit(X, y, classes=classes)

    def fit_class_embeddings(self, classes, means, variances, *, frozen=True):
        """Start from known classes given as Gaussian embeddings.

        The large context's known-known classes from (Sup-E) training: class
        ``n`` gets ``q_n = mu_n / s_n``, ``lam_n = 1 / s_n`` and the CRP count
        ``known_count``. Like :meth:`fit`, it forgets any earlier state. With
        no samples to estimate from, ``b`` and ``sigma`` must be floats and
        ``known_count`` numeric (``prior_mean`` and ``prior_var`` may stay
        "auto": they come from the spread of ``means``); ``covariance`` must
        be "isotropic".

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
            The head, with ``classes_`` equal to ``classes``.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier(b=1.0, sigma=0.5).fit_class_embeddings(
        ...     ["a", "b"], [[0.0, 0.0], [3.0, 3.0]], [0.1, 0.1])
        >>> clf.class_mean_, clf.crp_count_
        (array([[0., 0.], [3., 3.]]), array([1., 1.]))
        >>> clf.predict([[2.9, 3.1], [0.0, 0.2], [-5.0, 5.0]])
        array(['b', 'a', 'novel'], dtype=object)
        """
        self._validate_params()
        with all_or_nothing(self):
            means = validate_data(self, means, dtype=np.float64, reset=True)
            check_magnitude(means)
            classes, variances = check_class_embeddings(
                classes, means, variances, covariance=self.covariance,
                known_count=self.known_count, b=self.b, sigma=self.sigma)
            labels, y_index = self._check_labels(classes, None)
            self._start_labels(labels)
            # The empirical-Bayes prior of class means applies as in fit.
            self._state = self._new_state(means, y_index, labels)
            self._registry.add(labels)
            order = np.argsort(y_index)  # classes_ follow ``classes``' sorted order
            self._state.add_classes(
                labels.shape[0], nat_mean=means[order] / variances[order],
                precision=1.0 / variances[order], crp_count=float(self.known_count),
                frozen=frozen)
        return self

    def merge(self, other):
        """The head that ``fit`` on the rows of both heads gives.

        Fit a head per partition of the data, then merge: class statistics
        (sizes, means, scatter) combine exactly, so embeddings never need to
        meet on one machine. Neither head changes.

        Parameters
        ----------
        other : CRPGaussianClassifier
            A fitted head with the same parameters and features.

        Returns
        -------
        merged : CRPGaussianClassifier
            A new fitted head: ``classes_`` are the union, sorted as ``fit``
            sorts them; a class in both pools its rows.

        Raises
        ------
        ValueError
            The heads differ in a parameter or their features, or the
            statistics a re-estimate needs are gone (see Notes).

        Notes
        -----
        Given ``sigma``, ``prior_mean`` and ``prior_var`` are kept and merging
        adds the class sums the natural parameters hold: exact, rows learned
        online included. "auto" ones (and ``b="auto"``) are estimated again
        from the statistics ``fit`` kept, which online rows do not update:
        such a head merges only straight after ``fit``. As after ``fit``,
        ``crp_count_`` is ``known_count``; a class frozen in either head
        stays frozen; classes from :meth:`fit_class_embeddings` are refused.
        Calibrate ``novelty_calibration`` again on the merged head.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.normal(size=(40, 3)), np.repeat([0, 1, 2, 3], 10)
        >>> left = CRPGaussianClassifier().fit(X[:25], y[:25])
        >>> right = CRPGaussianClassifier().fit(X[25:], y[25:])
        >>> merged, whole = left.merge(right), CRPGaussianClassifier().fit(X, y)
        >>> merged.classes_, merged.class_count_
        (array([0, 1, 2, 3]), array([10., 10., 10., 10.]))
        >>> bool(np.allclose(merged.predict_proba(X), whole.predict_proba(X),
        ...                  rtol=1e-10, atol=1e-12))
        True
        """
        names = check_mergeable(self, other)
        moments = combine_moments(moments_of_head(self, "self"),
                                  moments_of_head(other, "other"))
        labels = moments["labels"]
        # An "auto" novel label is resolved from the union, as fit resolves it.
        check_new_labels(labels, resolve_novel_label(self.novel_label, labels))
        # A class frozen in either head stays frozen.
        frozen = np.concatenate([self.classes_[self.frozen_classes_],
                                 other.classes_[other.frozen_classes_]])
        return clone(self)._install(
            moments, n_features=self.n_features_in_,
            feature_names=None if names is None else names.copy(),
            frozen=np.isin(labels, frozen))

    def _install(self, moments, *, n_features, feature_names=None, frozen=None):
        """Become the head ``fit`` gives on rows with these ``moments``."""
        self._validate_params()
        labels = moments["labels"]
        with all_or_nothing(self):
            state, hyper, b = state_of_moments(
                moments, self.get_params(deep=False), n_features, frozen=frozen)
            self.n_features_in_ = n_features
            self.__dict__.pop("feature_names_in_", None)
            if feature_names is not None:
                self.feature_names_in_ = feature_names
            self._start_labels(labels)
            self._registry.add(labels)
            self._state, self._discovered = state, NOTHING_DISCOVERED
            self.prior_mean_, self.prior_var_ = hyper.prior_mean, hyper.prior_var
            self.sigma_, self.b_ = hyper.sigma, b
            self._fitted_params = snapshot_params(self)
            self._fit_moments = (
                {key: value for key, value in moments.items() if key != "labels"}
                if needs_scatter(self.sigma, self.prior_mean, self.prior_var)
                else None)
        return self

    # ---------------------------------------------------------------- streams
    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each row with the state before it, then learn from it.

        With labels, the paper's online loop, vectorised with prefix sums: it
        equals ``predict_proba`` then ``partial_fit`` row by row. An unfitted
        head needs ``prior_mean``, ``prior_var``, ``b`` and ``sigma`` given.
        Without labels (``y=None``), each row in stream order is assigned to
        its MAP class by the CRP posterior -- a known class or a new
        provisional class with a generated label (``-2, -3, ...`` for numeric
        labels, ``"new-1", "new-2", ...`` for strings), which then joins
        ``classes_`` -- and learned when that assignment's probability is at
        least ``unlabelled_threshold`` (and its class is not frozen). Late
        labels go to :meth:`correct`. All or nothing: an exception leaves the
        head as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,) or None, default=None
            True labels, revealed after each prediction; None: no labels.
        labelled : array-like of bool, shape (n_samples,), or None, default=None
            Rows where it is True are learned under their ``y`` entry, the
            others are unlabelled (their ``y`` entries are ignored). Needs
            ``y``.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred`` (the MAP decision),
            ``y_known`` (best known class), ``p_novel``, ``is_novel`` (the
            label was unseen then; unlabelled: the MAP class was the new
            one), ``novelty_score`` (P(novel)'s log-odds), ``y_assigned``
            (the class the row was learned under: its label, or its MAP class
            or new provisional label; the novel label for a new-class row not
            learned) and ``learned``.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> X = [[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.2]]
        >>> clf = CRPGaussianClassifier().fit(X, [0, 0, 1, 1])
        >>> out = clf.open_world_step([[-6.0, 7.0], [-6.1, 7.0], [0.1, 0.1]],
        ...                           [2, 2, 0])
        >>> out.y_pred  # class 2 is novel at first sight, then recognised
        array([-1,  2,  0])
        >>> clf.open_world_step([[9.0, -9.0], [9.1, -9.0]]).y_assigned
        array([-2, -2])
        """
        if labelled is None and y is not None:
            return super().open_world_step(X, y)
        if labelled is not None:
            return mixed_steps(self, X, y, labelled)
        check_is_fitted(self, msg=(
            "open_world_step(X) without labels needs a fitted %(name)s: "
            "fit or partial_fit it on labelled rows first."))
        with all_or_nothing(self) as undo:
            result, self._discovered = unlabelled_steps(
                self._state, self._registry, self._discovered,
                self._validated_rows(X), undo, novel_label=self.novel_label_,
                threshold=self.unlabelled_threshold,
                novelty_map=check_novelty_map(self.novelty_calibration))
        return result

    def correct(self, X, y_assigned, y_true):
        """Move rows learned without labels from their assigned class to
        their true one.

        A provisional class takes the true label when its first label arrives
        (when that label is not a class yet); a row whose true class exists
        moves into it, so two provisional classes of one true class merge as
        their rows are corrected; a provisional class left without rows
        disappears. Once every row learned without a label is corrected, the
        head equals (to float64 rounding) the head that learned the same rows
        with their true labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows, as passed to ``open_world_step``.
        y_assigned : array-like of shape (n_samples,)
            The ``y_assigned`` that ``open_world_step`` returned for them (a
            provisional label renamed since is followed to its new name).
        y_true : array-like of shape (n_samples,)
            Their true labels.

        Returns
        -------
        self : CRPGaussianClassifier

        Raises
        ------
        ValueError
            Lengths differ, a label was never assigned, or more rows are
            corrected out of a class than were learned into it without a
            label; before any change.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> head = CRPGaussianClassifier().fit([[0.0], [0.3], [9.0], [9.2]],
        ...                                    [0, 0, 1, 1])
        >>> out = head.open_world_step([[30.0], [30.2]])
        >>> out.y_assigned, out.learned
        (array([-2, -2]), array([ True,  True]))
        >>> head = head.correct([[30.0], [30.2]], out.y_assigned, [7, 7])
        >>> head.classes_
        array([0, 1, 7])
        """
        X = self._validated_rows(X)
        self._state, self._registry, self._discovered = corrected(
            self._state, self._registry, self._discovered, X,
            column_or_1d(np.asarray(y_assigned, dtype=object)).tolist(),
            column_or_1d(np.asarray(y_true)).tolist(), self.novel_label_)
        return self

    # ------------------------------------------------------------------ hooks
    def _check_stream_start(self):
        if any(isinstance(value, str) and value == "auto" for value
               in (self.prior_mean, self.prior_var, self.b, self.sigma)):
            raise NotFittedError(
                "open_world_step on an unfitted CRPGaussianClassifier needs the "
                "prior: call fit/partial_fit first or give prior_mean, prior_var, "
                "b and sigma (not 'auto').")

    def _start(self, X, y_index, labels, *, fitting):
        self._state = self._new_state(X, y_index, labels)
        self._discovered = NOTHING_DISCOVERED
        # What merge re-estimates "auto" hyper-parameters from.
        self._fit_moments = kept_moments(self.get_params(deep=False), X, y_index,
                                         labels.shape[0])

    def _learn(self, X, index):
        self._state.learn(X, index, len(self._registry))

    def _checkpoint(self, index):
        return self._state.checkpoint(index)

    def _end_fit(self):
        if self.known_count != "observed":
            self._state.set_crp_counts(float(self.known_count))

    def _stream(self, X, index, is_new):
        return self._state.stream(X, index, is_new,
                                  check_novelty_map(self.novelty_calibration))

    def _new_state(self, X, y_index, labels):
        """Fix the prior and the hyper-parameters for a fresh state."""
        # prior_scale: the estimated s0, scaled, goes on as a given prior_var.
        prior_var = scale_prior_var(
            X, y_index, labels.shape[0], covariance=self.covariance,
            prior_var=self.prior_var, prior_scale=float(self.prior_scale))
        state, hyper, b = new_state(
            X, y_index, labels.shape[0], a=float(self.a), b=self.b, sigma=self.sigma,
            prior_mean=self.prior_mean, prior_var=prior_var,
            covariance=self.covariance, class_prior=self.class_prior,
            known_count=self.known_count, noise_shrinkage=float(self.noise_shrinkage))
        self.prior_mean_, self.prior_var_ = hyper.prior_mean, hyper.prior_var
        self.b_, self.sigma_ = b, hyper.sigma
        self._fitted_params = snapshot_params(self)
        return state

    # --------------------------------------------------------------- prediction
    def _joint_log_numerators(self, X):
        X = self._validated_rows(X)
        return self._state.joint_log_numerators(
            X, check_novelty_map(self.novelty_calibration))

    def _log_normaliser(self):
        return self._state.log_normaliser()

    def _novel_column(self):
        return self._state.n_classes

    def freeze_classes(self, frozen=True):
        """Keep the classes known so far fixed online, or release them.

        A frozen class still predicts; its later labels no longer move its
        embedding or its CRP count (the paper's large context keeps the
        training classes so). Classes that arrive later learn as usual.

        Parameters
        ----------
        frozen : bool, default=True
            ``False`` lets labels update the known classes again.

        Returns
        -------
        self : CRPGaussianClassifier

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier().fit([[0.0], [0.2], [4.0], [4.2]],
        ...                                   [0, 0, 1, 1])
        >>> clf = clf.freeze_classes().partial_fit([[0.1], [9.0]], [0, 2])
        >>> clf.class_count_, clf.frozen_classes_
        (array([2., 2., 1.]), array([ True,  True, False]))
        """
        state = self._fitted("freeze_classes")._state
        before = state.frozen.copy()  # O(N) bools: all or nothing, cheaply
        try:
            state.freeze(bool(frozen))
        except BaseException:
            state.frozen = before
            raise
        return self

    # Read off the online state (documented under Attributes above).
    class_count_ = property(lambda self: self._fitted("class_count_")
                            ._state.class_count())
    crp_count_ = property(lambda self: self._fitted("crp_count_")._state.crp_counts())
    frozen_classes_ = property(lambda self: self._fitted("frozen_classes_")
                               ._state.frozen[: self._state.n_classes].copy())
    class_mean_ = property(lambda self: self._fitted("class_mean_")
                           ._state.class_mean())
    class_var_ = property(lambda self: self._fitted("class_var_")._state.class_var())
