"""The CRP-Gaussian head: FLOWR's Bayesian non-parametric classifier on features."""

from numbers import Real

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils import Bunch, _safe_indexing, column_or_1d
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted, validate_data

from ._core import log_softmax, softmax_rows_inplace
from ._core._covariance import scale_prior_var
from ._merge import fit_dask, fit_moments, is_dask_collection, merge_heads
from ._online_base import (
    MAX_ABS_INPUT,
    OnlineOpenWorldClassifier,
    _all_or_nothing,
    _check_magnitude,
    _unchanged_on_error,
)
from ._online_state import check_class_embeddings, new_head_state
from ._params import check_novelty_map, snapshot_params
from ._proba import OpenWorldProba
from ._unlabelled import UnlabelledStreamMixin

__all__ = ["CRPGaussianClassifier"]


class CRPGaussianClassifier(UnlabelledStreamMixin, OnlineOpenWorldClassifier):
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
        Class-noise variance ``Sigma_eps = sigma * I``. ``"auto"`` takes the
        pooled within-class variance of ``fit``'s data, averaged over features
        (floored), so the head needs no knowledge of the feature scale; it
        needs a class with two or more samples. The paper fixes ``sigma=0.5``
        for embeddings meta-learned to that scale; pass it explicitly to
        reproduce it. A matrix needs ``covariance="full"``. With
        ``covariance="full"``, ``"auto"`` estimates the full noise covariance
        ``Sigma_eps`` (the pooled within-class covariance, Ledoit-Wolf shrunk,
        then by ``noise_shrinkage``); a float ``s`` uses isotropic noise
        ``s * I``; a matrix is used as given (symmetric positive definite).
        The choice moves P(novel) a lot on embeddings: search it on classes
        the encoder did not see.
    prior_mean : float, array-like of shape (n_features,) or "auto", \
default="auto"
        ``mu0``; ``"auto"`` takes the mean of the class means in ``fit``.
    prior_var : float, array-like of shape (n_features,) or "auto", \
default="auto"
        ``s0`` (a variance); ``"auto"`` takes the mean variance of the class
        means (isotropic, floored). An array gives a diagonal prior;
        ``covariance="full"`` also takes a full matrix, and "auto" is then the
        shrunk covariance of the class means.
    prior_scale : float, default=1.0
        Factor, ``> 0``, on the estimated ``s0`` when ``prior_var="auto"``
        (``mu0``, ``sigma`` and ``b`` keep their estimates): new classes'
        means are taken to spread ``prior_scale`` times as far around ``mu0``
        as the means of ``fit``'s classes; 1.0 is plain empirical Bayes. A
        given ``prior_var`` is used as it is and needs ``prior_scale=1.0``
        (scale it yourself). Above 1 when the classes of ``fit`` are those an
        embedding was trained on, whose means spread less than new classes'
        (see docs/results.rst).
    covariance : {"isotropic", "full"}, default="isotropic"
        ``"isotropic"``: the paper's ``Sigma_eps = sigma * I``. ``"full"``: a
        full shared class noise and a full prior covariance (PLDA's
        two-covariance model [2]_ under the CRP prior), exact and conjugate,
        run as the diagonal head in the basis that whitens ``Sigma_eps`` and
        diagonalises ``s0`` (an extra O(d^2) per row). See Notes.
    noise_shrinkage : float in [0, 1], default=0.0
        With ``covariance="full"`` and ``sigma="auto"``: shrink the estimated
        noise covariance further towards its mean eigenvalue times ``I``,
        ``(1 - noise_shrinkage) * Sigma_eps + noise_shrinkage * mean(eig) * I``
        (0: the Ledoit-Wolf estimate; 1: isotropic noise of the same mean
        variance). New classes on an embedding trained on other classes are
        not as squeezed as the training classes in the directions where
        those are; a little shrinkage weighs those directions less. Measured
        in docs/user_guide.rst, "The noise covariance of new classes": it
        helps new glyph fonts, hurts kanji slightly; choose it on classes
        the encoder did not see. Ignored otherwise (a given ``sigma`` is used
        as it is; isotropic noise is its own target). Not in the paper.
    class_prior : {"crp", "uniform"}, default="crp"
        ``"uniform"`` gives each known class and the novel class mass
        ``1/(N+1)`` (the paper's ablation).
    known_count : float or "observed", default=1.0
        CRP count given to each class learned in ``fit``. The paper uses 0,
        which is invalid for ``a > 0`` (``c_n - a`` must be positive); we use a
        pseudo-count instead. ``"observed"`` uses the real class sizes.
        ``partial_fit`` and ``open_world_step`` add 1 per labelled row.
    novel_label : object, default="auto"
        Label that :meth:`predict` returns for the novel class. ``"auto"``
        gives ``"novel"`` for string labels and, for numeric labels, -1 (or
        one less than the smallest label when labels reach -1, as in
        ``{-1, 1}``). It may not occur in ``y``.
    novelty_calibration : (float, float) or None, default=None
        Platt map ``logit p' = slope * logit p + intercept`` of P(novel)
        (``slope > 0``; known classes keep their ratios, the order of P(novel)
        is kept), fitted by :func:`~sklearn_flowr.protocol.calibrate_novelty`
        and read at call time. ``None``: the model's own P(novel).
    unlabelled_threshold : float in [0, 1] or None, default=0.9
        An unlabelled row (``open_world_step(X)`` without ``y``) is learned
        into the class it is assigned to -- its MAP class, or a new
        provisional class -- when that assignment's posterior probability is
        at least this. ``None`` never learns from unlabelled rows (they are
        only predicted). Read at call time. Higher is safer (fewer wrong
        rows learned) and slower to discover; the default was chosen on
        validation classes (docs/results.rst), and
        :func:`~sklearn_flowr.protocol.select_discovery_params` chooses it
        for your own data.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Known class labels: sorted in ``fit``; :meth:`partial_fit` and
        :meth:`open_world_step` append new ones in order of arrival (a batch
        in the order its rows would arrive one by one).
    class_count_ : ndarray of shape (n_classes,)
        Number of samples each class was conditioned on.
    crp_count_ : ndarray of shape (n_classes,)
        Counts ``c_n`` of the CRP prior.
    frozen_classes_ : ndarray of bool of shape (n_classes,)
        Which classes later labels leave fixed (:meth:`freeze_classes`).
    class_mean_ : ndarray of shape (n_classes, n_features)
        Posterior mean ``m_n = q_n / lam_n`` of each class embedding.
    class_var_ : ndarray of shape (n_classes, n_features)
        Posterior variance ``1 / lam_n`` of each class embedding (the
        diagonal of its posterior covariance with ``covariance="full"``).
    prior_mean_ : ndarray of shape (n_features,)
        ``mu0``.
    prior_var_ : ndarray of shape (1,), (n_features,) or \
(n_features, n_features)
        ``s0``; one entry when isotropic, a matrix with ``covariance="full"``.
    sigma_ : float or ndarray of shape (n_features, n_features)
        Class-noise variance in use: ``sigma``, or its estimate when "auto";
        the full ``Sigma_eps`` with ``covariance="full"``.
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

    ``covariance="full"`` and ``novelty_calibration`` go beyond the paper
    (docs/user_guide.rst); :meth:`fit_class_embeddings` does not support the
    former.

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
    # squared distances over variances (or a variance's reciprocal) leave
    # float64 and the probabilities become NaN (prior_mean=1e200 did).
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
    # The unlabelled stream's bookkeeping (replaced, never changed in place;
    # class-level defaults for heads fitted before it existed).
    _n_provisional = 0
    _provisional = ()
    _unlabelled_counts = {}
    _aliases = {}

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
            Training embeddings. A Dask array is summarised chunk by chunk
            (class sizes, means and scatter) on Dask's active scheduler (a
            ``distributed.Client``'s cluster when one is set up), then the
            summaries are merged as :meth:`merge` does: the same head as on
            the whole array in memory, to float64 rounding.
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
            return fit_dask(self, X, y)
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
            Accepted for scikit-learn's incremental learners; classes need no
            declaration here. When given, it must hold every label of ``y``.

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

        This is how the large-context setting brings in the known-known
        classes learned during (Sup-E) training: class ``n`` gets
        ``q_n = mu_n / s_n`` and ``lam_n = 1 / s_n`` and the CRP count
        ``known_count``. Like :meth:`fit`, it forgets any earlier state.
        There are no samples to estimate ``b``, ``sigma`` or observed counts
        from, so ``b`` and ``sigma`` must be floats and ``known_count``
        numeric (``prior_mean`` and ``prior_var`` may stay "auto": they come
        from the spread of ``means``).

        Parameters
        ----------
        classes : array-like of shape (n_classes,)
            Distinct labels.
        means : array-like of shape (n_classes, n_features)
            Class means ``mu_n``.
        variances : array-like of shape (n_classes,) or (n_classes, 1)
            Isotropic class variances ``s_n`` (positive).
        frozen : bool, default=True
            Keep these classes fixed online, as the paper does; new classes
            and their updates are unaffected.

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
        with _unchanged_on_error(self):
            means = validate_data(self, means, dtype=np.float64, reset=True)
            _check_magnitude(means)
            classes, variances = check_class_embeddings(
                classes, means, variances, covariance=self.covariance,
                known_count=self.known_count, b=self.b, sigma=self.sigma)
            labels, y_index = self._check_labels(classes, None)
            self._start_labels(labels)
            # The empirical-Bayes prior of class means applies as in fit.
            self._state = self._new_state(means, y_index, labels)
            # A fresh registry and state: if this fails, the earlier ones
            # come back untouched with ``__dict__``.
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
        (sizes, means, scatter) combine exactly (Chan et al.'s pairwise
        update), so embeddings never need to meet on one machine. Neither
        head changes.

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
            The heads differ in a parameter or in their features, or the
            statistics a re-estimate needs are gone (see Notes). Nothing
            changes.

        Notes
        -----
        "Same parameters" means equal ``get_params()``. Given (numeric)
        ``sigma``, ``prior_mean`` and ``prior_var`` are kept, and merging adds
        the class sums and counts the natural parameters hold: exact, rows
        learned online included. "auto" ones, and ``b="auto"``, are
        estimated again from the pooled statistics, as ``fit`` on the union
        estimates them (empirical Bayes is a function of per-class sizes,
        means and scatter, which ``fit`` keeps; ``covariance="full"`` with
        ``sigma="auto"`` also keeps each class's scatter matrix and fourth
        moments, O(d^2) per class, for Ledoit-Wolf). Rows learned online
        after ``fit`` do not update those statistics: such a head merges only
        with ``sigma``, ``prior_mean`` and ``prior_var`` given.

        As after ``fit``, ``crp_count_`` is ``known_count`` (or the class
        sizes with ``"observed"``) and ``novel_label_`` is resolved from the
        union's labels. A class frozen in either head stays frozen. Classes
        from :meth:`fit_class_embeddings` carry no rows and are refused.
        ``novelty_calibration`` is kept, but it was fitted to the parts'
        P(novel): calibrate the merged head again.

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
        return merge_heads(self, other)

    def open_world_step(self, X, y=None, *, labelled=None):
        """Predict each row with the state before it, then learn from it.

        With labels, the paper's online loop, vectorised with prefix sums: it
        equals ``predict_proba`` then ``partial_fit`` row by row. An unfitted
        head needs ``prior_mean``, ``prior_var``, ``b`` and ``sigma`` given.
        Without labels (``y=None``), each row in stream order is assigned to
        its MAP class by the CRP posterior -- a known class or a new
        provisional class with a generated label (``-2, -3, ...`` for
        numeric labels, ``"new-1", "new-2", ...`` for strings; never a user
        label or the novel label), which then joins ``classes_`` -- and
        learned when that assignment's probability is at least
        ``unlabelled_threshold`` (and its class is not frozen). Late labels
        go to :meth:`correct`. All or nothing: an exception leaves the head
        as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,) or None, default=None
            True labels, revealed after each prediction; None: no labels.
        labelled : array-like of bool, shape (n_samples,), or None, default=None
            Mix labelled and unlabelled rows in one batch: rows where it is
            True are learned under their ``y`` entry, the others are
            unlabelled (their ``y`` entries are ignored). Needs ``y``.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred`` (the MAP decision),
            ``y_known`` (best known class), ``p_novel``, ``is_novel`` (the
            label was unseen then; unlabelled: the MAP class was the new
            one), ``novelty_score`` (P(novel)'s log-odds), ``y_assigned``
            (the class the row was learned under: its label, or for an
            unlabelled row its MAP class or new provisional label; the novel
            label for a new-class row not learned) and ``learned``.

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
            # The labelled loop (named, not ``super()``: the one-row hot path
            # pays for every lookup).
            return OnlineOpenWorldClassifier.open_world_step(self, X, y)
        if labelled is None:
            check_is_fitted(self, msg=(
                "open_world_step(X) without labels needs a fitted %(name)s: "
                "fit or partial_fit it on labelled rows first."))
            with _all_or_nothing(self) as undo:
                X = self._validated_rows(X)
                return self._unlabelled_steps(X, undo)
        return self._mixed_steps(X, y, labelled)

    def _mixed_steps(self, X, y, labelled):
        """Labelled and unlabelled runs of one batch, in order, all or nothing."""
        if y is None:
            raise ValueError("labelled needs y (the labels of the labelled rows).")
        labelled = column_or_1d(np.asarray(labelled))
        if labelled.dtype != bool:
            raise ValueError(f"labelled must be a boolean mask; got dtype "
                             f"{labelled.dtype}.")
        y = column_or_1d(np.asarray(y))
        if not _num_samples(X) == y.shape[0] == labelled.shape[0]:
            raise ValueError("X, y and labelled need one entry per row; got "
                             f"{_num_samples(X)}, {y.shape[0]} and "
                             f"{labelled.shape[0]}.")
        if not labelled[0] and not self.__sklearn_is_fitted__():
            raise NotFittedError("open_world_step with unlabelled rows first needs "
                                 "a fitted CRPGaussianClassifier.")
        X = np.asarray(X) if not hasattr(X, "iloc") else X
        bounds = np.flatnonzero(np.diff(labelled.astype(np.int8))) + 1
        parts = []
        with _all_or_nothing(self):
            for rows in np.split(np.arange(labelled.shape[0]), bounds):
                X_part = _safe_indexing(X, rows)
                parts.append(self.open_world_step(
                    X_part, y[rows] if labelled[rows[0]] else None))
        return Bunch(**{key: np.concatenate([np.asarray(part[key], dtype=object)
                                             if key in ("y_pred", "y_known",
                                                        "y_assigned")
                                             else part[key] for part in parts])
                        for key in parts[0]})

    # ------------------------------------------------------------------ hooks
    def _check_stream_start(self):
        if any(isinstance(value, str) and value == "auto" for value
               in (self.prior_mean, self.prior_var, self.b, self.sigma)):
            raise NotFittedError(
                "open_world_step on an unfitted CRPGaussianClassifier needs the "
                "prior: call fit/partial_fit first or give prior_mean, prior_var, "
                "b and sigma (not 'auto')."
            )

    def _start(self, X, y_index, labels, *, fitting):
        self._state = self._new_state(X, y_index, labels)
        self._n_provisional, self._provisional = 0, ()
        self._unlabelled_counts, self._aliases = {}, {}
        # What merge re-estimates "auto" hyper-parameters from.
        self._fit_moments = fit_moments(self, X, y_index, labels.shape[0])

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

    def _stream_one(self, X, i, is_new, undo):
        return self._state.step_one(X[0], i, is_new,
                                    check_novelty_map(self.novelty_calibration),
                                    undo)

    # --------------------------------------------------------------- prediction
    def _joint_log_numerators(self, X):
        X = self._validated_rows(X)
        return self._state.joint_log_numerators(
            X, check_novelty_map(self.novelty_calibration))

    def predict_joint_log_proba(self, X):
        """Joint log-probabilities ``log p(x, n)`` of the known and novel classes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        joint : ndarray of shape (n_samples, n_classes + 1)
            ``log N(x; m_n, v_n) + log p(n)``; columns follow ``classes_``, the
            last column is the novel class (mapped by ``novelty_calibration``
            when set).

        Examples
        --------
        >>> import numpy as np
        >>> from scipy.special import logsumexp
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier().fit([[0, 0], [0.2, 0], [4, 4], [4, 4.2]],
        ...                                   [0, 0, 1, 1])
        >>> joint = clf.predict_joint_log_proba([[0.1, 0.0]])
        >>> np.exp(joint - logsumexp(joint, axis=1, keepdims=True)).round(3)  # p(n|x)
        array([[0.997, 0.   , 0.003]])
        """
        return self._joint_log_numerators(X) + self._state.log_normaliser()

    def predict_log_proba(self, X):
        """Log posterior probabilities of the known classes and the novel class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes + 1)
            Columns follow ``classes_``; the last column is the novel class.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier().fit([[0, 0], [0.2, 0], [4, 4], [4, 4.2]],
        ...                                   [0, 0, 1, 1])
        >>> np.exp(clf.predict_log_proba([[0.1, 0.0]])).round(3)
        array([[0.997, 0.   , 0.003]])
        """
        log_proba = log_softmax(self._joint_log_numerators(X))
        return OpenWorldProba(log_proba, self.classes_, is_log_proba=True)

    def predict_proba(self, X):
        """Posterior probabilities of the known classes and the novel class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes + 1)
            Columns follow ``classes_``; the last column is the novel class.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier().fit([[0, 0], [0.2, 0], [4, 4], [4, 4.2]],
        ...                                   [0, 0, 1, 1])
        >>> clf.predict_proba([[0.1, 0.0], [-6.0, 7.0]]).round(3)  # 0, 1, novel
        array([[0.997, 0.   , 0.003],
               [0.   , 0.   , 1.   ]])
        """
        proba = softmax_rows_inplace(self._joint_log_numerators(X))
        return OpenWorldProba(proba, self.classes_)

    def predict(self, X):
        """Most probable class, or ``novel_label_`` when the novel class wins.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_`` or ``novel_label_``.

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> clf = CRPGaussianClassifier(novel_label="unknown").fit(
        ...     [[0, 0], [0.2, 0], [4, 4], [4, 4.2]], ["a", "a", "b", "b"])
        >>> clf.predict([[0.1, 0.0], [3.9, 4.1], [-6.0, 7.0]])
        array(['a', 'b', 'unknown'], dtype=object)
        """
        best = np.argmax(self._joint_log_numerators(X), axis=1)
        best[best == self._state.n_classes] = -1  # ties go to the known class
        return self._labels_of(best)

    # ----------------------------------------------------------------- helpers
    def _new_state(self, X, y_index, labels):
        """Fix the prior and the hyper-parameters for a fresh state."""
        # prior_scale: the estimated s0, scaled, goes on as a given prior_var.
        prior_var = scale_prior_var(
            X, y_index, labels.shape[0], covariance=self.covariance,
            prior_var=self.prior_var, prior_scale=float(self.prior_scale))
        state, hyper, b = new_head_state(
            X, y_index, labels.shape[0], a=float(self.a), b=self.b, sigma=self.sigma,
            prior_mean=self.prior_mean, prior_var=prior_var,
            covariance=self.covariance, class_prior=self.class_prior,
            known_count=self.known_count,
            noise_shrinkage=float(self.noise_shrinkage))
        self.prior_mean_ = hyper.prior_mean
        self.prior_var_ = hyper.prior_var
        self.b_ = b
        self.sigma_ = hyper.sigma
        self._fitted_params = snapshot_params(self)
        return state

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
        state = self._state_of("freeze_classes")
        frozen = bool(frozen)
        before = state.frozen.copy()  # O(N) bools: all or nothing, cheaply
        try:
            state.freeze(frozen)
        except BaseException:
            state.frozen = before
            raise
        return self

    def _state_of(self, name):
        return self._fitted(name)._state

    # Read off the online state (documented under Attributes above).
    class_count_ = property(lambda self: self._state_of("class_count_").class_count())
    crp_count_ = property(lambda self: self._state_of("crp_count_").crp_counts())
    frozen_classes_ = property(lambda self: self._state_of("frozen_classes_").frozen[
        : self._state_of("frozen_classes_").n_classes].copy())
    class_mean_ = property(lambda self: self._state_of("class_mean_").class_mean())
    class_var_ = property(lambda self: self._state_of("class_var_").class_var())
