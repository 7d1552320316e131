"""``on_window_close`` of the windowed and session tables, written once for both.

Called once per closed window with ``((key, (start, end)), value)``, as Faust does. An ``async``
callback runs as a task the commit waits for (:attr:`WindowCloseCalls.pending`: its effects belong to
the commit of the record that closed the window); one that raises is logged and counted, and never
undoes or skips that record.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["WindowCloseCalls"]

log = logging.getLogger(__name__)


class WindowCloseCalls:
    """One table's ``on_window_close``: the calls in flight and the failures."""

    def __init__(self, table_name: str, callback: Callable[[Any, Any], Any] | None, what: str = "window") -> None:
        self.callback = callback
        self.pending: set[asyncio.Future[Any]] = set()
        self.errors = 0  # calls that raised (each logged)
        self._table_name = table_name
        self._what = what  # "window" or "session": the log line's word

    def run(self, closed: Iterable[tuple[Any, Any]]) -> None:
        """Call the callback for each ``(window key, value)`` of ``closed``."""
        callback = self.callback
        if callback is None:
            return
        for window_key, value in closed:
            try:
                result = callback(window_key, value)
            except Exception as exc:
                self._failed(window_key, exc)
                continue
            if inspect.isawaitable(result):
                self._track(result, window_key)

    def _failed(self, window_key: Any, exc: BaseException) -> None:
        self.errors += 1
        what = self._what
        log.error(
            "table %s: on_window_close raised for key %r %s %r (the record that closed the %s is counted; the %s is "
            "removed): %r",
            self._table_name,
            window_key[0],
            what,
            window_key[1],
            what,
            what,
            exc,
            exc_info=exc,
        )

    def _track(self, result: Awaitable[Any], window_key: Any) -> None:
        future = asyncio.ensure_future(result)
        self.pending.add(future)

        def done(f: asyncio.Future[Any]) -> None:
            self.pending.discard(f)
            if not f.cancelled() and f.exception() is not None:
                self._failed(window_key, f.exception())  # type: ignore[arg-type]

        future.add_done_callback(done)
