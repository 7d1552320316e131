"""The runners behind ``@app.crontab``, ``@app.task(on_leader=True)`` and ``@app.service``.

Each declaration becomes one ``async def run()`` the worker starts with its other startup tasks
(and cancels when it stops). They are kept out of :mod:`agentstream.app` so the App stays a
registry: it stores the runner, the worker runs it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import crontab as _cron
from .clock import clock_for

if TYPE_CHECKING:
    from .types import AppT as App  # the App's interface: app.py imports this module

log = logging.getLogger(__name__)

__all__ = ["leader_task", "crontab_runner", "service_runner"]


def _is_leader(app: App) -> bool:
    """``app.is_leader()``: what the app's leader assignor says (the LeaderAssignor setting)."""
    return app.is_leader()


async def _call(fun: Callable[..., Any], app: App) -> None:
    """``fun()`` or ``fun(app)`` (Faust passes the app to one-argument timers and tasks)."""
    args = (app,) if len(inspect.signature(fun).parameters) == 1 else ()
    res = fun(*args)
    if inspect.isawaitable(res):
        await res


def leader_task(app: App, fun: Callable[..., Any]) -> Callable[[], Awaitable[None]]:
    """``@app.task(on_leader=True)``: runs once the first assignment made this worker the leader."""

    async def run() -> None:
        worker = app.worker
        if worker is not None:
            await worker.assigned.wait()
        if _is_leader(app):
            await _call(fun, app)

    run.__name__ = getattr(fun, "__name__", "task")
    return run


def crontab_runner(
    app: App, fun: Callable[..., Any], schedule: _cron.CronSchedule, timezone: Any, on_leader: bool
) -> Callable[[], Awaitable[None]]:
    """Sleep until the next fire time, call ``fun``, repeat (a failing call is logged, not fatal)."""
    name = getattr(fun, "__qualname__", repr(fun))

    async def run() -> None:
        zone = app.settings.timezone if timezone is None else timezone  # Faust: the app's timezone setting
        while True:
            clock = clock_for(app)
            now = datetime.fromtimestamp(clock.time(), UTC)
            # Real sleeps may end a hair early (and so fire twice in one minute): wake 1 ms late.
            # A virtual clock wakes exactly at the minute.
            await clock.sleep(_cron.seconds_until(schedule, zone, now) + (0.0 if clock.virtual else 0.001))
            if on_leader and not _is_leader(app):
                continue
            try:
                await _call(fun, app)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("crontab %s (%s) raised: %s", name, schedule.expression, exc)

    run.__name__ = f"crontab {name}"
    return run


def service_runner(service: Any) -> Callable[[], Awaitable[None]]:
    """Start the service (a :class:`agentstream.Service` subclass or instance) with the worker; stop
    it when the worker stops."""

    async def run() -> None:
        instance = service() if isinstance(service, type) else service
        await instance.start()
        try:
            await asyncio.Event().wait()
        finally:
            await instance.stop()

    run.__name__ = f"service {getattr(service, '__name__', type(service).__name__)}"
    return run
