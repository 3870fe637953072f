"""Few-shot open-world recognition (FLOWR) for scikit-learn.

The package follows the layout of its architecture: ``_core`` holds the Bayesian
maths (written once against the array API so it serves NumPy and torch),
``CRPGaussianClassifier`` is the head on feature vectors, ``metrics`` and
``model_selection`` carry the evaluation science, ``encoders`` and
``training`` the torch half, and ``FLOWRClassifier`` puts them together.
"""

from ._flowr import FLOWRClassifier
from ._head import CRPGaussianClassifier

__version__ = "0.1.0.dev0"

__all__ = ["CRPGaussianClassifier", "FLOWRClassifier", "__version__"]
