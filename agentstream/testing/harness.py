""":class:`AppHarness`: a whole app on a private memory broker inside the test's event loop.

``wait_idle()`` returns when every record sent so far has been fully handled and committed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from ..agents.test_context import read_topic, use_memory
from ..clock import REAL_CLOCK, VIRTUAL_EPOCH, Clock, VirtualClock, clock_for, use_clock
from ..transport.base import TP
from ..transport.memory import MemoryTransport
from .assertions import HarnessAssertions

if TYPE_CHECKING:
    from ..app import App

__all__ = ["AppHarness"]

VIRTUAL_COMMIT_INTERVAL = 86_400.0  # see __aenter__: the harness commits when the app settles
SETTLE_ROUNDS = 10_000
QUIET_TURNS = 4  # event-loop turns a woken task gets before the harness looks again


class AppHarness(HarnessAssertions):
    """Run a whole app on a private memory broker inside the test's event loop."""

    def __init__(
        self,
        app: App,
        *,
        virtual_time: bool = False,
        start: float = VIRTUAL_EPOCH,
        seed: int = 0,
        **settings: Any,
    ) -> None:
        """``virtual_time=True``: the app runs on a :class:`~agentstream.clock.VirtualClock` starting at
        ``start`` (epoch seconds; 2024-01-01T00:00:00Z by default) that moves only by :meth:`advance`.
        ``seed``: where the ids the runtime would draw at random (request/reply) start, so a run
        repeats exactly. ``settings``: the app's settings for this run."""
        self.app = app
        self.seed = seed
        self.settings = settings
        self.clock: Clock = VirtualClock(start) if virtual_time else REAL_CLOCK
        self.worker: Any = None
        self.web: Any = None  # the app's web server (agentstream.web.Web) while it runs
        self._saved: tuple[Any, Any] | None = None
        self._saved_clock: Clock | None = None

    @property
    def virtual_time(self) -> bool:
        return isinstance(self.clock, VirtualClock)

    async def __aenter__(self) -> AppHarness:
        from ..web import serve
        from ..worker.worker import Worker

        self._saved = use_memory(self.app, f"app-test-{uuid.uuid4().hex[:8]}")
        self._saved_clock = clock_for(self.app)
        use_clock(self.app, self.clock)
        self.transport.broker.clock = self.clock
        changes: dict[str, Any] = {"commit_interval": 0.05, "web_port": 0}  # web: a free port (web_enabled=False: none)
        if self.virtual_time:
            # wait_idle() commits whenever the app settles (as TopologyTestDriver commits after each
            # record); a periodic commit would only add a wake-up per interval of virtual time.
            # No web server unless asked for: it samples the status every virtual second.
            changes.update(commit_interval=VIRTUAL_COMMIT_INTERVAL, web_enabled=False)
        try:
            self.app.settings = self.app.settings.replace(**{**changes, **self.settings})
            self._start_recording()  # yields, sends, dead letters: HarnessAssertions
            self.worker = Worker(self.app)
            self.web = serve(self.worker)  # beside the worker, as the CLI runs it (None: web_enabled=False)
            await self.worker.start()
            await asyncio.wait_for(self.worker.assigned.wait(), 10)
            if self.virtual_time:
                await self.settle()
        except BaseException:
            await self.__aexit__(None, None, None)  # the app gets its settings, transport and clock back
            raise
        return self

    @property
    def transport(self) -> MemoryTransport:
        transport = self.app.transport
        assert isinstance(transport, MemoryTransport)
        return transport

    # -- time ---------------------------------------------------------------------------------------
    def now(self) -> float:
        """The app's current time, epoch seconds (fixed until :meth:`advance` under virtual time)."""
        return self.clock.time()

    async def advance(self, seconds: float) -> None:
        """Move virtual time ``seconds`` ahead: every timer, cron tick, window close, idle timeout and
        ``take(within=)`` deadline that falls due runs, in time order, each with the clock reading
        its own due time; returns when the app is idle again at the new time."""
        clock = self._virtual()
        if seconds < 0:
            raise ValueError(f"advance({seconds}): time only moves forward")
        target = clock.time() + seconds
        await self.settle()
        while True:
            due = clock.next_deadline()
            if due is None or due > target:
                break
            clock.advance_to(due)
            await self.settle()
        clock.advance_to(target)
        await self.settle()

    async def advance_to(self, when: float) -> None:
        """:meth:`advance` to an absolute time (epoch seconds)."""
        await self.advance(max(0.0, when - self.now()))

    def _virtual(self) -> VirtualClock:
        clock = self.clock
        if not isinstance(clock, VirtualClock):
            raise RuntimeError("advance() needs AppHarness(app, virtual_time=True)")
        return clock

    async def settle(self) -> None:
        """Until the app is idle at the current time: every record sent so far fetched, nothing
        changed over a few event-loop turns (no sleep begun or ended, no record appended, handled
        or buffered), then committed. Records an agent keeps in hand (``take(within=)``, a sleep
        inside the agent) stay uncommitted until time moves on: waiting for them would never end."""
        clock = self.clock
        before: tuple[Any, ...] | None = None
        for _ in range(SETTLE_ROUNDS):
            for _ in range(QUIET_TURNS):
                await asyncio.sleep(0)
            if self.worker.crashed is not None:
                raise self.worker.crashed
            now = (getattr(clock, "activity", 0), self.transport.broker.appended, *await self._progress())
            if now == before and now[-1]:
                readable = self._readable()
                if await self.worker.commit() and (
                    self.transport.broker.appended != now[1] or self._readable() != readable
                ):
                    before = None  # the commit wrote changelogs or sends, or ended transactions: look again
                    continue
                return
            before = now
            if not now[-1]:
                await asyncio.sleep(0.001)  # a fetch is on its way (real time, not the app's)
        raise RuntimeError(f"the app did not settle after {SETTLE_ROUNDS} rounds: does a loop sleep(0) forever?")

    async def _progress(self) -> tuple[int, int, bool]:
        """(records handled, records buffered, every source partition fetched to its end)."""
        worker = self.worker
        tasks = list(worker.tasks.values())
        handled = sum(t.processed for t in tasks)
        buffered = sum(t.group.buffered() for t in tasks)
        consumer = worker.consumer
        fetched = True
        if consumer is not None:
            ends = self.transport.end_offsets(self._source_partitions(), committed=self._read_committed)
            for tp, end in ends.items():
                if await consumer.position(tp) < end:
                    fetched = False
                    break
        return handled, buffered, fetched

    @property
    def _read_committed(self) -> bool:
        # exactly_once: the worker reads read_committed, so an open transaction's records are not
        # there to fetch until the commit ends it.
        return bool(self.app.settings.processing_guarantee == "exactly_once")

    def _readable(self) -> int:
        """How many source records the worker may read (the stable ends under exactly_once)."""
        parts = self._source_partitions()
        return sum(self.transport.end_offsets(parts, committed=self._read_committed).values())

    # -- input --------------------------------------------------------------------------------------
    async def send(
        self,
        topic: str,
        value: Any = None,
        *,
        key: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
    ) -> None:
        """Send one record as a producer would (``timestamp``: epoch seconds, default the app's now).

        Under virtual time it returns once the app has handled it (and what it caused)."""
        t = self.app.topics.get(topic) or self.app.topic(topic)
        if timestamp is None:
            timestamp = self.clock.time()
        await t.send(key=key, value=value, partition=partition, timestamp=timestamp, headers=headers)
        if self.virtual_time:
            await self.settle()

    async def wait_idle(self, timeout: float = 30.0) -> None:
        """Until every record in every source topic is handled and committed (bounded by ``timeout``
        of real time)."""
        transport = self.transport
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        consumer = self.worker.consumer

        async def caught_up() -> tuple[bool, dict[TP, int], dict[TP, int | None]]:
            # committed first, ends after: a record handled before the committed offsets were read
            # has forwarded what it caused (a through/group_by topic's record) by then, so the
            # ends count it (read the other way round, a forward in between went unseen)
            tps = self._source_partitions()
            committed = {tp: await consumer.committed(tp) for tp in tps}
            ends = transport.end_offsets(tps)
            return all((committed.get(tp) or 0) >= end for tp, end in ends.items()), ends, committed

        while True:
            if self.worker.crashed is not None:
                raise self.worker.crashed
            done, ends, committed = await caught_up()
            if done:
                return
            await self.worker.commit()
            if self.worker.crashed is not None:
                raise self.worker.crashed
            done, ends, committed = await caught_up()
            if done:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"app did not catch up: ends={ends} committed={committed}")
            await asyncio.sleep(0.001 if self.virtual_time else 0.02)

    def _source_partitions(self) -> list[TP]:
        consumer = self.worker.consumer
        return [] if consumer is None else sorted(consumer.assignment())

    def read(self, topic: str) -> list[tuple[Any, Any]]:
        return read_topic(self.app, topic)

    async def __aexit__(self, *exc: Any) -> None:
        try:
            if self.worker is not None:
                await self.worker.stop()
        finally:
            self._restore()

    def _restore(self) -> None:
        self._stop_recording()
        assert self._saved is not None
        self.app.settings, self.app._transport = self._saved
        use_clock(self.app, self._saved_clock)
