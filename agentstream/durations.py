"""Durations as the API takes them: seconds (int or float) or a :class:`datetime.timedelta`.

One conversion for every place that accepts a duration (timers, windows, joins, services,
``take(within=)``, Faust's settings), so they all read a timedelta the same way.
"""

from __future__ import annotations

from datetime import timedelta

__all__ = ["Seconds", "to_seconds"]

Seconds = float | int | timedelta
"""A duration: seconds, or a timedelta."""


def to_seconds(value: Seconds) -> float:
    """Seconds as a float from a number or a timedelta."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
