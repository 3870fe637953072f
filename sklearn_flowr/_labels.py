"""Label bookkeeping shared by the head and the baselines: the novel label."""

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
    if any(_same_label(label, novel) for label in labels.tolist()):
        raise ValueError(
            f"y contains the novel label {novel!r}, which is reserved for "
            "the novel class; pass another novel_label."
        )


def label_result_dtype(labels, novel):
    """Dtype of an array holding known labels and the novel label."""
    try:
        return np.result_type(labels.dtype, np.asarray(novel).dtype)
    except TypeError:
        return object


def _same_label(label, novel):
    try:
        return bool(label == novel)
    except (TypeError, ValueError):
        return False
