"""Array-API namespace lookup with a shortcut for plain NumPy arrays."""

import numpy as np
from array_api_compat import array_namespace
from array_api_compat import numpy as numpy_namespace

# NumPy 2 is an array-API namespace itself; its functions skip the wrappers of
# ``array_api_compat.numpy`` (a microsecond each, which the head's one-row
# steps pay a dozen times). Older NumPy needs the wrappers.
_NUMPY = np if int(np.__version__.split(".", 1)[0]) >= 2 else numpy_namespace


def get_namespace(*arrays):
    """The array-API namespace of ``arrays`` (NumPy itself for plain ndarrays)."""
    if all(type(array) is np.ndarray for array in arrays):
        return _NUMPY
    return array_namespace(*arrays)
