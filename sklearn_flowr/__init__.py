"""Few-shot open-world recognition (FLOWR) for scikit-learn.

The package follows the layout of its architecture: ``_core`` holds the Bayesian
maths (written once against the array API so it serves NumPy and torch),
``CRPGaussianClassifier`` is the head on feature vectors, ``metrics`` and
``model_selection`` carry the evaluation science, ``encoders`` and
``training`` the torch half, and ``FLOWRClassifier`` puts them together.
"""

from .head import CRPGaussianClassifier, WhitenedCRPClassifier
from .saving import load, save

__version__ = "0.1.0.dev0"

__all__ = ["CRPGaussianClassifier", "FLOWRClassifier", "WhitenedCRPClassifier",
           "__version__", "load", "save"]


def __dir__():
    # FLOWRClassifier loads on demand (below); list it for tab-completion.
    return sorted([*globals(), "FLOWRClassifier"])


def __getattr__(name):
    # torch loads only when FLOWRClassifier is asked for: the head, metrics,
    # protocol and baselines run on NumPy, and joblib workers that evaluate
    # tasks on cached features then start in a fraction of the time.
    if name == "FLOWRClassifier":
        from ._flowr import FLOWRClassifier

        return FLOWRClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
