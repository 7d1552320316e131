"""``faust.utils``: the helpers Faust apps import from it."""

from __future__ import annotations

import uuid as _uuid

__all__ = ["uuid"]


def uuid() -> str:
    """Faust's ``faust.uuid()``: a new random UUID as a string."""
    return str(_uuid.uuid4())
