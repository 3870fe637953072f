"""argparse pieces of the command-line tools: range-checked numbers,
``KEY=VALUE`` settings, and help as plain text with every default stated once."""

from __future__ import annotations

import argparse
import ast
import math
import re
import textwrap

__all__ = ["MAX_SEED", "MAX_TASKS", "HelpFormatter", "integer", "key_value",
           "literal", "plain_text", "real", "split_key_value"]

# Seeds go to numpy's RandomState and torch, which take 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1
# Every task's predictions are held in memory: more would exhaust it late.
MAX_TASKS = 10**6


def integer(low: int, high: int | None = None, *, why: str = "",
            cap: int | None = None, cap_why: str = ""):
    """An argparse ``type=`` for an integer in ``[low, high]``, at most ``cap``
    (a bound on sizes that would exhaust memory or time late in a run).

    Examples
    --------
    >>> integer(1, cap=10)("3")
    3
    >>> integer(1, cap=10)("11")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be at most 10; got 11
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected an integer; got {text!r}") from None
        if value < low or (high is not None and value > high):
            allowed = f">= {low}" if high is None else f"in {low}..{high}"
            raise argparse.ArgumentTypeError(
                f"must be an integer {allowed}{why}; got {value}")
        if cap is not None and value > cap:
            raise argparse.ArgumentTypeError(
                f"must be at most {cap}{cap_why}; got {value}")
        return value

    return parse


def real(low: float, high: float = math.inf, *, closed: bool = True):
    """An argparse ``type=`` for a finite number ``>= low`` (``> low`` when not
    ``closed``) and ``<= high``.

    Examples
    --------
    >>> real(0.0, 1.0, closed=False)("0.6")
    0.6
    >>> real(0.0, 1.0, closed=False)("1.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a finite number in (0, 1]; got 1.5
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number; got {text!r}") from None
        above = value >= low if closed else value > low
        if math.isfinite(high):
            # A bounded range is stated whole, so one message covers both ends.
            if not (math.isfinite(value) and above and value <= high):
                raise argparse.ArgumentTypeError(
                    f"must be a finite number in {'[' if closed else '('}"
                    f"{low:g}, {high:g}]; got {text}")
            return value
        if not (math.isfinite(value) and above):
            raise argparse.ArgumentTypeError(
                f"must be a finite number {'>=' if closed else '>'} {low:g}; got "
                f"{text}")
        return value

    return parse


def literal(text: str):
    """A Python literal (``ast.literal_eval``), or the text itself.

    Examples
    --------
    >>> literal("0.5"), literal("None"), literal("isotropic"), literal("'x'")
    (0.5, None, 'isotropic', 'x')
    """
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def key_value(text: str) -> str:
    """An argparse ``type=`` for ``KEY=VALUE``, kept as given (split it with
    :func:`split_key_value`)."""
    key, sep, _ = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE, e.g. head__covariance=isotropic; got {text!r}")
    return text


def split_key_value(text: str) -> tuple[str, object]:
    """``(KEY, VALUE)`` of a ``KEY=VALUE`` text, VALUE read by :func:`literal`.

    Examples
    --------
    >>> split_key_value("head__prior_scale=2")
    ('head__prior_scale', 2)
    >>> split_key_value("calibration=None")
    ('calibration', None)
    """
    key, _, value = text.partition("=")
    return key.strip(), literal(value.strip())


def plain_text(text: str) -> str:
    """``text`` without reST markup, its paragraphs refilled, for the terminal."""
    text = re.sub(r":\w+:`~?(?:[\w.]*\.)?([^`]+)`", r"\1", text)
    text = text.replace("``", "")
    return "\n\n".join(textwrap.fill(" ".join(paragraph.split()), width=79,
                                     break_on_hyphens=False)
                       for paragraph in text.strip().split("\n\n"))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Help with every default stated once (not where the text says
    ``default:``, nor for flags), lines broken at spaces only."""

    def _get_help_string(self, action):
        help_text = action.help or ""
        if ("default:" in help_text or action.default is argparse.SUPPRESS
                or action.nargs == 0):
            return help_text
        default = action.default
        if isinstance(default, (list, tuple)):
            default = " ".join(map(str, default)) or "none"
        return f"{help_text} (default: {str(default).replace('%', '%%')})"

    def _split_lines(self, text, width):
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False)
