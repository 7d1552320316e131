"""Fault injection for tests: crash points inside a worker and an in-process "kill -9".

(The broker fault proxy is test support: ``tests/support/fault_proxy.py``.)

The worker consults ``worker.faults`` (None unless a test passes a :class:`FaultInjector`, so a
production worker pays one ``is not None`` check per point) at named points:

``before_record``                  a task took a record (exactly_once), before the agent sees it
``after_produce_before_commit``    records/changelogs are sent (flushed, or in the open transaction),
                                   offsets not committed yet
``after_commit_before_checkpoint`` offsets committed, stores and checkpoints not written yet
``mid_restore``                    after a changelog batch was written into a store during restore
``rebalance_revoked`` / ``rebalance_assigned``   inside the rebalance listener
and apps under test may call ``faults.check("in_agent")`` themselves (mid-record, between sends).

When the chosen point is hit, the injector calls ``on_fire`` (the test abandons the worker right
there: :func:`abandon`) and raises :class:`InjectedCrash`, a BaseException, so no error policy or
``except Exception`` in the worker can swallow it and carry on as if nothing happened.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .worker.worker import Worker

log = logging.getLogger("agentstream.faults")

__all__ = ["CRASH_POINTS", "FaultInjector", "InjectedCrash", "FailingCall", "abandon"]

CRASH_POINTS = (
    "before_record",
    "in_agent",
    "after_produce_before_commit",
    "after_commit_before_checkpoint",
    "mid_restore",
    "rebalance_revoked",
    "rebalance_assigned",
)


class InjectedCrash(BaseException):
    """The process 'died' at a crash point (BaseException: nothing may handle it and go on)."""


class FaultInjector:
    """Crash at the ``nth`` time ``point`` is reached (or never, when ``point`` is None)."""

    def __init__(self, point: str | None = None, nth: int = 1, on_fire: Callable[[str], None] | None = None) -> None:
        if point is not None and point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}; use one of {', '.join(CRASH_POINTS)}")
        self.point = point
        self.nth = nth
        self.on_fire = on_fire
        self.hits: collections.Counter[str] = collections.Counter()
        self.fired: str | None = None
        self.fired_event = asyncio.Event()

    def check(self, point: str) -> None:
        """Called by the worker at ``point``; raises InjectedCrash when this is the chosen hit."""
        self.hits[point] += 1
        if self.fired is not None:
            raise InjectedCrash(f"worker already crashed at {self.fired}")  # a dead worker does nothing more
        if point == self.point and self.hits[point] == self.nth:
            self.fired = f"{point}#{self.nth}"
            log.info("injected crash at %s", self.fired)
            self.fired_event.set()
            if self.on_fire is not None:
                self.on_fire(point)
            raise InjectedCrash(self.fired)


class FailingCall:
    """Make the ``nth`` call of ``cls.method`` (an async client method: ``MemoryProducer.flush``,
    ``MemoryConsumer.commit``...) raise ``exc_type`` while the ``with`` block runs.

    Unlike a crash point, the worker sees an ordinary failure and must handle it itself (stop
    without committing past it, abort the transaction...); the test then checks the outcome.
    """

    def __init__(self, cls: type, method: str, exc_type: type[BaseException], nth: int = 1) -> None:
        self.cls = cls
        self.method = method
        self.exc_type = exc_type
        self.nth = nth
        self.calls = 0
        self.fired = False
        self._real: Any = None

    def __enter__(self) -> FailingCall:
        real = self._real = getattr(self.cls, self.method)
        failing_call = self

        async def failing(*args: Any, **kwargs: Any) -> Any:
            failing_call.calls += 1
            if failing_call.calls == failing_call.nth:
                failing_call.fired = True
                raise failing_call.exc_type(f"injected failure of {failing_call.method} #{failing_call.nth}")
            return await real(*args, **kwargs)

        setattr(self.cls, self.method, failing)
        return self

    def __exit__(self, *exc: Any) -> None:
        setattr(self.cls, self.method, self._real)


def _run_sync(coro: Any) -> None:
    """Run a coroutine that never suspends (the memory transport's stop) to completion, now."""
    try:
        coro.send(None)
    except StopIteration:
        return
    coro.close()
    raise RuntimeError("coroutine suspended; it cannot be run synchronously")


def abandon(worker: Worker) -> list[asyncio.Future[Any]]:
    """In-process kill -9 of a worker on the memory transport, synchronously.

    Every asyncio task of the worker is cancelled, its group consumer leaves the group without
    calling the rebalance listener or committing, and nothing is flushed or closed: producers,
    open transactions and stores are left as they are (the test then drops the App with its
    stores and starts a new one on the same memory broker, like a restarted process).
    Returns the worker's tasks (cancelled, or dying of InjectedCrash) for the test to reap.
    """
    worker.request_stop()
    tasks: list[asyncio.Future[Any]] = list(worker._background)
    for extra in (worker._fetch_task, worker._starting):
        if extra is not None:
            tasks.append(extra)
    for task in worker.tasks.values():
        tasks.extend(task._instances)
    tables = worker.tables
    if tables is not None and tables._follower is not None:
        tasks.append(tables._follower)
    current = asyncio.current_task()
    for t in tasks:
        if t is not current:
            t.cancel()
    if current is not None:
        tasks.append(current)
    consumer = worker.consumer
    if consumer is not None:
        if hasattr(consumer, "_listener"):
            consumer._listener = None  # a dead process answers no rebalance callback
        _run_sync(consumer.stop())
    for c in (getattr(tables, "_restore_consumer", None), getattr(tables, "_follow_consumer", None)):
        if c is not None:
            _run_sync(c.stop())
    return tasks
