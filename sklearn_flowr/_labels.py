"""Label bookkeeping shared by the head and the baselines: the novel label and
the registry of known labels."""

from numbers import Number

import numpy as np


def resolve_novel_label(novel_label, labels):
    """The label that means "novel": ``novel_label`` unless it is "auto".

    "auto" gives "novel" for string labels and, for numeric ones, -1 unless
    the labels themselves go that low (e.g. {-1, 1}), then one below them.
    """
    if not (isinstance(novel_label, str) and novel_label == "auto"):
        return novel_label
    if labels.dtype.kind not in "biuf":
        return "novel"
    value = min(-1, int(labels.min()) - 1) if labels.shape[0] else -1
    if labels.dtype.kind in "bu":  # no negative value in that dtype
        return np.int64(value)
    return labels.dtype.type(value)


def check_new_labels(labels, novel, known_labels=None):
    """Refuse labels equal to ``novel`` or of another kind than the known ones."""
    if known_labels is not None:
        numeric_known = known_labels.dtype.kind in "biuf"
        if numeric_known != (labels.dtype.kind in "biuf"):
            raise ValueError(
                f"Labels of dtype {labels.dtype} cannot join the known classes "
                f"of dtype {known_labels.dtype}: numeric and string labels "
                "cannot be mixed."
            )
    values = labels.tolist()
    if (same_label(values[0], novel) if len(values) == 1
            else any(same_label(label, novel) for label in values)):
        shown = novel.item() if isinstance(novel, np.generic) else novel
        raise ValueError(
            f"y contains the novel label {shown!r}, which is reserved for "
            "the novel class: relabel those rows, or set novel_label to a "
            "value y does not use."
        )


def label_result_dtype(labels, novel):
    """Dtype of an array holding known labels and the novel label."""
    try:
        return np.result_type(labels.dtype, np.asarray(novel).dtype)
    except TypeError:
        return object


def same_label(label, novel):
    try:
        return bool(label == novel)
    except (TypeError, ValueError):
        return False


def _first_free(k, numeric, is_taken):
    """Number ``j >= k`` and label of the first provisional label not taken."""
    j = k
    while True:
        label = -(j + 1) if numeric else f"new-{j}"
        if not is_taken(label):
            return j, label
        j += 1


def provisional_label(k: int, existing_labels) -> str | int:
    """The label of the ``k``-th class a model opens by itself.

    String labels (and no labels at all) give ``"new-k"``; numeric labels give
    the negative integer ``-(k + 1)`` (-2, -3, ...: below the default novel
    label -1 and away from the non-negative labels people use, so a label a
    user gives later is unlikely to be taken). When that label is already in
    ``existing_labels``, the next of the same sequence that is not is
    returned ("new-(k+1)", ... or -(k + 2), ...), so the result never equals
    an existing label.

    Parameters
    ----------
    k : int
        Number of the provisional class, from 1: pass one more than the
        number of provisional labels made so far.
    existing_labels : iterable
        Every label to avoid: the known classes, earlier provisional labels
        and the novel label. Numeric labels when all are numbers (and there
        is at least one), strings otherwise.

    Returns
    -------
    label : str or int
        A label equal to none of ``existing_labels``.

    Examples
    --------
    >>> from sklearn_flowr._labels import provisional_label
    >>> provisional_label(1, ["cat", "dog", "novel"])
    'new-1'
    >>> provisional_label(2, ["cat", "new-1", "new-2", "novel"])
    'new-3'
    >>> provisional_label(1, [0, 1, 2, -1])
    -2
    """
    existing = list(existing_labels)
    numeric = bool(existing) and all(
        isinstance(label, Number) and not isinstance(label, str)
        for label in existing
    )
    taken = set(existing)
    return _first_free(k, numeric, lambda label: label in taken)[1]


class LabelRegistry:
    """The known labels of an online classifier, in the order they arrived.

    Class ``i`` of the numeric state is ``labels[i]``. The buffer grows by
    doubling (a new class costs amortised O(1)) and widens its dtype when new
    labels need it (e.g. longer strings; string labels are stored as objects).

    Parameters
    ----------
    dtype : numpy dtype
        Initial dtype of the labels (numeric, or object).
    """

    def __init__(self, dtype):
        self._labels = np.empty(4, dtype=dtype)
        self._index = {}
        self.n_labels = 0

    @classmethod
    def for_labels(cls, labels):
        """An empty registry for labels like ``labels``."""
        return cls(labels.dtype if labels.dtype.kind in "biuf" else object)

    def __len__(self):
        return self.n_labels

    @property
    def labels(self):
        """The known labels, shape (n_labels,) (a view of the buffer)."""
        return self._labels[: self.n_labels]

    def label_at(self, i):
        """The label of class ``i`` (``0 <= i < n_labels``), shape (1,)."""
        return self._labels[i : i + 1].copy()

    @property
    def numeric(self):
        """Whether the labels are numbers (else strings, stored as objects)."""
        return self._labels.dtype.kind in "biuf"

    def add(self, new_labels):
        """Append labels not known yet, in the order given."""
        n_new = len(new_labels)
        if n_new == 0:
            return
        dtype = np.result_type(self._labels.dtype, np.asarray(new_labels).dtype)
        stop = self.n_labels + n_new
        if dtype != self._labels.dtype or stop > self._labels.shape[0]:
            grown = np.empty(max(stop, 2 * self._labels.shape[0]), dtype=dtype)
            grown[: self.n_labels] = self.labels
            self._labels = grown
        self._labels[self.n_labels : stop] = new_labels
        for offset, label in enumerate(np.asarray(new_labels).tolist()):
            self._index[label] = self.n_labels + offset
        self.n_labels = stop

    def checkpoint(self):
        """A callable that takes the registry back to its present labels.

        Labels are only ever appended (into the buffer past ``n_labels``, or
        into a new, wider buffer), so the buffer, its length and dropping the
        index entries of later labels are all the undo needs: O(1) to take.

        Returns
        -------
        undo : callable
            Restores the registry (O(n_labels), on the error path only).

        Examples
        --------
        >>> import numpy as np
        >>> registry = LabelRegistry(np.int64)
        >>> registry.add(np.array([3, 1]))
        >>> undo = registry.checkpoint()
        >>> registry.add(np.array([7, 8, 9]))
        >>> undo()
        >>> registry.labels, sorted(registry._index)
        (array([3, 1]), [1, 3])
        """
        labels, n_labels = self._labels, self.n_labels

        def undo():
            # Entries may have been added before ``n_labels`` moved on.
            later = [key for key, i in self._index.items() if i >= n_labels]
            for key in later:
                del self._index[key]
            self._labels, self.n_labels = labels, n_labels

        return undo

    def register(self, labels):
        """Index of each of the distinct ``labels``; unknown ones are added in
        the order of ``labels``."""
        keys = labels.tolist()
        self.add(labels[[key not in self._index for key in keys]])
        return np.array([self._index[key] for key in keys], dtype=np.intp)

    def register_stream(self, labels, y_index):
        """Class index of each row of a stream, and whether it opens a class.

        Known labels keep their index; unknown ones get the next indices in
        order of first appearance in the rows, as row-by-row learning gives
        them.

        Parameters
        ----------
        labels : ndarray of shape (n_labels,)
            Distinct labels of the rows.
        y_index : ndarray of shape (n_rows,)
            Position of each row's label in ``labels``.

        Returns
        -------
        index : ndarray of shape (n_rows,)
        is_new : ndarray of shape (n_rows,) of bool
            The row is the first of a label that was not known before it.
        """
        if y_index.shape[0] == 1:  # the online hot path
            known = self._index.get(labels.tolist()[0])
            if known is None:
                self.add(labels)
            index = self.n_labels - 1 if known is None else known
            return np.array([index], dtype=np.intp), np.array([known is None])
        first_row = np.unique(y_index, return_index=True)[1]
        exists = np.array([key in self._index for key in labels.tolist()],
                          dtype=bool)
        new_first_rows = np.sort(first_row[~exists])
        index_of_label = np.empty(labels.shape[0], dtype=np.intp)
        index_of_label[exists] = [self._index[key]
                                  for key in labels[exists].tolist()]
        index_of_label[y_index[new_first_rows]] = self.n_labels + np.arange(
            new_first_rows.shape[0]
        )
        self.add(labels[y_index[new_first_rows]])
        is_new = np.zeros(y_index.shape[0], dtype=bool)
        is_new[new_first_rows] = True
        return index_of_label[y_index], is_new

    def labels_of(self, index, novel):
        """Labels of class indices, ``novel`` for ``-1``."""
        if index.shape[0] == 1 and index[0] >= 0:  # the online hot path
            return self._labels[index]
        labels = self.labels
        is_novel = index < 0
        if not is_novel.any():
            return labels[index]
        out = np.empty(index.shape[0], dtype=label_result_dtype(labels, novel))
        out[~is_novel] = labels[index[~is_novel]]
        out[is_novel] = novel
        return out

    def rename(self, old, new):
        """Give the class labelled ``old`` the label ``new`` (not known yet);
        its index is kept."""
        i = self._index.pop(old)
        dtype = np.result_type(self._labels.dtype, np.asarray([new]).dtype)
        if dtype != self._labels.dtype:
            self._labels = self._labels.astype(dtype)
        self._labels[i] = new
        self._index[np.asarray([new]).tolist()[0]] = i

    def remove(self, label):
        """Forget ``label``; the labels after it move up one index."""
        i = self._index.pop(label)
        stop = self.n_labels
        self._labels[i:stop - 1] = self._labels[i + 1:stop].copy()
        self.n_labels = stop - 1
        for j, later in enumerate(self._labels[i:self.n_labels].tolist(), start=i):
            self._index[later] = j

    def index_of(self, label):
        """The class index of ``label``, or None when it is not known."""
        return self._index.get(label)

    def __getstate__(self):
        # Pickle the used labels only; the index is rebuilt from them (dict
        # keys of arbitrary label types do not travel well through skops).
        return {"_labels": self.labels.copy(), "n_labels": self.n_labels}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._index = {label: i for i, label in enumerate(self.labels.tolist())}
