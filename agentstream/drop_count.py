"""Counting what a stream drops or sets aside (late records, records too far ahead of the wall clock,
buffered values spilled from memory) and summing it up in one WARNING at most every
:data:`WARN_EVERY` seconds: a burst of bad input logs a line, not a line a record, and the totals
stay readable (``/tables``, the harness)."""

from __future__ import annotations

import time

__all__ = ["WARN_EVERY", "DropCount"]

WARN_EVERY = 10.0


class DropCount:
    """A running total, and how much of it no warning has reported yet."""

    __slots__ = ("total", "_unreported", "_last_report", "every")

    def __init__(self, every: float = WARN_EVERY) -> None:
        self.total = 0
        self._unreported = 0
        self._last_report = float("-inf")
        self.every = every

    def add(self, n: int = 1) -> int:
        """Count ``n``. Returns how many to report now (all since the last report) when a warning is
        due, else 0: the caller logs that number and :attr:`total`."""
        self.total += n
        self._unreported += n
        now = time.monotonic()
        if n <= 0 or now - self._last_report < self.every:
            return 0
        reported = self._unreported
        self._unreported = 0
        self._last_report = now
        return reported
