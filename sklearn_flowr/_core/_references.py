"""The FLOWR paper's reference, for the numpydoc References sections."""

FLOWR_REFERENCE = """J. Willes, J. Harrison, A. Harakeh, C. Finn, M. Pavone and
       S. Waslander, "Bayesian Embeddings for Few-Shot Open World
       Recognition", IEEE TPAMI, 2022"""


def fill_doc(fields):
    """Decorator filling the ``%(name)s`` fields of a function's or class's
    docstring, and of its methods', from the mapping ``fields``."""
    def fill(obj):
        for item in [obj, *vars(obj).values()] if isinstance(obj, type) else [obj]:
            item = getattr(item, "fn", item)  # a method behind available_if
            if "%(" in (getattr(item, "__doc__", None) or ""):
                item.__doc__ = item.__doc__ % fields
        return obj
    return fill
