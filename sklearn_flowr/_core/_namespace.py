"""Array-API namespace lookup with a shortcut for plain NumPy arrays."""

import numpy as np
from array_api_compat import array_namespace
from array_api_compat import numpy as numpy_namespace

# NumPy 2 is an array-API namespace itself: it skips array_api_compat's
# wrappers (a microsecond each); older NumPy needs them.
_NUMPY = np if int(np.__version__.split(".", 1)[0]) >= 2 else numpy_namespace


def get_namespace(*arrays):
    """The array-API namespace of ``arrays`` (NumPy itself for plain ndarrays)."""
    if all(type(array) is np.ndarray for array in arrays):
        return _NUMPY
    return array_namespace(*arrays)
