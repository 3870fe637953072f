"""RanPAC: a frozen random ReLU projection and a ridge classifier on it."""

from numbers import Integral, Real

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from .._core import group_sums
from ._base import THRESHOLD_CONSTRAINTS, OpenWorldBaseline, fill_doc

__all__ = ["RanPACClassifier"]

ALPHAS = 10.0 ** np.arange(-8, 9)  # the ridge strengths "auto" chooses from
HELD_OUT_EVERY = 5  # every 5th row of a class, from its second, is held out


@fill_doc
class RanPACClassifier(OpenWorldBaseline):
    """Ridge classifier on a frozen random ReLU projection (RanPAC).

    Rows become ``h = max(x W, 0)``, ``W`` (n_features, M) drawn from N(0, 1);
    the ridge weights of one-hot targets are ``B = (G + alpha trace(G) / M
    I)^-1 Q``, ``G = sum h h^T``, ``Q`` the class sums. A row gets the class of
    the largest ``f_n = h^T B[:, n]``; novelty score ``1 - max_n f_n``.

    Parameters
    ----------
    n_components : int >= 1, default=1024
        ``M`` (the paper's 10000); a prediction after learning costs O(M^3).
    alpha : "auto" or float > 0, default="auto"
        Ridge strength relative to ``trace(G) / M``; "auto": from ``10^-8 ...
        10^8`` by the error on each class's 2nd, 7th, ... row (else 1.0).
    random_state : int, RandomState instance or None, default=None
        Seeds ``W``, drawn when the state starts.
    %(params)s

    Attributes
    ----------
    projection_ : ndarray of shape (n_features, n_components)
        ``W``.
    alpha_ : float
        The relative ridge strength in use.
    coef_ : ndarray of shape (n_components, n_classes)
        ``B``.
    %(attrs)s

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
    >>> ranpac = RanPACClassifier(n_components=64, random_state=0)
    >>> ranpac.fit(X, [0, 0, 1, 1]).predict([[1.0, 0.05], [0.05, 1.0]])
    array([0, 1])
    """

    _parameter_constraints: dict = {
        **THRESHOLD_CONSTRAINTS,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "alpha": [StrOptions({"auto"}), Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
    _empty_score = 1.0

    def __init__(self, *, n_components=1024, alpha="auto", random_state=None,
                 threshold=None, novel_label="auto"):
        self.n_components = n_components
        self.alpha = alpha
        self.random_state = random_state
        self.threshold = threshold
        self.novel_label = novel_label

    def _start(self, X, y_index, labels, *, fitting):
        self.projection_ = check_random_state(self.random_state).standard_normal(
            (X.shape[1], self.n_components))
        # G and Q of the fitting rows [0] and of the held-out rows [1].
        self._gram = np.zeros((2, self.n_components, self.n_components))
        self._sums = np.zeros((2, 0, self.n_components))
        self._counts = np.zeros(0)

    def _learn(self, X, index):
        H = np.maximum(X @ self.projection_, 0.0)
        counts = np.r_[self._counts, np.zeros(self.n_classes_ - len(self._counts))]
        held = np.empty(index.shape[0], dtype=np.intp)
        for row, n in enumerate(index):
            held[row], counts[n] = counts[n] % HELD_OUT_EVERY == 1, counts[n] + 1
        sums = np.zeros((2, counts.shape[0], H.shape[1]))
        sums[:, : self._sums.shape[1]] = self._sums
        gram = self._gram.copy()  # replaced, never written in place
        for fold in np.unique(held):
            classes, fold_sums, _ = group_sums(H[held == fold], index[held == fold])
            sums[fold, classes] += fold_sums
            gram[fold] += H[held == fold].T @ H[held == fold]
        self._gram, self._sums, self._counts = gram, sums, counts

    def _score(self, X):
        present = np.flatnonzero(self._counts)
        if present.shape[0] == 0:
            return np.full(X.shape[0], -1, dtype=np.intp), np.ones(X.shape[0])
        # Only the classes with rows: the same sums whatever else is registered.
        outputs = np.maximum(X @ self.projection_, 0.0) @ self._coef(present)
        best = np.argmax(outputs, axis=1)
        return present[best], 1.0 - outputs[np.arange(X.shape[0]), best]

    def _scaled(self, present):
        """G and Q of both folds (classes ``present``) over ``trace(G) / M``."""
        scale = np.trace(self._gram.sum(axis=0)) / self._gram.shape[1]
        scale = scale if scale > 0 else 1.0
        return self._gram / scale, self._sums[:, present] / scale

    def _alpha(self, gram, sums):
        if self.alpha != "auto":
            return float(self.alpha)
        (fit_gram, held_gram), (fit_q, held_q) = gram, sums
        if not held_gram.any():
            return 1.0
        # Held-out sum ||y - B^T h||^2 - sum ||y||^2 in the eigenbasis of G_fit.
        values, vectors = np.linalg.eigh(fit_gram)
        fit_q, held_q = vectors.T @ fit_q.T, vectors.T @ held_q.T
        held_gram = vectors.T @ held_gram @ vectors
        errors = []
        for alpha in ALPHAS:
            coef = fit_q / (np.maximum(values, 0.0) + alpha)[:, None]
            errors.append(np.sum(coef * (held_gram @ coef) - 2.0 * coef * held_q))
        return float(ALPHAS[np.argmin(errors)])

    def _coef(self, present):
        gram, sums = self._scaled(present)
        total = gram.sum(axis=0)
        total.flat[:: total.shape[0] + 1] += self._alpha(gram, sums)
        return cho_solve(cho_factor(total), sums.sum(axis=0).T)

    @property
    def alpha_(self):
        return self._alpha(*self._scaled(np.flatnonzero(
            self._fitted("alpha_")._counts)))

    @property
    def coef_(self):
        coef = np.zeros((self._gram.shape[1], self._fitted("coef_").n_classes_))
        present = np.flatnonzero(self._counts)
        coef[:, present] = self._coef(present)
        return coef
