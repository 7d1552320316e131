"""The error a value that does not fit its declared type raises, and how such values are shown."""

from __future__ import annotations

from typing import Any

__all__ = ["FieldError", "show", "type_name", "expected"]


class FieldError(ValueError):
    """Data does not fit a declared type.

    ``path`` collects the location innermost-first while the error propagates (cheap to extend);
    ``str()`` renders it outermost-first, e.g. ``customer.items[2].price: expected int, got 'x'``.
    It is a :class:`ValueError` so code using :func:`type_decoder` needs no agentstream import.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.path: list[str] = []
        super().__init__(problem)

    @property
    def location(self) -> str:
        """The path outermost-first: ``customer.items[2]``; empty when the value itself is wrong."""
        out = ""
        for part in reversed(self.path):
            out += part if part.startswith("[") or not out else "." + part
        return out

    def __str__(self) -> str:
        loc = self.location
        return f"{loc}: {self.problem}" if loc else self.problem


def show(value: Any) -> str:
    """Short repr of offending data for error messages (records can be large)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def type_name(tp: Any) -> str:
    """``int``, ``None``, ``list[int]``: a type as a user wrote it."""
    if tp is type(None):
        return "None"
    if isinstance(tp, type):
        return tp.__name__
    return str(tp).replace("typing.", "")


def expected(what: str, value: Any) -> FieldError:
    return FieldError(f"expected {what}, got {show(value)}")
