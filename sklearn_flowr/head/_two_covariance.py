"""The two-covariance (PLDA) model of frozen features as a whitening transform:
in its output the CRP-Gaussian head's diagonal model is exact."""

import contextlib
from numbers import Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils._set_output import _wrap_data_with_container
from sklearn.utils.validation import check_is_fitted, validate_data

from .._core import fill_doc
from ..base import all_or_nothing
from ..validation import check_missing_labels, check_targets
from ._blas import scipy_blas_on_one_thread
from ._plda import (
    apply_map,
    check_counts,
    class_means,
    estimate,
    map_span,
    prior_variances,
    resolve_solver,
    span_refit,
    unit_rows,
)

__all__ = ["TwoCovarianceWhitener", "fit_class_mean_rows", "fit_transform_with_refit"]

# Rows, as a share of the features, below which a fit that will be refitted
# without folds of its rows takes the span solver, whose coordinates the
# refits share (closer to d, the span's fit and the Gram's refits cost less:
# random rows of d = 1280, 816 to 1,200 rows, fit + predict of the head).
_SPAN_FOR_REFITS = 0.75
# The precisions transform keeps (others are converted to the first).
_FLOATS = (np.float64, np.float32)


_FIT_PARAMETERS = """Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, no row all zeros.
        y : array-like of shape (n_samples,)
            Labels: at least two classes and more rows than classes.
"""


@fill_doc({"fit_parameters": _FIT_PARAMETERS})
class TwoCovarianceWhitener(ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                            BaseEstimator):
    """Map features to the coordinates where FLOWR's two-covariance model is
    diagonal: unit noise and a diagonal prior ``diag(beta)`` on class means.

    Rows are scaled to unit length, ``z = x / ||x||`` [3]_, and modelled as
    ``z = mu_n + eps``, ``eps ~ N(0, W)``, class means ``mu_n ~ N(mu0, B)``
    (PLDA's two covariances [1]_ [2]_). ``fit`` estimates them from class
    counts and within-class residuals: ``W = (1 - alpha) S + alpha nu I``
    (``S`` the pooled within-class covariance, ``nu = trace(S) / d``);
    ``B`` by moments in the ``W``-whitened space (``W = L L^T``): the
    covariance ``U diag(t) U^T`` of the whitened class means less the noise
    of a mean of ``k_h`` rows (the harmonic mean of the class sizes),
    ``beta = max(t' - 1/k_h, floor)``, where ``t'`` is ``t`` with the
    eigenvalues the means' noise puts there told apart from their spread
    (``prior_spectrum``). ``transform`` returns ``u = A^T (z -
    mu0)``, ``A = L^-T U``: there the class noise is ``I`` and the class means'
    prior ``N(0, diag(beta))``, the model of
    :class:`~sklearn_flowr.head.WhitenedCRPClassifier`'s head.

    Parameters
    ----------
    noise_shrinkage : "dof" or float in [0, 1], default="dof"
        ``alpha``. ``"dof"``: ``p / (p + n - K)``, ``p = min(d, n - K)``: the
        target weighs ``d`` degrees of freedom, never more than the rows' ``n -
        K``. Keep it: Ledoit-Wolf's far smaller estimate costs novelty detection.
    prior_floor : float in (0, 1], default=1e-3
        Lower bound of ``beta`` relative to its largest entry.
    prior_spectrum : {"sample", "spiked"}, default="sample"
        How the eigenvalues ``t`` become variances ``t'``. ``"sample"``: as
        they are (``t' = t``): the classes vary only along the directions
        their means span. ``"spiked"``: the eigenvalues above the
        Marchenko-Pastur edge of the rest (the spread the noise of ``K``
        class means has in ``d`` dimensions) are spikes, their variances the
        ones that give those eigenvalues; every other direction, those the
        means do not span included, shares the variance the trace leaves.
        With fewer classes than features, where classes differ in every
        direction, ``"sample"`` takes the noise of the means for spread and
        gives the other directions none: new classes' rows look like no
        class, and one labelled row of a new class takes other new classes'
        rows. ``"spiked"`` is right there; on pretrained networks' features
        (spectra that fall off) it is ahead with many classes and behind with
        a few: try both by cross-validation.
    solver : {"auto", "eigen", "gram", "span"}, default="auto"
        All fit the same model. ``"eigen"``: the ``d x d`` eigen-decomposition
        of the whitened means' covariance; ``"gram"``: their ``K x K`` Gram
        matrix (fast when ``K << d``); ``"span"``: the span of the centred rows
        (fast when ``n << d``); ``"auto"``: the cheapest by shape for the fit
        and the transform of its rows (``fit_transform``). The heads' ``fit``
        takes the span below 3/4 of d rows, whose refits it shares; there a
        row's ``transform`` costs up to about twice the Gram solver's.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Labels of ``fit``.
    class_count_ : ndarray of shape (n_classes,)
        Rows per class.
    prior_mean_ : ndarray of shape (n_features,)
        ``mu0``, the mean of the class means of the normalised rows.
    prior_var_ : ndarray of shape (n_features,)
        ``beta``: the prior variances of the class means in the output.
    noise_shrinkage_ : float
        ``alpha`` in use.
    noise_var_ : float
        ``nu``, the mean within-class variance of the normalised rows.
    scalings_ : ndarray of shape (n_features, n_features)
        ``A``: ``transform(X) = (z - mu0) @ A`` (formed on access), in the
        precision of ``fit``'s rows.
    solver_ : str
        The solver used.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit`` (string column names only).

    See Also
    --------
    sklearn_flowr.head.WhitenedCRPClassifier : this transform and the head.

    Notes
    -----
    Where NumPy and SciPy each bring their own BLAS (pip's wheels), ``fit``
    and the factored maps' ``transform`` hold SciPy's to one thread while
    they run: the two pools' idle threads otherwise spin on the same cores.

    ``fit`` estimates in float64 whatever the rows' precision; float32 rows
    (a network's features) keep ``transform``'s output, and the eigen
    solver's map, in float32 (the factored maps run in float64), whose
    rounding (a few 1e-7 of the output's scale) is far below the map's
    estimation error. Pass float64 rows for float64 throughout.

    References
    ----------
    .. [1] J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone,
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022.
    .. [2] S. Ioffe, "Probabilistic Linear Discriminant Analysis", ECCV, 2006.
    .. [3] M. Mueller, M. Hein, "Mahalanobis++: Improving OOD Detection via
       Feature Normalization", ICML, 2025 (the L2-normalised rows).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.head import TwoCovarianceWhitener
    >>> y = np.repeat([0, 1, 2, 3], 3)
    >>> X = np.eye(4, 6)[y] + 0.1 * np.random.default_rng(0).normal(size=(12, 6))
    >>> whitener = TwoCovarianceWhitener().fit(X, y)
    >>> whitener.solver_, round(whitener.noise_shrinkage_, 3)  # d / (d + n - K)
    ('gram', 0.429)
    >>> bool(np.allclose(whitener.transform(1000.0 * X), whitener.transform(X)))
    True
    """

    # The precision of fit's rows, which transform returns (files saved
    # before float32 was kept hold float64 maps and have no attribute).
    _dtype = "float64"

    _parameter_constraints: dict = {
        "noise_shrinkage": [StrOptions({"dof"}), Interval(Real, 0, 1, closed="both")],
        "prior_floor": [Interval(Real, 0, 1, closed="right")],
        "prior_spectrum": [StrOptions({"sample", "spiked"})],
        "solver": [StrOptions({"auto", "eigen", "gram", "span"})],
    }

    def __init__(self, *, noise_shrinkage="dof", prior_floor=1e-3,
                 prior_spectrum="sample", solver="auto"):
        self.noise_shrinkage = noise_shrinkage
        self.prior_floor = prior_floor
        self.prior_spectrum = prior_spectrum
        self.solver = solver

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Estimate the noise ``W``, the prior ``mu0, B`` and the map ``A``.

        %(fit_parameters)s
        Returns
        -------
        self : TwoCovarianceWhitener
        """
        self._fit(X, y)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y):
        """:meth:`fit`, then :meth:`transform` of the same rows.

        Use it on the fitting rows: the span solver's fit has their
        coordinates already, so it skips :meth:`transform`'s pass over them.

        %(fit_parameters)s
        Returns
        -------
        U : ndarray of shape (n_samples, n_features)
            The whitened rows.
        """
        rows, _, Z = self._fit(X, y)
        return self._map_unit(Z) if rows is None else self._span_transform(rows)

    def _fit(self, X, y, *, prefer_span=False):
        """Fit; return the rows' coordinates in the span (``solver_="span"``)
        or None, the validated labels and the unit rows. ``prefer_span``: with
        ``solver="auto"``, the span whenever the rows are fewer than
        ``_SPAN_FOR_REFITS`` times the features. An error or an interrupt
        leaves the whitener as it was (its attributes are set one by one)."""
        with all_or_nothing(self):
            return self._estimate(X, y, prefer_span)

    def _estimate(self, X, y, prefer_span):
        check_missing_labels(y)
        X, y = validate_data(self, X, y, dtype=_FLOATS, reset=True)
        check_targets(y)
        dtype, X = X.dtype.name, X.astype(np.float64, copy=False)
        if X.shape[1] < 2:
            raise ValueError(
                "TwoCovarianceWhitener needs two features or more: scaling rows "
                "of 1 feature(s) to unit length leaves only their sign.")
        Z = unit_rows(X)
        classes, y_index, counts = np.unique(y, return_inverse=True,
                                             return_counts=True)
        n, d = Z.shape
        check_counts(n, classes.shape[0])
        solver = self.solver
        if solver == "auto" and prefer_span and n < _SPAN_FOR_REFITS * d:
            solver = "span"
        solver = resolve_solver(solver, n, classes.shape[0], d)
        with scipy_blas_on_one_thread():
            prior_mean, scalings, between, nu, alpha, rows = estimate(
                Z, y_index, counts, self._alpha(), solver)
        self.classes_, self.class_count_ = classes, counts.astype(np.float64)
        self.prior_mean_ = prior_mean
        self.prior_var_ = prior_variances(between, counts, self.prior_floor,
                                          self.prior_spectrum)
        self.noise_shrinkage_, self.noise_var_ = float(alpha), float(nu)
        # The span's and the Gram's A stay factored (reflectors, L): fit then
        # needs no d x d product, and a row of the span costs O(d n). The
        # eigen solver's A is kept in the rows' precision: float32 halves the
        # d x d product that a streamed row spends most of its time in.
        if isinstance(scalings, np.ndarray):
            scalings = scalings.astype(dtype, copy=False)
        self._scalings, self._dtype, self.solver_ = scalings, dtype, solver
        return rows, y, Z

    def _alpha(self):
        """``noise_shrinkage`` as ``estimate`` takes it (None: ``"dof"``)."""
        return None if self.noise_shrinkage == "dof" else float(self.noise_shrinkage)

    def _span_transform(self, rows):
        """The fit rows whitened from their coordinates in the span."""
        # The rows lie in the span: their coordinates outside it are 0.
        outside = np.zeros((rows.shape[0], self.n_features_in_ - rows.shape[1]))
        return map_span(rows, outside, *self._scalings[2:]).astype(
            self._dtype, copy=False)

    def transform(self, X):
        """Whitened coordinates ``u = A^T (x / ||x|| - mu0)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, no row all zeros.

        Returns
        -------
        U : ndarray of shape (n_samples, n_features)
            Rows with unit class noise and prior ``N(0, diag(prior_var_))``,
            float32 when ``fit``'s rows were float32 (a network's features;
            the eigen solver's map is then float32, its product half the
            time), else float64.
        """
        if not self.__sklearn_is_fitted__():  # (its tags cost 5 us a row)
            check_is_fitted(self)
        # A plain float64 array (the online step's row) skips scikit-learn's
        # checks, which cost as much as the product at d = 1280.
        if not (type(X) is np.ndarray and X.dtype in _FLOATS and X.ndim == 2
                and X.shape[1] == self.n_features_in_ and np.isfinite(X).all()
                and not hasattr(self, "feature_names_in_")):
            X = validate_data(self, X, dtype=_FLOATS, reset=False)
        return self._map_unit(unit_rows(X.astype(np.float64, copy=False)))

    def _map_unit(self, Z):
        """``transform`` of the unit rows ``Z`` (float64; centred in place):
        mapped in the map's precision."""
        Z -= self.prior_mean_
        # The factored maps' LAPACK beside NumPy (one row: no threads to hold).
        factored = not isinstance(self._scalings, np.ndarray) and Z.shape[0] > 1
        with scipy_blas_on_one_thread() if factored else contextlib.nullcontext():
            return apply_map(self._scalings, Z).astype(self._dtype, copy=False)

    @property
    def scalings_(self):
        check_is_fitted(self)
        return apply_map(self._scalings, np.eye(self.n_features_in_)).astype(
            self._dtype, copy=False)

    def __sklearn_is_fitted__(self):
        return hasattr(self, "_scalings")

    @property
    def _n_features_out(self):
        return self.n_features_in_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _class_mean_rows(transform, V, y):
    """Each row of ``V`` (labels ``y``) replaced by its class's mean mapped by
    ``transform`` (a fitted whitener's map of unit rows, or of the rows'
    coordinates in the span): rows with the class sums and counts of the
    mapped rows (the maps are affine), for a head that reads only those, at
    the cost of mapping one row a class."""
    _, y_index, counts = np.unique(y, return_inverse=True, return_counts=True)
    y_index = y_index.reshape(-1)
    return transform(class_means(V, y_index, counts))[y_index]


def fit_class_mean_rows(whitener, X, y):
    """``whitener`` fitted on rows ``X`` of classes ``y`` and each row as its
    class's whitened mean (:func:`_class_mean_rows`): what
    :func:`~sklearn_flowr.head._cross_fit.clone_refit` takes as
    ``fit_rows`` for a head that reads only class sums."""
    rows, y_checked, Z = whitener._fit(X, y)
    return _fitted_rows(whitener, X, rows, y_checked, Z, class_means=True)


def _fitted_rows(whitener, X, rows, y, Z, *, class_means):
    """The fit rows ``X`` whitened by ``whitener`` just fitted on them (from
    their coordinates in the span ``rows``, or their unit rows ``Z``; labels
    ``y``), each as its class's mean if ``class_means``, in set_output's
    container as ``fit_transform`` and ``transform`` give them."""
    transform, V = ((whitener._map_unit, Z) if rows is None
                    else (whitener._span_transform, rows))
    U = _class_mean_rows(transform, V, y) if class_means else transform(V)
    return _wrap_data_with_container("transform", U, X, whitener)


def fit_transform_with_refit(whitener, X, y, *, class_means=False):
    """``whitener.fit_transform(X, y)`` and ``refit(train, held)``: the prior
    variances and the whitened rows ``train`` and ``held`` (boolean masks of
    the rows) of the whitener fitted again on the rows ``train`` alone, or
    None where the fit does not whiten in the span of the rows.
    ``class_means``: each row comes as its class's whitened mean
    (:func:`_class_mean_rows`), for a head that reads only class sums.

    With rows fewer than 3/4 of the features (``solver="auto"`` then takes
    the span; ``solver="span"`` with fewer rows than features), every refit
    is computed from the rows' coordinates in the span of all the rows
    (:func:`span_refit`): the same model, at the cost of a fit in ``n``
    dimensions instead of ``d``. The span's ``transform`` of a row costs
    ``O(d n)``, up to about twice the Gram solver's between ``d / 2`` and
    ``3 d / 4`` rows: a cheaper ``fit`` for a dearer ``predict``.
    """
    whitener._validate_params()  # as fit_transform does
    rows, y_checked, Z = whitener._fit(X, y, prefer_span=True)
    if rows is not None:
        Z = None  # (freed: the rows' coordinates in the span stand for them)
    U = _fitted_rows(whitener, X, rows, y_checked, Z, class_means=class_means)
    if rows is None:
        return U, None
    # The span's coordinates are of every row about prior_mean_: refits'
    # estimates do not depend on the origin.
    return U, span_refit(rows, y_checked, whitener.n_features_in_,
                         whitener._alpha(), whitener.prior_floor,
                         spectrum=whitener.prior_spectrum)
