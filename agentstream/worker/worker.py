"""The worker process: joins the app's consumer group and runs its tasks on one event loop.

Start order (Faust's, which is right): producer -> web -> tables -> consumer -> agents (tasks),
timers; stop in reverse. Rebalances (eager) suspend everything: revoke stops the tasks after
their current record and commits; assign builds tasks for the new partition numbers, restores
their tables, then starts them. Commits follow Kafka Streams/Quix: flush table caches to the
changelog -> flush the producer -> commit offsets of fully handled records -> write checkpoints.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import time
from typing import TYPE_CHECKING, Any

from ..exceptions import CommitFailed, StopProcessing
from ..transport.base import TP, Consumer, TopicSpec
from .assignor import PartitionNumberAssignor
from .eos import CommitGate, ExactlyOnce
from .errors import ErrorPolicy
from .fetcher import Fetcher
from .partition_group import RecordQueue
from .task import StreamTask, TaskId
from .topology import Topology

if TYPE_CHECKING:
    from ..app import App
    from ..testing_faults import FaultInjector

log = logging.getLogger("agentstream.worker")

__all__ = ["Worker", "format_partitions"]


def format_partitions(tps: set[TP] | list[TP]) -> str:
    """``topic[0, 2] other[1]``: the form the assignment log lines use."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{', '.join(map(str, sorted(ps)))}]" for t, ps in sorted(by_topic.items())) or "(nothing)"


class Worker:
    """Runs one app: ``await Worker(app).run()`` until SIGTERM/SIGINT or :meth:`request_stop`."""

    def __init__(self, app: "App", *, install_signal_handlers: bool = False, web_port: int | None = None,
                 faults: "FaultInjector | None" = None) -> None:
        self.app = app
        self.faults = faults  # tests only: named crash points; None costs one check per point
        self.eos: ExactlyOnce | None = None  # set in start() under processing_guarantee='exactly_once'
        self.settings = app.settings
        self.install_signal_handlers = install_signal_handlers
        self.topology: Topology | None = None
        self.assignor = PartitionNumberAssignor(
            host=f"{self.settings.web_host}:{web_port if web_port is not None else self.settings.web_port}",
            standby_replicas=self.settings.table_standby_replicas,
        )
        self.errors = ErrorPolicy(app, self._crash)
        self.consumer: Consumer | None = None
        self.fetcher: Fetcher | None = None
        self.tasks: dict[TaskId, StreamTask] = {}
        self.tables: Any = None  # TableManager, set in start() when the app declares tables
        self.web: Any = None  # agentstream.web.Web, set in start() unless web_enabled is off
        self.web_port = web_port if web_port is not None else self.settings.web_port
        self._background: list[asyncio.Task[Any]] = []
        self._fetch_task: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._stop_requested = asyncio.Event()
        self._commit_lock = asyncio.Lock()
        self._committed: dict[TP, int] = {}
        self.crashed: BaseException | None = None
        self._stopping = False  # a rebalance during shutdown must not start (or crash) anything
        self.started = asyncio.Event()
        self.assigned = asyncio.Event()  # set after each assignment's tasks are running
        self.commits = 0
        self.last_commit = time.monotonic()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self) -> int:
        """Start, run until asked to stop (or a task crashes), stop; returns the exit code."""
        try:
            await self.start()
            await self._stop_requested.wait()
        finally:
            await self.stop()
        return 1 if self.crashed is not None else 0

    def request_stop(self) -> None:
        self._stop_requested.set()

    def _crash(self, exc: BaseException) -> None:
        if self.crashed is None:
            self.crashed = exc
        self.request_stop()

    async def start(self) -> None:
        app, s = self.app, self.settings
        if app.tables:
            s.check_data_dir()  # before connecting or joining: a bad data dir names the setting (issue 15)
        app.worker = self
        if self.install_signal_handlers:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._on_signal, sig)
        await app.discover()
        self.topology = app.topology()
        transport = app.transport
        counts = await transport.ensure_topics(self._topic_specs())
        self.topology.check_copartitioning(counts)
        if s.processing_guarantee == "exactly_once":
            self.eos = ExactlyOnce(self)
            self.eos.check_topology(self.topology)
            await self.eos.check_broker()  # refuse to start rather than silently degrade
            log.info("processing_guarantee=exactly_once: one transactional producer per task")
        log.info("topology of %s:\n%s", app.id, self.topology.describe())
        await app.start_producer()
        if s.web_enabled:  # bound before joining: the group learns the real port from the assignor
            from ..web import Web

            self.web = Web(app, self, host=s.web_host, port=self.web_port)
            await self.web.start()
            self.assignor.host = self.web.address
        if app.tables:
            from ..tables.manager import TableManager

            self.tables = TableManager(app, self)
            await self.tables.start()
        consumer = transport.consumer(group_id=app.id, assignor=self.assignor, **app.consumer_settings())
        self.consumer = consumer
        self.fetcher = Fetcher(consumer, buffer_max_records=s.buffer_max_records, max_poll_records=s.max_poll_records)
        consumer.subscribe(self.topology.source_topics, self)
        await consumer.start()
        self._fetch_task = asyncio.ensure_future(self._guard(self.fetcher.run(), "fetcher"))
        self._background.append(asyncio.ensure_future(self._guard(self._commit_loop(), "commit loop")))
        for timer in app.timers:
            self._background.append(asyncio.ensure_future(self._guard(self._run_timer(timer), f"timer {timer.name}")))
        for fun in app.startup_tasks:
            args = (app,) if len(inspect.signature(fun).parameters) == 1 else ()
            self._background.append(asyncio.ensure_future(self._guard(fun(*args), f"task {fun.__name__}")))
        self.started.set()
        log.info("worker for %s started (broker %s)", app.id, s.broker)

    def _topic_specs(self) -> list[TopicSpec]:
        specs = [t.spec() for t in self.app.topics.values()]
        for table in self.app.tables.values():
            specs.append(table.changelog_topic.spec())
        if "dead-letter" in (self.settings.on_decode_error, self.settings.on_agent_error):
            specs.append(TopicSpec(self.settings.dead_letter_topic, 1))
        seen: dict[str, TopicSpec] = {}
        for spec in specs:
            seen.setdefault(spec.name, spec)
        return list(seen.values())

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("received %s: finishing current records, committing, leaving the group", sig.name)
        self.request_stop()

    async def _guard(self, coro: Any, what: str) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("%s failed: %s", what, exc)
            self._crash(exc)

    async def stop(self) -> None:
        """Finish current records, commit, leave the group, close stores and clients."""
        self._stopping = True
        log.info("worker for %s stopping", self.app.id)
        for t in self._background:
            t.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background.clear()
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        await self._stop_tasks(list(self.tasks.values()))
        try:
            await self.commit()
        except Exception as exc:
            log.error("final commit failed: %s (records since the last commit will be handled again)", exc)
        if self.eos is not None:
            await self.eos.close_tasks(self.tasks.values())
        if self._fetch_task is not None and self.fetcher is not None:
            await self.fetcher.stop(self._fetch_task)
        if self.consumer is not None:
            await self.consumer.stop()
        self.tasks.clear()
        if self.tables is not None:
            await self.tables.stop()
        if self.web is not None:
            await self.web.stop()
            self.web = None
        await self.app.stop_clients()
        self.app.worker = None
        log.info("worker for %s stopped", self.app.id)

    # -- rebalance listener ----------------------------------------------------------------------------
    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        if self.faults is not None:
            self.faults.check("rebalance_revoked")
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
            self._starting = None
        self.assigned.clear()
        if self.fetcher is not None:
            self.fetcher.set_routes({})
        tasks = list(self.tasks.values())
        await self._stop_tasks(tasks)
        try:
            await self.commit()
        except Exception as exc:
            log.error("commit on revoke failed: %s (records since the last commit will be handled again)", exc)
        if self.eos is not None:  # eager rebalance: the next owner (maybe us) starts a new producer
            await self.eos.close_tasks(tasks)
        self.tasks.clear()
        if self.tables is not None:
            await self.tables.on_revoked()
        if revoked:
            log.info("revoked: %s", format_partitions(revoked))

    async def on_partitions_assigned(self, assigned: set[TP]) -> None:
        assert self.topology is not None and self.fetcher is not None and self.consumer is not None
        log.info("assigned: %s", format_partitions(assigned))
        if self._stopping:
            return
        if self.faults is not None:
            self.faults.check("rebalance_assigned")
        consumer = self.consumer

        def lagging(q: RecordQueue) -> bool:
            hw = consumer.highwater(q.tp)
            return hw is None or (hw > 0 if q.next_offset is None else q.next_offset < hw)

        tasks: dict[TaskId, StreamTask] = {}
        for st in self.topology.subtopologies:
            by_number: dict[int, list[TP]] = {}
            for name in st.source_topics:
                for tp in assigned:
                    if tp.topic == name:
                        by_number.setdefault(tp.partition, []).append(tp)
            for number, tps in by_number.items():
                tid = TaskId(st.id, number)
                tasks[tid] = StreamTask(
                    tid, st, tps, errors=self.errors, max_task_idle=self.settings.max_task_idle,
                    buffer_max_records=self.settings.buffer_max_records, lagging=lagging,
                    on_drained=self.fetcher.drained,
                )
                if self.eos is not None:
                    tasks[tid].gate = CommitGate()
                tasks[tid].faults = self.faults
        routes: dict[TP, list[StreamTask]] = {}
        for task in tasks.values():
            for tp in task.partitions:
                routes.setdefault(tp, []).append(task)
        self.tasks = tasks
        self._committed = {}
        self.fetcher.set_routes(routes)
        self._starting = asyncio.ensure_future(self._restore_and_start(tasks))

    async def _restore_and_start(self, tasks: dict[TaskId, StreamTask]) -> None:
        try:
            if self.eos is not None:  # before restoring: fences the old owners, aborting their transactions
                await self.eos.start_tasks(tasks.values())
            if self.tables is not None:
                await self.tables.on_assigned(self.assignor.assignment)
            for task in tasks.values():
                task.start()
            self.assigned.set()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._stopping:
                log.info("assignment not started: the worker is stopping (%s)", exc)
                return
            log.exception("could not start tasks after the assignment: %s", exc)
            self._crash(exc)

    async def _stop_tasks(self, tasks: list[StreamTask]) -> None:
        await asyncio.gather(*(t.stop(self.settings.shutdown_timeout) for t in tasks))

    # -- commit ------------------------------------------------------------------------------------------
    def committable_offsets(self) -> dict[TP, int]:
        """Per partition, the lowest offset any task reading it has not fully handled."""
        offsets: dict[TP, int] = {}
        blocked: set[TP] = set()
        routes = self.fetcher.routes if self.fetcher is not None else {}
        for tp, tasks in routes.items():
            for task in tasks:
                off = task.committable.get(tp)
                if off is None:
                    blocked.add(tp)
                elif tp not in offsets or off < offsets[tp]:
                    offsets[tp] = off
        if not routes:  # revoke/stop: routes are gone, the tasks still know their offsets
            for task in self.tasks.values():
                for tp, off in task.committable.items():
                    if tp not in offsets or off < offsets[tp]:
                        offsets[tp] = off
        return {tp: off for tp, off in offsets.items() if tp not in blocked and self._committed.get(tp) != off}

    async def commit(self) -> bool:
        """Flush caches -> flush producer -> commit offsets -> write checkpoints.

        exactly_once: per task, caches -> changelog in the task's transaction, offsets into the
        transaction, commit it, then stores and checkpoints (see :mod:`agentstream.worker.eos`).
        """
        async with self._commit_lock:
            if self.eos is not None:
                committed = await self.eos.commit(list(self.tasks.values()))
                if self.app._producer_started:
                    await self.app.producer.flush()  # timers' and replies' sends (not transactional)
                if committed:
                    self.commits += 1
                    self.last_commit = time.monotonic()
                return committed
            offsets = self.committable_offsets()
            tables = self.tables
            if not offsets and (tables is None or not tables.dirty()):
                return False
            if tables is not None:
                await tables.flush()
            await self.app.producer.flush()
            faults = self.faults
            if faults is not None:
                faults.check("after_produce_before_commit")
            if offsets and self.consumer is not None:
                await self.consumer.commit(offsets)
                self._committed.update(offsets)
            if faults is not None:
                faults.check("after_commit_before_checkpoint")
            if tables is not None:
                tables.checkpoint()
            self.commits += 1
            self.last_commit = time.monotonic()
            log.debug("committed %s", offsets)
            return True

    async def _commit_loop(self) -> None:
        interval = self.settings.commit_interval
        while True:
            await asyncio.sleep(interval)
            try:
                await self.commit()
            except StopProcessing:
                raise
            except CommitFailed as exc:
                if self.eos is not None:
                    raise  # the transaction aborted: only a restart from the committed offsets is exact
                # Offsets only: every record before them was delivered, and the next commit (or the
                # partition's next owner) covers them. Broker outages and rebalances end up here.
                log.warning("offset commit failed, will retry at the next commit: %s", exc)
                continue
            except Exception as exc:
                log.error("commit failed: %s; stopping the worker so no offset passes an undelivered record", exc)
                raise

    # -- timers ----------------------------------------------------------------------------------------------
    async def _run_timer(self, timer: Any) -> None:
        while True:
            await asyncio.sleep(timer.interval)
            if timer.on_leader and not self.assignor.is_leader:
                continue
            try:
                args = (self.app,) if len(inspect.signature(timer.fun).parameters) == 1 else ()
                await timer.fun(*args)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("timer %s raised: %s", timer.name, exc)
