"""RanPAC: a frozen random ReLU projection and a ridge classifier on it."""

from numbers import Integral, Real

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from .._core import group_sums
from ._base import OpenWorldBaseline
from ._docstrings import fill_doc

__all__ = ["RanPACClassifier"]

# The ridge strengths alpha="auto" chooses from (RanPAC's grid).
ALPHAS = 10.0 ** np.arange(-8, 9)
# Every HELD_OUT_EVERY-th row of a class, from its second, is held out.
HELD_OUT_EVERY = 5


@fill_doc
class RanPACClassifier(OpenWorldBaseline):
    """Ridge classifier on a frozen random ReLU projection (RanPAC).

    Rows are projected once, ``h = max(x W, 0)`` with a fixed ``W`` of shape
    (n_features, ``n_components``) drawn from N(0, 1). The ridge weights of
    one-hot targets, ``B = (G + alpha I)^-1 Q``, need only the Gram matrix
    ``G = sum h h^T`` and the per-class sums ``Q[:, n] = sum_{i in n} h_i``.
    A row gets the class of the largest output ``f_n(x) = h^T B[:, n]``; its
    novelty score is ``1 - max_n f_n(x)`` (the targets are 1 for the class
    and 0 for the others).

    Parameters
    ----------
    n_components : int, default=1024
        ``M``, the projection's width (the paper's 10000; the cost of a
        prediction after learning grows as ``M^3``).
    alpha : "auto" or float > 0, default="auto"
        Ridge strength. "auto" chooses it from ``10^-8 ... 10^8`` by the
        squared error of a ridge fitted on the other rows on the held-out
        rows: the second, seventh, ... row of each class (1.0 while no row
        is held out).
    random_state : int, RandomState instance or None, default=None
        Seeds ``W``, drawn when the state starts.
    %(threshold)s
    %(novel_label)s

    Attributes
    ----------
    projection_ : ndarray of shape (n_features, n_components)
        The random projection ``W``.
    alpha_ : float
        The ridge strength in use.
    coef_ : ndarray of shape (n_components, n_classes)
        The ridge weights ``B``.
    %(classes_)s
    %(fitted_)s

    Notes
    -----
    %(score_notes)s It is 1 while no class exists.

    %(exact_online)s: the state is ``G`` and ``Q`` of the fitting rows and of
    the held-out rows, and each class's row count (which decides whether its
    next row is held out), all sums. ``alpha`` and ``B`` are computed from
    them at each prediction: O(M^3), once per row in a stream.

    References
    ----------
    .. [1] M. D. McDonnell, D. Gong, A. Parvaneh, E. Abbasnejad and A. van den
       Hengel, "RanPAC: Random Projections and Pre-trained Models for
       Continual Learning", NeurIPS, 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_flowr.baselines import RanPACClassifier
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> ranpac = RanPACClassifier(n_components=64, alpha=0.1, random_state=0)
    >>> ranpac.fit(X, [0, 0, 1, 1]).predict([[1.0, 0.05], [0.05, 1.0]])
    array([0, 1])
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "alpha": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "threshold": [Interval(Real, None, None, closed="neither"), None],
        "novel_label": "no_validation",
    }

    def __init__(self, *, n_components=1024, alpha="auto", random_state=None,
                 threshold=None, novel_label="auto"):
        self.n_components = n_components
        self.alpha = alpha
        self.random_state = random_state
        self.threshold = threshold
        self.novel_label = novel_label

    def _start(self, X, y_index, labels, *, fitting):
        width = self.n_components
        self.projection_ = check_random_state(self.random_state).standard_normal(
            (X.shape[1], width))
        self._gram = np.zeros((2, width, width))  # fitting rows, held-out rows
        self._sums = np.zeros((2, 0, width))
        self._counts = np.zeros(0)

    def _learn(self, X, index):
        H = np.maximum(X @ self.projection_, 0.0)
        counts = np.r_[self._counts, np.zeros(self.n_classes_ - len(self._counts))]
        held = np.empty(index.shape[0], dtype=np.intp)
        for row, n in enumerate(index):
            held[row] = counts[n] % HELD_OUT_EVERY == 1
            counts[n] += 1
        sums = np.zeros((2, counts.shape[0], H.shape[1]))
        sums[:, : self._sums.shape[1]] = self._sums
        gram = self._gram.copy()  # replaced, never written in place
        for fold in (0, 1):
            rows = held == fold
            if rows.any():
                classes, fold_sums, _ = group_sums(H[rows], index[rows])
                sums[fold, classes] += fold_sums
                gram[fold] += H[rows].T @ H[rows]
        self._gram, self._sums, self._counts = gram, sums, counts

    def _score(self, X):
        present = np.flatnonzero(self._counts)
        if present.shape[0] == 0:
            return np.full(X.shape[0], -1, dtype=np.intp), np.ones(X.shape[0])
        outputs = np.maximum(X @ self.projection_, 0.0) @ self._coef(present)
        best = np.argmax(outputs, axis=1)
        return present[best], 1.0 - outputs[np.arange(X.shape[0]), best]

    @property
    def alpha_(self):
        self._fitted("alpha_")
        return self._alpha(np.flatnonzero(self._counts))

    @property
    def coef_(self):
        coef = np.zeros((self.n_components, self._fitted("coef_").n_classes_))
        present = np.flatnonzero(self._counts)
        coef[:, present] = self._coef(present)
        return coef

    def _alpha(self, present):
        """The ridge strength in use, from the classes ``present`` (with rows)."""
        if self.alpha != "auto":
            return float(self.alpha)
        fit_gram, held_gram = self._gram
        fit_sums, held_sums = self._sums[:, present]
        if not held_gram.any():
            return 1.0
        # Held-out squared error sum ||y - B^T h||^2 (less its constant
        # sum ||y||^2) of B = (G_fit + a I)^-1 Q_fit, in G_fit's eigenbasis.
        values, vectors = np.linalg.eigh(fit_gram)
        fit_q, held_q = vectors.T @ fit_sums.T, vectors.T @ held_sums.T
        held_gram = vectors.T @ held_gram @ vectors
        errors = []
        for alpha in ALPHAS:
            coef = fit_q / (np.maximum(values, 0.0) + alpha)[:, None]
            errors.append(np.sum(coef * (held_gram @ coef)) - 2 * np.sum(coef * held_q))
        return float(ALPHAS[np.argmin(errors)])

    def _coef(self, present):
        """Ridge weights ``B`` of the classes ``present``, (M, n_present)."""
        gram = self._gram.sum(axis=0)
        gram.flat[:: gram.shape[0] + 1] += self._alpha(present)
        return cho_solve(cho_factor(gram), self._sums[:, present].sum(axis=0).T)
