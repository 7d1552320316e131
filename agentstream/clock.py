"""The clock the runtime reads: real time in a worker, virtual time in the test harness.

Everything in agentstream that waits for, or compares against, the passing of time asks the app's
clock rather than :mod:`time` / :func:`asyncio.sleep`: timers, crontabs, the commit interval,
window expiry and table cleanup, ``take(within=)``, ``max_task_idle``, agent restarts, request
timeouts and status sampling. A worker gets :data:`REAL_CLOCK`. ``AppHarness(app, virtual_time=True)``
gives the app a :class:`VirtualClock`: time stands still until the test calls ``advance()``, which
wakes every sleeper that falls due, in deadline order (Kafka Streams' TopologyTestDriver and its
``advanceWallClockTime``).

The per-record path never reads the clock (stream time comes from record timestamps), so the real
clock costs nothing there. It sits at the bottom of the layers, beside the runtime context: the app
declares, the clock is set per app by whoever runs it (:func:`use_clock`) and read with
:func:`clock_for`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import weakref
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

__all__ = ["Clock", "VirtualClock", "REAL_CLOCK", "VIRTUAL_EPOCH", "clock_for", "use_clock"]

T = TypeVar("T")

VIRTUAL_EPOCH: Final = 1_704_067_200.0
"""Where virtual time starts: 2024-01-01T00:00:00Z (a Monday), so tests read the same times on every run."""


class Clock:
    """Real time. Subclass to change what the runtime sees as "now" and how it waits."""

    virtual = False

    def time(self) -> float:
        """Wall-clock time, seconds since the epoch (what record timestamps are compared with)."""
        return time.time()

    def monotonic(self) -> float:
        """A clock for intervals and deadlines (never goes back)."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait_for(self, aw: Awaitable[T], timeout: float | None) -> T:
        """``aw``'s result, or :class:`TimeoutError` once ``timeout`` seconds of this clock passed
        (``aw`` is then cancelled), as :func:`asyncio.wait_for`."""
        return await asyncio.wait_for(aw, timeout)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.time():.3f}>"


REAL_CLOCK: Final = Clock()


class VirtualClock(Clock):
    """Time that moves only when told (:meth:`advance_to`): sleepers wake in deadline order.

    ``activity`` counts every sleep begun and every sleeper woken, so a driver can tell when the
    app has gone quiet (nothing new began waiting since it last looked)."""

    virtual = True

    def __init__(self, start: float = VIRTUAL_EPOCH) -> None:
        self._now = float(start)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()  # FIFO among equal deadlines: the same run, the same order
        self.activity = 0

    def time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._now

    def _timer(self, seconds: float) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + max(seconds, 0.0), next(self._order), fut))
        self.activity += 1
        return fut

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut = self._timer(seconds)
        try:
            await fut
        finally:
            fut.cancel()  # a cancelled sleep leaves a dead entry, dropped by next_deadline()

    async def wait_for(self, aw: Awaitable[T], timeout: float | None) -> T:
        if timeout is None:
            return await aw
        task = asyncio.ensure_future(aw)
        if timeout <= 0 and not task.done():
            await asyncio.sleep(0)  # as asyncio.wait_for(aw, 0): one chance to finish
        if not task.done() and timeout > 0:
            timer = self._timer(timeout)
            try:
                waiting: set[asyncio.Future[Any]] = {task, timer}
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:
                task.cancel()
                raise
            finally:
                timer.cancel()
        if task.done():
            return task.result()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        else:
            return task.result()  # finished while being cancelled: its result stands
        raise TimeoutError

    def next_deadline(self) -> float | None:
        """When the earliest live sleeper is due (None: nothing waits on time)."""
        sleepers = self._sleepers
        while sleepers and sleepers[0][2].done():
            heapq.heappop(sleepers)
        return sleepers[0][0] if sleepers else None

    def advance_to(self, when: float) -> int:
        """Set the time to ``when`` (never backwards) and wake every sleeper due by then, earliest
        first; returns how many woke. Woken tasks run when the caller next yields to the loop."""
        if when > self._now:
            self._now = float(when)
        woken = 0
        sleepers = self._sleepers
        while sleepers and sleepers[0][0] <= self._now:
            fut = heapq.heappop(sleepers)[2]
            if not fut.done():
                fut.set_result(None)
                woken += 1
        self.activity += woken
        return woken

    def __repr__(self) -> str:
        return f"<VirtualClock {self._now:.3f} sleepers={len(self._sleepers)}>"


_clocks: Final[weakref.WeakKeyDictionary[Any, Clock]] = weakref.WeakKeyDictionary()


def clock_for(app: Any) -> Clock:
    """The clock ``app`` runs on: :data:`REAL_CLOCK` unless :func:`use_clock` set another."""
    return _clocks.get(app, REAL_CLOCK)


def use_clock(app: Any, clock: Clock | None) -> None:
    """Run ``app`` on ``clock`` from now on (None: back to real time). Set it before the worker starts."""
    if clock is None or clock is REAL_CLOCK:
        _clocks.pop(app, None)
    else:
        _clocks[app] = clock
