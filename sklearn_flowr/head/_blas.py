"""SciPy's BLAS on one thread while the whitener runs LAPACK beside NumPy.

NumPy's and SciPy's wheels each bring their own OpenBLAS. After a call, an
OpenBLAS pool's idle threads keep spinning for a while; when the whitener
alternates NumPy products with SciPy's Cholesky, triangular solves and
Householder products, the two pools take the same cores from each other.
With SciPy's pool on one thread there is nothing to take: NumPy's products
keep their threads.
"""

import contextlib
import functools
import os

import scipy
from threadpoolctl import ThreadpoolController

__all__ = ["scipy_blas_on_one_thread"]


@functools.cache
def _scipy_own_blas():
    """threadpoolctl's controller of the BLAS libraries SciPy's wheel ships
    (in ``scipy.libs`` beside the package, or ``scipy/.dylibs``) when another
    BLAS is loaded too; None when SciPy shares one (conda, a system OpenBLAS)."""
    root = os.path.realpath(os.path.dirname(scipy.__file__))
    wheel_folders = {root + ".libs", os.path.join(root, ".dylibs")}
    blas = ThreadpoolController().select(user_api="blas")
    own = [lib.filepath for lib in blas.lib_controllers
           if os.path.dirname(os.path.realpath(lib.filepath)) in wheel_folders]
    if not own or len(own) == len(blas.lib_controllers):
        return None
    return blas.select(filepath=own)


@contextlib.contextmanager
def scipy_blas_on_one_thread():
    """Run the block with SciPy's own BLAS limited to one thread (no change
    when SciPy and NumPy share a BLAS); the limit is restored after it.

    The limit is process-wide, as threadpoolctl's are: blocks run from
    several threads at once may not hold it (only speed depends on it).
    """
    own = _scipy_own_blas()
    if own is None:
        yield
        return
    with own.limit(limits=1):
        yield
