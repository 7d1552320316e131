"""Faust's app signals (``@app.on_partitions_assigned.connect``): a named list of receivers.

A signal is a declaration: the App holds the receivers (user code), the worker sends it at the
moment the name says (:mod:`agentstream.worker.hooks`). Receivers are called as Faust calls them,
``receiver(sender, *args, signal=signal, **kwargs)``; an exception in a receiver is logged and
does not stop the worker (a hook must not lose records).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["Signal", "SyncSignal", "APP_SIGNALS"]

APP_SIGNALS = {
    # name -> sync? (Faust's SyncSignal vs Signal)
    "on_before_configured": True,
    "on_configured": True,
    "on_after_configured": True,
    "on_worker_init": True,
    "on_produce_message": True,
    "on_partitions_assigned": False,
    "on_partitions_revoked": False,
    "on_rebalance_start": True,
    "on_rebalance_complete": False,
    "on_rebalance_return": True,
    "on_before_shutdown": False,
}


class _BaseSignal:
    def __init__(self, name: str, owner: Any = None) -> None:
        self.name = name
        self.owner = owner
        self.receivers: list[Callable[..., Any]] = []
        self.on_change: Callable[[], None] | None = None  # told when a receiver comes or goes

    def connect(self, fun: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
        """Add a receiver; usable as ``@signal.connect`` and ``@signal.connect()``."""

        def _add(f: Callable[..., Any]) -> Callable[..., Any]:
            if f not in self.receivers:
                self.receivers.append(f)
                if self.on_change is not None:
                    self.on_change()
            return f

        return _add(fun) if fun is not None else _add

    def disconnect(self, fun: Callable[..., Any], **kwargs: Any) -> None:
        if fun in self.receivers:
            self.receivers.remove(fun)
            if self.on_change is not None:
                self.on_change()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} receivers={len(self.receivers)}>"


class Signal(_BaseSignal):
    """An async signal: ``await signal.send(sender, ...)`` awaits each receiver in turn."""

    async def send(self, sender: Any = None, *args: Any, **kwargs: Any) -> None:
        sender = self.owner if sender is None else sender
        for fun in list(self.receivers):
            try:
                res = fun(sender, *args, signal=self, **kwargs)
                if inspect.isawaitable(res):
                    await res
            except Exception as exc:
                log.exception("receiver %r of signal %s raised: %s", fun, self.name, exc)


class SyncSignal(_BaseSignal):
    """A signal whose receivers are plain functions (``signal.send(sender, ...)``, not awaited)."""

    def send(self, sender: Any = None, *args: Any, **kwargs: Any) -> None:
        sender = self.owner if sender is None else sender
        for fun in list(self.receivers):
            try:
                fun(sender, *args, signal=self, **kwargs)
            except Exception as exc:
                log.exception("receiver %r of signal %s raised: %s", fun, self.name, exc)


def app_signals(owner: Any) -> dict[str, Signal | SyncSignal]:
    return {name: (SyncSignal if sync else Signal)(name, owner) for name, sync in APP_SIGNALS.items()}
