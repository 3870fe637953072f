"""The two-covariance (PLDA) model of frozen features as a whitening transform:
in its output the CRP-Gaussian head's diagonal model is exact."""

import contextlib
from numbers import Real

import numpy as np
from scipy import linalg
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._core import fill_doc, group_sums
from ._blas import scipy_blas_on_one_thread

__all__ = ["TwoCovarianceWhitener"]

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
    ``beta = max(t - 1/k_h, floor)``. ``transform`` returns ``u = A^T (z -
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
    solver : {"auto", "eigen", "gram", "span"}, default="auto"
        All fit the same model. ``"eigen"``: the ``d x d`` eigen-decomposition
        of the whitened means' covariance; ``"gram"``: their ``K x K`` Gram
        matrix (fast when ``K << d``); ``"span"``: the span of the centred rows
        (fast when ``n << d``); ``"auto"``: the cheapest by shape for the fit
        and the transform of its rows (``fit_transform``, as the head does).

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
        "solver": [StrOptions({"auto", "eigen", "gram", "span"})],
    }

    def __init__(self, *, noise_shrinkage="dof", prior_floor=1e-3, solver="auto"):
        self.noise_shrinkage = noise_shrinkage
        self.prior_floor = prior_floor
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
        rows = self._fit(X, y)
        if rows is None:
            return self.transform(X)
        # The rows lie in the span: their coordinates outside it are 0.
        outside = np.zeros((rows.shape[0], self.n_features_in_ - rows.shape[1]))
        return _map_span(rows, outside, *self._scalings[2:]).astype(
            self._dtype, copy=False)

    def _fit(self, X, y):
        """Fit; return the rows' coordinates in the span (``solver_="span"``)
        or None."""
        X, y = validate_data(self, X, y, dtype=_FLOATS, reset=True)
        check_classification_targets(y)
        dtype, X = X.dtype.name, X.astype(np.float64, copy=False)
        if X.shape[1] < 2:
            raise ValueError(
                "TwoCovarianceWhitener needs two features or more: scaling rows "
                "of 1 feature(s) to unit length leaves only their sign.")
        Z = _unit_rows(X)
        classes, y_index, counts = np.unique(y, return_inverse=True,
                                             return_counts=True)
        n, d = Z.shape
        n_classes = classes.shape[0]
        if n_classes < 2 or n <= n_classes:
            raise ValueError(
                "TwoCovarianceWhitener needs at least two classes and a class "
                f"with two rows; got {n} rows of {n_classes} class(es).")
        solver = _cheapest_solver(n, n_classes, d) if self.solver == "auto" \
            else self.solver
        if solver == "span" and n >= d:  # the rows span everything
            solver = "eigen"
        alpha = None if self.noise_shrinkage == "dof" else float(self.noise_shrinkage)
        with scipy_blas_on_one_thread():
            prior_mean, scalings, between, nu, alpha, rows = _estimate(
                Z, y_index, counts, alpha, solver)
        harmonic = 1.0 / np.mean(1.0 / counts)  # k_h
        beta = between - 1.0 / harmonic
        floor = self.prior_floor * max(beta.max(), 1.0 / harmonic)
        self.classes_, self.class_count_ = classes, counts.astype(np.float64)
        self.prior_mean_, self.prior_var_ = prior_mean, np.maximum(beta, floor)
        self.noise_shrinkage_, self.noise_var_ = float(alpha), float(nu)
        # The span's and the Gram's A stay factored (reflectors, L): fit then
        # needs no d x d product, and a row of the span costs O(d n). The
        # eigen solver's A is kept in the rows' precision: float32 halves the
        # d x d product that a streamed row spends most of its time in.
        if isinstance(scalings, np.ndarray):
            scalings = scalings.astype(dtype, copy=False)
        self._scalings, self._dtype, self.solver_ = scalings, dtype, solver
        return rows

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
        # Scaled and centred in float64; mapped in the map's precision.
        centred = _unit_rows(X.astype(np.float64, copy=False)) - self.prior_mean_
        # The factored maps' LAPACK beside NumPy (one row: no threads to hold).
        factored = not isinstance(self._scalings, np.ndarray) and X.shape[0] > 1
        with scipy_blas_on_one_thread() if factored else contextlib.nullcontext():
            return _apply(self._scalings, centred).astype(self._dtype, copy=False)

    @property
    def scalings_(self):
        check_is_fitted(self)
        return _apply(self._scalings, np.eye(self.n_features_in_)).astype(
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


def _estimate(Z, y_index, counts, alpha, solver):
    """``mu0``, the map ``A`` (a matrix or factored), ``t``, ``nu``, the
    noise shrinkage ``alpha`` (given, or None: ``"dof"``'s) of the unit rows
    ``Z`` of classes ``y_index`` (``counts`` rows each) by ``solver``, and the
    rows' coordinates in the span (``"span"``; else None)."""
    n, d = Z.shape
    n_classes = counts.shape[0]
    means = _class_means(Z, y_index, counts)
    prior_mean = means.mean(axis=0)  # mu0: every class counts once
    dof = n - n_classes
    prior_dof = min(d, dof)  # the target's weight, at most the data's
    if alpha is None:
        alpha = prior_dof / (prior_dof + dof)
    rows = None
    if solver == "span":
        scalings, between, nu, rows = _span_fit(Z, y_index, counts, prior_mean,
                                                alpha, dof)
    else:
        residual = Z - means[y_index]
        noise = residual.T @ residual  # (n - K) S, one product
        nu = np.trace(noise) / dof / d
        _check_noise(nu)
        noise *= (1.0 - alpha) / dof
        noise.flat[:: d + 1] += alpha * nu  # W = (1-a) S + a nu I
        chol = _cholesky(noise)  # W = L L^T
        whitened = linalg.solve_triangular(chol, (means - prior_mean).T,
                                           lower=True)  # d x K: L^-1 (m - mu0)
        if solver == "gram":
            reflectors, between = _gram_rotation(whitened, n_classes - 1)
            scalings = (chol, reflectors, None, 1.0)
        else:
            rotation, between = _eigen_rotation(whitened, n_classes - 1)
            scalings = linalg.solve_triangular(chol.T, rotation, lower=False)
    return prior_mean, scalings, between, nu, alpha, rows


def _class_means(V, y_index, counts):
    """Each class's mean of the rows ``V`` (every class has rows: in order)."""
    return group_sums(V, y_index)[1] / counts[:, None]


def _unit_rows(X):
    """``x / ||x||``; a zero row has no direction, so it is refused."""
    norms = np.linalg.norm(X, axis=1)
    if not np.all(norms > 0):
        raise ValueError(
            f"TwoCovarianceWhitener scales rows to unit length; rows "
            f"{np.flatnonzero(norms == 0)[:5].tolist()} are all zeros.")
    return X / norms[:, None]


def _check_noise(nu):
    if not nu > 0:
        raise ValueError(
            "The rows of every class are identical after scaling to unit "
            "length: the class noise cannot be estimated.")


def _cholesky(noise):
    try:
        chol = linalg.cholesky(noise, lower=True)
    except linalg.LinAlgError:
        chol = None
    # A pivot at rounding level: W is singular in float64 (S of rank n - K < d).
    if chol is None or np.diag(chol).min() ** 2 <= (
            noise.shape[0] * np.finfo(np.float64).eps * np.diag(noise).max()):
        raise ValueError(
            "The class noise W is singular (fewer within-class degrees of "
            "freedom than features): use noise_shrinkage > 0.")
    return chol


def _cheapest_solver(n, n_classes, d):
    """The solver of fewest floating-point operations (rough counts) for the
    fit and the transform of its rows, as the head does."""
    common = n * d**2 + d**3 / 3 + n_classes * d**2  # scatter, chol, means
    # A row costs 2 d^2 through the eigen solver's A, d^2 + 4 d (K - 1)
    # through the Gram's factors (a triangular solve, K - 1 reflectors): past
    # a few hundred classes the Gram's cheaper fit is lost in transforming
    # the rows.
    gram_rows = (d**2 + 4 * d * (n_classes - 1)) * n
    if n < d:  # the span's fit gives the fit rows' coordinates too
        span = 2 * d * n**2 + 6 * n**3 + 4 * n**2 * n_classes
        if span < common + gram_rows:
            return "span"
    costs = {"eigen": common + 6 * d**3 + 2 * n * d**2,  # eigh, A; the rows
             "gram": common + 2 * n_classes * d**2 + 5 * n_classes**3 + gram_rows}
    return min(costs, key=costs.get)


def _eigen_rotation(whitened, dof_between):
    """``U`` and ``t`` of ``T = M M^T / (K - 1)`` by its eigen-decomposition."""
    between, rotation = np.linalg.eigh(whitened @ whitened.T / dof_between)
    return rotation, np.maximum(between, 0.0)


def _gram_rotation(whitened, dof_between):
    """``U`` (as Householder reflectors: first the ``r <= K - 1`` directions
    the means span, up to sign, then the rest) and ``t`` from ``M^T M``."""
    gram, vectors = np.linalg.eigh(whitened.T @ whitened / dof_between)
    keep = gram > 1e-10 * gram.max()
    spanned = whitened @ (vectors[:, keep] / np.sqrt(gram[keep] * dof_between))
    between = np.zeros(whitened.shape[0])
    between[: spanned.shape[1]] = gram[keep]
    return linalg.qr(spanned, mode="raw")[0], between


def _span_fit(Z, y_index, counts, prior_mean, alpha, dof):
    """The model in the span of the centred rows (``n < d``), where ``S`` and
    the means live; in its complement ``W = alpha nu I`` and ``t = 0``. Also
    the rows' coordinates in the span (``R^T``)."""
    n, d = Z.shape
    # Q = [inside, outside] as n Householder reflectors: Q^T v costs O(d n).
    # Q^T (Z - mu0)^T = [R; 0]: the rows' coordinates are R^T, the class
    # means' the means of theirs.
    reflectors, upper = linalg.qr((Z - prior_mean).T, mode="raw")
    rows = upper.T
    mean_inside = _class_means(rows, y_index, counts)
    residual = rows - mean_inside[y_index]
    nu = np.sum(residual**2) / dof / d  # trace(S) / d: S is zero outside
    _check_noise(nu)
    noise = (1.0 - alpha) * (residual.T @ residual / dof)
    noise[np.diag_indices(n)] += alpha * nu
    if alpha == 0 and n < d:
        _cholesky(np.zeros((1, 1)))  # W is singular outside the span
    chol = _cholesky(noise)
    whitened = linalg.solve_triangular(chol, mean_inside.T, lower=True)
    # The rotation from the K x K Gram matrix (K < n), as an n x n matrix.
    rotation, between = _gram_rotation(whitened, counts.shape[0] - 1)
    scalings = (None, reflectors,
                linalg.solve_triangular(chol.T, _reflect(rotation, np.eye(n)),
                                        lower=False),
                1.0 / np.sqrt(alpha * nu))
    return scalings, np.concatenate([between, np.zeros(d - n)]), nu, rows


def _reflect(reflectors, V):
    """``V Q`` for ``Q`` given as Householder reflectors ``(qr, tau)``."""
    qr, tau = reflectors
    if tau.shape[0] == 0:  # no reflector (class means all equal): Q = I
        return np.array(V, dtype=np.float64)
    if not qr.flags.writeable:  # LAPACK writes to it (and restores it)
        qr = np.array(qr, order="F")
    result = linalg.lapack.dormqr("L", "T", qr, tau, np.asfortranarray(V.T),
                                  lwork=max(1, 64 * V.shape[0]))
    return result[0].T


def _apply(scalings, V):
    """``V A``: ``A`` a matrix, or factored: whiten by ``L`` (if any), rotate
    by the reflectors ``Q``, map the first ``r`` coordinates (if a map is
    given), scale the rest."""
    if isinstance(scalings, np.ndarray):
        return V.astype(scalings.dtype, copy=False) @ scalings
    chol, reflectors, inside_map, outside_scale = scalings
    if chol is not None:
        V = linalg.solve_triangular(chol, V.T, lower=True,
                                     check_finite=False).T
    coordinates = _reflect(reflectors, V)
    if inside_map is None:  # (the Gram solver's A = L^-T Q)
        return coordinates
    n = inside_map.shape[0]
    return _map_span(coordinates[:, :n], coordinates[:, n:], inside_map,
                     outside_scale)


def _map_span(inside, outside, inside_map, outside_scale):
    """The span solver's whitened rows from their coordinates in the span and
    outside it."""
    return np.hstack([inside @ inside_map, outside * outside_scale])

