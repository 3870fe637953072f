"""The CRP-Gaussian head: FLOWR's Bayesian non-parametric classifier on features."""

from numbers import Real

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from ._core import log_softmax, softmax_rows_inplace
from ._core._covariance import scale_prior_var
from ._online_base import (
    MAX_ABS_INPUT,
    OnlineOpenWorldClassifier,
    _check_magnitude,
    _unchanged_on_error,
)
from ._online_state import check_class_embeddings, new_head_state
from ._params import check_novelty_map, snapshot_params
from ._proba import OpenWorldProba

__all__ = ["CRPGaussianClassifier"]


class CRPGaussianClassifier(OnlineOpenWorldClassifier):
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
    }
    _runtime_params = ("novelty_calibration",)

    def __init__(self, *, a=0.5, b="auto", sigma="auto", prior_mean="auto",
                 prior_var="auto", prior_scale=1.0, covariance="isotropic",
                 noise_shrinkage=0.0, class_prior="crp", known_count=1.0,
                 novel_label="auto", novelty_calibration=None):
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

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Learn the prior and sigma (when "auto") and the class statistics.

        Any state from earlier ``partial_fit`` or ``open_world_step`` calls is
        forgotten.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training embeddings.
        y : array-like of shape (n_samples,)
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

    def open_world_step(self, X, y):
        """Predict each row with the state before it, then learn its label.

        The paper's online loop, vectorised with prefix sums: it equals
        ``predict_proba`` then ``partial_fit`` row by row. An unfitted head
        needs ``prior_mean``, ``prior_var``, ``b`` and ``sigma`` given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Embeddings, in stream order.
        y : array-like of shape (n_samples,)
            True labels, revealed after each prediction.

        Returns
        -------
        result : :class:`~sklearn.utils.Bunch`
            Arrays of shape (n_samples,): ``y_pred`` (the MAP decision),
            ``y_known`` (best known class), ``p_novel``, ``is_novel`` (the
            label was unseen then) and ``novelty_score`` (P(novel)'s log-odds).

        Examples
        --------
        >>> from sklearn_flowr import CRPGaussianClassifier
        >>> X = [[0.0, 0.0], [0.2, 0.0], [4.0, 4.0], [4.0, 4.2]]
        >>> clf = CRPGaussianClassifier().fit(X, [0, 0, 1, 1])
        >>> out = clf.open_world_step([[-6.0, 7.0], [-6.1, 7.0], [0.1, 0.1]],
        ...                           [2, 2, 0])
        >>> out.y_pred  # class 2 is novel at first sight, then recognised
        array([-1,  2,  0])
        """
        return super().open_world_step(X, y)

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
