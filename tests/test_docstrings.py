"""Tests of the house rule: every public function and class has a runnable Examples
section, and every public method is shown running, in its own Examples or in its
class's (scikit-learn's convention: the class's Examples show the usual calls).

pytest runs the examples themselves (``--doctest-modules``); this test checks
that they exist, so that a new public name cannot slip in without one.
"""

import importlib
import inspect

import skorch
import torch

PUBLIC_MODULES = [
    "sklearn_flowr",
    "sklearn_flowr.metrics",
    "sklearn_flowr.model_selection",
    "sklearn_flowr.encoders",
    "sklearn_flowr.training",
    "sklearn_flowr.protocol",
    "sklearn_flowr.baselines",
    "sklearn_flowr.datasets",
    "sklearn_flowr.cli",
]

# Framework hooks: overrides that torch or skorch call on the user's behalf,
# documented by the framework. A method of this name is exempt only on a
# subclass of the framework class that defines the hook.
FRAMEWORK_HOOKS = {
    "forward": torch.nn.Module,  # run through ``module(x)``
    "train": torch.nn.Module,  # the train/eval mode switch
    "get_loss": skorch.NeuralNet,  # called by skorch's training step
    "on_epoch_begin": skorch.NeuralNet,  # skorch's per-epoch callback
}

EXAMPLES_HEADING = "Examples\n--------"


def _has_examples(obj):
    return EXAMPLES_HEADING in (inspect.getdoc(obj) or "")


def _examples_call(cls, method_name):
    """Whether ``cls``'s own Examples section calls ``.method_name(``."""
    doc = inspect.getdoc(cls) or ""
    return f".{method_name}(" in doc.partition(EXAMPLES_HEADING)[2]


def _public_methods(cls):
    """Names and functions of the public methods defined on ``cls`` itself.

    Properties are attributes (documented in the class's Attributes section),
    not methods, and are left out.
    """
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if not inspect.isfunction(member):
            continue
        hook_base = FRAMEWORK_HOOKS.get(name)
        if hook_base is not None and issubclass(cls, hook_base):
            continue
        yield name, member


def test_public_docstrings_have_examples():
    """Check that every public function and class in the ``__all__`` of the
    public modules has a numpydoc Examples section, and that each public method
    has one or is called in its class's Examples."""
    offenders = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not callable(obj):  # __version__, IMAGE_EXTENSIONS
                continue
            qualified = f"{module_name}.{name}"
            if not _has_examples(obj):
                offenders.append(qualified)
            if inspect.isclass(obj):
                offenders.extend(
                    f"{qualified}.{method_name}"
                    for method_name, method in _public_methods(obj)
                    if not (_has_examples(method)
                            or _examples_call(obj, method_name))
                )
    assert not offenders, (
        f"{len(offenders)} public docstrings lack an 'Examples' section:\n  "
        + "\n  ".join(offenders)
    )
