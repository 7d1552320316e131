"""The worker process: joins the app's consumer group and runs its tasks on one event loop.

The worker is Kafka Streams' stream thread: start and stop order, the poll -> route -> process ->
commit loop, its state machine, signals, timers, and the rebalance listener. Which tasks run for
the assignment is its task manager's (:mod:`agentstream.worker.task_manager`).

Start order (Faust's, which is right): producer -> web -> tables -> consumer -> agents (tasks),
timers; stop in reverse. Rebalances (eager) suspend everything: revoke stops the tasks after
their current record and commits; assign builds tasks for the new partition numbers, restores
their tables, then starts them. Every commit goes through the one commit unit
(:mod:`agentstream.worker.commit`); the worker's, tasks' and table partitions' states are explicit
(:mod:`agentstream.lifecycle`); the worker's runtime is reached through :mod:`agentstream.runtime`,
never stored on the App.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import runtime
from ..clock import Clock, clock_for
from ..compiled import BUILD
from ..exceptions import CommitFailed, GroupFenced, ProducerFenced, StopProcessing
from ..lifecycle import WORKER_TRANSITIONS, StateMachine, WorkerState
from ..naming import group_protocol_name
from ..topology import (
    FirstInstance,
    Topology,
    adopt_partition_counts,
    autodiscover,
    resolve_patterns,
    warn_legacy_agent_topics,
)
from ..transport.base import TP, Consumer, TopicSpec
from . import hooks
from .assignor import Assignment, PartitionNumberAssignor
from .blocking import watch_blocking
from .commit import AtLeastOnceCommit, CommitUnit, ExactlyOnceCommit
from .descriptors import raise_descriptor_limit
from .eos import ExactlyOnce
from .errors import ErrorPolicy
from .fencing import lease_loop
from .fetcher import Fetcher
from .probing import probing_loop
from .processing_timeout import LivelockWarning, processing_timeout, watch_processing
from .purge import RepartitionPurge, repartition_topics
from .status import WorkerStatus, snapshot
from .table_cleanup import table_cleanup_loop, windowed_tables
from .task import StreamTask, TaskId
from .task_manager import TaskManager

if TYPE_CHECKING:
    from ..runtime import FaultPoints
    from ..tables.manager import TableManager

log = logging.getLogger("agentstream.worker")

__all__ = ["Worker", "Server", "format_partitions"]


class Server(Protocol):
    """A server started beside the worker (the web server, :func:`agentstream.web.serve`): bound
    after the producer and before the group is joined, since ``address`` is what the worker
    advertises in the group (how other workers route table queries here); stopped in reverse."""

    @property
    def address(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


COMMIT_EVERY_CHECK = 0.05  # seconds between looks at the record count under broker_commit_every
STEP_MIN = 2.0  # seconds each shutdown step gets at least, whatever is left of shutdown_timeout


def format_partitions(tps: set[TP] | list[TP]) -> str:
    """``topic[0, 2] other[1]``: the form the assignment log lines use."""
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return " ".join(f"{t}[{', '.join(map(str, sorted(ps)))}]" for t, ps in sorted(by_topic.items())) or "(nothing)"


class Worker:
    """Runs one app: ``await Worker(app).run()`` until SIGTERM/SIGINT or :meth:`request_stop`."""

    def __init__(
        self,
        app: Any,
        *,
        install_signal_handlers: bool = False,
        web_port: int | None = None,
        faults: FaultPoints | None = None,
    ) -> None:
        self.app = app
        self.faults = faults  # tests only: named crash points; None costs one check per point
        self.eos: ExactlyOnce | None = None  # set in start() under processing_guarantee='exactly_once'
        self.settings = app.settings
        self.install_signal_handlers = install_signal_handlers
        self.topology: Topology | None = None
        # Faust's PartitionAssignor setting: a subclass of agentstream's assignor plans the group's assignment
        assignor_class = (
            app.class_setting(
                "PartitionAssignor", PartitionNumberAssignor, "agentstream.worker.assignor.PartitionNumberAssignor"
            )
            or PartitionNumberAssignor
        )
        self.assignor = assignor_class(
            host=f"{self.settings.web_host}:{web_port if web_port is not None else self.settings.web_port}",
            standby_replicas=self.settings.table_standby_replicas,
            name=group_protocol_name(self.settings),
            acceptable_recovery_lag=self.settings.acceptable_recovery_lag,
            max_warmup_replicas=self.settings.max_warmup_replicas,
            rack=self.settings.rack_id,
        )
        self.errors = ErrorPolicy(app, self._crash, self._task_migrated)
        self.consumer: Consumer | None = None
        self.fetcher: Fetcher[StreamTask] | None = None
        self.task_manager: TaskManager | None = None  # set in start() with the consumer: the assignment's tasks
        self.purge: RepartitionPurge | None = None  # set in start(): consumed repartition records deleted
        self.tables: TableManager | None = None  # set in start() when the app declares tables
        # set by the table manager when its writes outrun the changelog (UNSENT_MAX_BYTES): commit now
        self._commit_soon = asyncio.Event()
        self.servers: list[Server] = []  # started beside the worker (see serve())
        self.web_port = web_port if web_port is not None else self.settings.web_port
        self._background: list[asyncio.Task[Any]] = []
        # each agent's first instance, started by discovery, until a task of its last stage adopts it
        self.first_instances: dict[str, FirstInstance] = {}
        self._fetch_task: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[None] | None = None
        self._stop_requested = asyncio.Event()
        self._commit_lock = asyncio.Lock()
        self.committer: CommitUnit | None = None  # set in start(): the one commit sequence
        self.crashed: BaseException | None = None  # why the worker stops (exit code 1), if it failed
        self.lifecycle: StateMachine[WorkerState] = StateMachine(
            WorkerState.STARTING, WORKER_TRANSITIONS, f"worker of {app.id}"
        )
        self.started = asyncio.Event()
        self.assigned = asyncio.Event()  # set after each assignment's tasks are running
        self.commits = 0
        self.last_commit = time.monotonic()
        self.clock: Clock = clock_for(app)  # timers and the commit interval wait on it (virtual in the harness)
        self._restore_stdouts: Callable[[], None] | None = None  # worker_redirect_stdouts=True: print() logged

    def serve(self, server: Server) -> None:
        """Start ``server`` with this worker (after the producer, before tables and the group) and
        advertise its address in the group; it stops before the producer closes."""
        if self.lifecycle.state is not WorkerState.STARTING or self.started.is_set():
            raise RuntimeError("attach servers to a worker before starting it")
        self.servers.append(server)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def run(self) -> int:
        """Start, run until asked to stop (or a task crashes), stop; returns the exit code."""
        try:
            # A stop request (SIGTERM) while starting (restoring, joining) stops at once.
            starting = asyncio.ensure_future(self.start())
            stop_wait = asyncio.ensure_future(self._stop_requested.wait())
            try:
                await asyncio.wait({starting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                if starting.done():
                    starting.result()  # a failed start raises here
                    await stop_wait
            finally:
                stop_wait.cancel()
                if not starting.done():
                    starting.cancel()
                    await asyncio.gather(starting, return_exceptions=True)
        finally:
            await self.stop()
        return 1 if self.crashed is not None else 0

    @property
    def state(self) -> WorkerState:
        return self.lifecycle.state

    @property
    def committed_offsets(self) -> dict[TP, int]:
        """The offsets this worker last committed, per partition."""
        return self.committer.committed if self.committer is not None else {}

    @property
    def tasks(self) -> dict[TaskId, StreamTask]:
        """The tasks of the current assignment, by id (the task manager's)."""
        return self.task_manager.tasks if self.task_manager is not None else {}

    @property
    def assignment(self) -> Assignment:
        """What this worker was given in the last rebalance (partition owners by address)."""
        return self.assignor.assignment

    def agent_totals(self) -> dict[str, int]:
        """Records handled per agent since the worker started (monotonic across rebalances)."""
        totals = dict.fromkeys(self.app.agents, 0)
        if self.task_manager is not None:
            totals.update(self.task_manager.processed())
        return totals

    async def status(self, *, lag: bool = True, keys: bool = True) -> WorkerStatus:
        """This worker's published status: an immutable snapshot (:mod:`agentstream.worker.status`);
        ``lag=False``/``keys=False`` skip the per-partition positions/table key counts (probes, metadata)."""
        return await snapshot(self, now=time.monotonic(), lag=lag, keys=keys)

    @property
    def stopping(self) -> bool:
        return self.lifecycle.state in (WorkerState.PENDING_SHUTDOWN, WorkerState.DEAD)

    def request_stop(self) -> None:
        self._stop_requested.set()

    def _crash(self, exc: BaseException) -> None:
        if self.crashed is None:
            self.crashed = exc
        self.request_stop()

    def _task_migrated(self, exc: BaseException) -> None:
        """exactly_once: a task's producer was fenced (ProducerFenced) by a newer producer with its
        transactional id, so the group gave that task to another member while this worker did not
        hear from it (frozen, cut off): Kafka Streams' TaskMigratedException. The group has moved
        on, so no task here is sure to be ours: all close dirty (their open transactions are
        aborted by the broker, their uncommitted table writes dropped), the worker stops feeding
        them and rejoins. Stopping the worker instead would turn a pause into an outage."""
        manager = self.task_manager
        if manager is None or self.stopping:
            return
        if any(t.dirty is None for t in manager.tasks.values()):
            log.warning(
                "%s; this worker's tasks close dirty (their records are handled by their next owners from the "
                "committed offsets) and it rejoins the group",
                exc,
            )
        manager.fenced(exc)
        if self.consumer is not None:
            self.consumer.request_rejoin()

    async def start(self) -> None:
        app, s = self.app, self.settings
        if s.debug:  # Faust's debug: asyncio's debug mode (slow callbacks and unawaited coroutines logged)
            asyncio.get_running_loop().set_debug(True)
        if app.tables:
            s.check_data_dir()  # before connecting or joining: a bad data dir names the setting
            from ..tables.manager import check_store_paths

            check_store_paths(s, app.tables.values())  # an id or table name like "/x" or ".."
        raise_descriptor_limit()  # stores, broker and web connections: see worker/descriptors.py
        rt = runtime.bind(app, self)  # the app's runtime context: tables and sends find the worker here
        hooks.worker_init(self)  # Faust's signals and sensors (agentstream.worker.hooks)
        assignor = self.assignor  # an on_configured receiver may have assigned app.conf.x: read them again
        assignor.standby_replicas = s.table_standby_replicas
        assignor.acceptable_recovery_lag = s.acceptable_recovery_lag
        assignor.max_warmup_replicas = s.max_warmup_replicas
        assignor.rack = s.rack_id
        if s.extra.get("worker_redirect_stdouts") is True:  # Faust's: print() goes to the log
            from ..logging_setup import redirect_stdouts

            self._restore_stdouts = redirect_stdouts(s.extra.get("worker_redirect_stdouts_level") or "WARN")
        await autodiscover(app)  # Faust's autodiscover setting: import the modules declaring agents
        await resolve_patterns(app, app.transport)  # app.topic(pattern=...): the matching topics, now
        # the split points first: a repartition topic is declared with its source's declared count,
        # and co-partitioning with the tables is checked per sub-topology, after the split points
        self.first_instances = await app.discover(keep=True)  # each agent's first instance, kept
        for first in self.first_instances.values():
            first.on_fatal = self._crash  # a split point made after discovery stops the worker, naming it
        await adopt_partition_counts(app, app.transport)  # existing source topics keep their count
        await warn_legacy_agent_topics(app, app.transport)
        if self.install_signal_handlers:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._on_signal, sig)
        self.topology = app.topology()
        transport = app.transport
        counts = await transport.ensure_topics(self._topic_specs())
        if app.producer_transport is not None:  # Faust's broker_producer: the records go to that cluster
            await app.producer_transport.ensure_topics(self._topic_specs())
        self.topology.check_copartitioning(counts)
        if s.processing_guarantee == "exactly_once":
            self.eos = ExactlyOnce(app)
            self.eos.check_topology(self.topology)
            await self.eos.check_broker()  # refuse to start rather than silently degrade
            log.info("processing_guarantee=exactly_once: one transactional producer per task")
        log.info("topology of %s:\n%s", app.id, self.topology.describe())
        await app.start_producer()
        if s.web_enabled and not self.servers:
            log.warning(
                "web_enabled is on, but no web server is attached to this worker: run it with "
                "agentstream.web.run_worker(worker) (what the CLI does), or set web_enabled=False"
            )
        for server in self.servers:  # bound before joining: the group learns the address
            await server.start()
        if self.servers:
            self.assignor.host = self.servers[0].address
        if app.tables:
            from ..tables.manager import TableManager

            manager_class = app.class_setting("TableManager") or TableManager  # Faust's TableManager setting
            self.tables = manager_class(
                app.tables.values(),
                settings=s,
                runtime=rt,
                producer=app.producer,
                faults=self.faults,
                consumers=lambda **poll: transport.consumer(group_id=None, **{**app.consumer_settings(), **poll}),
            )
            await self.tables.start()  # table writes find it in the runtime from here on
            if any(not t.is_global for t in app.tables.values()):
                self.assignor.lags = self.tables.lags  # the lag-aware plan: tasks move to caught-up copies
        if not self.topology.source_topics:  # channel agents only: no group to join, no consumer to leave open
            await self._start_without_consumer()
            return
        consumer = transport.consumer(group_id=app.id, assignor=self.assignor, **app.consumer_settings(group=True))
        self.consumer = consumer
        self.fetcher = Fetcher[StreamTask](
            consumer, buffer_max_records=s.buffer_max_records, max_poll_records=s.max_poll_records
        )
        if self.tables is not None:  # table writes outrunning their changelog: commit now, fetch nothing meanwhile
            self.fetcher.state_room = self.tables.room
            self.tables.on_full = self._commit_soon.set
        if self.eos is not None:
            self.committer = ExactlyOnceCommit(tables=lambda: self.tables, faults=self.faults)
        else:
            self.committer = AtLeastOnceCommit(
                tables=lambda: self.tables,
                faults=self.faults,
                producer=lambda: self.app.producer,
                consumer=lambda: self.consumer,
                routes=lambda: self.fetcher.routes if self.fetcher else {},
            )
        self.task_manager = TaskManager(
            self.topology,
            settings=s,
            errors=self.errors,
            consumer=consumer,
            fetcher=self.fetcher,
            committer=self.committer,
            assignor=self.assignor,
            tables=self.tables,
            eos=self.eos,
            faults=self.faults,
            first_instances=self.first_instances,
        )
        self.purge = RepartitionPurge(transport, repartition_topics(app.agents.values()), s.repartition_purge_interval)
        consumer.subscribe(self.topology.source_topics, self)
        await consumer.start()
        self._fetch_task = asyncio.ensure_future(self._guard(self.fetcher.run(), "fetcher"))
        self._background.append(asyncio.ensure_future(self._guard(self._commit_loop(), "commit loop")))
        self._background.append(asyncio.ensure_future(self._guard(lease_loop(self), "membership lease")))
        blocking = s.extra.get("blocking_timeout")  # Faust's blocking detector: a warning per block
        if blocking is not None and float(blocking) > 0:
            self._background.append(asyncio.ensure_future(self._guard(watch_blocking(float(blocking)), "blocking")))
        stuck_after = processing_timeout(s)  # Faust's stream_processing_timeout: a warning per stuck record
        if stuck_after > 0:
            watchdog = watch_processing(lambda: self.tasks.values(), stuck_after)
            self._background.append(asyncio.ensure_future(self._guard(watchdog, "processing watchdog")))
        if self.assignor.lags is not None:
            self._background.append(asyncio.ensure_future(self._guard(probing_loop(self), "probing rebalances")))
        if windowed_tables(self):
            cleanup = table_cleanup_loop(self)
            self._background.append(asyncio.ensure_future(self._guard(cleanup, "table cleanup")))
        for timer in app.timers:
            self._background.append(asyncio.ensure_future(self._guard(self._run_timer(timer), f"timer {timer.name}")))
        for fun in app.startup_tasks:
            args = (app,) if len(inspect.signature(fun).parameters) == 1 else ()
            self._background.append(asyncio.ensure_future(self._guard(fun(*args), f"task {fun.__name__}")))
        if self.lifecycle.state is WorkerState.STARTING:
            self.lifecycle.to(WorkerState.RUNNING)
        self.started.set()
        log.info("worker for %s started (broker %s, hot path %s)", app.id, s.broker, BUILD)

    async def _start_without_consumer(self) -> None:
        """Every agent reads a channel: run timers and startup tasks (channel agents among them) only."""
        log.info("no agent reads a topic: %s joins no consumer group", self.app.id)
        self.assignor.is_leader = True  # alone, without a group: on_leader timers and tasks run here
        for timer in self.app.timers:
            self._background.append(asyncio.ensure_future(self._guard(self._run_timer(timer), f"timer {timer.name}")))
        for fun in self.app.startup_tasks:
            args = (self.app,) if len(inspect.signature(fun).parameters) == 1 else ()
            self._background.append(asyncio.ensure_future(self._guard(fun(*args), f"task {fun.__name__}")))
        if self.lifecycle.state is WorkerState.STARTING:
            self.lifecycle.to(WorkerState.RUNNING)
        self.started.set()
        self.assigned.set()
        log.info("worker for %s started (no consumer group)", self.app.id)

    def _topic_specs(self) -> list[TopicSpec]:
        specs = [t.spec() for t in self.app.topics.values()]
        for table in self.app.tables.values():
            specs.append(table.changelog_topic.spec())
        if "dead-letter" in (self.settings.on_decode_error, self.settings.on_agent_error) or (
            self.settings.processing_exception_handler or self.settings.production_exception_handler
        ):  # a handler may answer dead-letter
            specs.append(TopicSpec(self.settings.dead_letter_topic, 1))
        seen: dict[str, TopicSpec] = {}
        for spec in specs:
            seen.setdefault(spec.name, spec)
        return list(seen.values())

    def _on_signal(self, sig: signal.Signals) -> None:
        instance = self.settings.consumer_group_instance_id
        # a static member sends no LeaveGroup (KIP-345): its partitions wait session_timeout for it to come back
        group = f"staying in the group as static member {instance!r}" if instance else "leaving the group"
        log.info("received %s: finishing current records, committing, %s", sig.name, group)
        self.request_stop()

    async def _guard(self, coro: Awaitable[object], what: str) -> None:
        try:
            await coro
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if current is None or current.cancelling():
                raise  # cancelled: the worker is stopping it
            # A CancelledError from inside (a future it awaited was cancelled by someone else): the loop
            # ended, and a silent end of the membership lease or the commit loop would leave a worker
            # that looks alive and does nothing. Stop instead, saying which.
            log.error("%s ended on a CancelledError nobody asked it for: stopping the worker", what, exc_info=exc)
            self._crash(RuntimeError(f"{what} ended on an unexpected CancelledError"))
        except Exception as exc:
            log.exception("%s failed: %s", what, exc)
            self._crash(exc)

    async def stop(self) -> None:
        """Finish current records, commit, leave the group, close stores and clients.

        Bounded by ``shutdown_timeout`` (plus a small margin) whatever the broker does: agents get
        it to finish their record, the final commit what is left of it (at least STEP_MIN), and
        leaving the group and closing the clients share 2 * STEP_MIN. A commit cut short closes dirty.
        """
        if self.stopping:
            return
        self.lifecycle.to(WorkerState.PENDING_SHUTDOWN)
        await hooks.before_shutdown(self)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.shutdown_timeout
        log.info("worker for %s stopping", self.app.id)
        # A periodic commit in flight finishes first: cancelled mid-way it would close every task
        # dirty, and the next start would restore what this stop could have checkpointed.
        held = await self._hold_commit_lock(deadline)
        try:
            for t in self._background:
                t.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
        finally:
            if held:
                self._commit_lock.release()
        self._background.clear()
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
        manager = self.task_manager
        tasks = list(self.tasks.values())
        if manager is not None:
            await manager.suspend(tasks)
        try:
            await asyncio.wait_for(self.commit(final=True), max(deadline - loop.time(), STEP_MIN))
        except TimeoutError:
            log.error(
                "final commit did not finish within shutdown_timeout=%.1fs; records since the last commit "
                "will be handled again",
                self.settings.shutdown_timeout,
            )
        except Exception as exc:
            log.error("final commit failed: %s (records since the last commit will be handled again)", exc)
        tail = loop.time() + STEP_MIN * 2  # what follows the commit shares this much time
        if manager is not None:
            if self.eos is not None:
                await self._bounded(manager.close_producers(tasks), "closing task producers", tail)
            if self._fetch_task is not None and self.fetcher is not None:
                await self.fetcher.stop(self._fetch_task)
                manager.unroute()
            manager.retire(tasks)
        for first in list(self.first_instances.values()):  # not adopted: no task of its last stage ran here
            await first.close()
        self.first_instances.clear()
        if self.purge is not None:
            await self.purge.stop()
        if self.consumer is not None:
            await self._bounded(self.consumer.stop(), "leaving the group", tail)
        if self.tables is not None:
            await self.tables.stop()  # only committed values stay in the stores
        for server in reversed(self.servers):
            await self._bounded(server.stop(), f"stopping {type(server).__name__}", tail)
        await self._bounded(self.app.stop_clients(), "closing the producer", tail)
        runtime.unbind(self.app, self)
        if self._restore_stdouts is not None:
            self._restore_stdouts()
            self._restore_stdouts = None
        self.lifecycle.to(WorkerState.DEAD)
        log.info("worker for %s stopped", self.app.id)

    async def _hold_commit_lock(self, deadline: float) -> bool:
        """Wait, until ``deadline`` at most, for a commit in flight; True when the lock is now held."""
        if not self._commit_lock.locked():
            await self._commit_lock.acquire()  # free: taken at once, whatever the deadline
            return True
        try:
            await asyncio.wait_for(self._commit_lock.acquire(), max(deadline - asyncio.get_running_loop().time(), 0))
        except TimeoutError:
            log.warning("the commit in flight did not finish within shutdown_timeout; it is cut short")
            return False
        return True

    async def _bounded(self, coro: Awaitable[object], what: str, deadline: float) -> None:
        try:
            await asyncio.wait_for(coro, max(deadline - asyncio.get_running_loop().time(), 0.1))
        except TimeoutError:
            log.warning("%s did not finish within the shutdown's time; going on with the shutdown", what)
        except Exception as exc:
            log.warning("%s failed: %s", what, exc)

    # -- rebalance listener ----------------------------------------------------------------------------
    # The consumer calls these once subscribed, which start() does after building the task manager.
    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        if self.faults is not None:
            self.faults.check("rebalance_revoked")
        if self._starting is not None:
            self._starting.cancel()
            await asyncio.gather(self._starting, return_exceptions=True)
            self._starting = None
        self.assigned.clear()
        if not self.stopping:
            self.lifecycle.to(WorkerState.REBALANCING)
        manager = self.task_manager
        assert manager is not None
        tasks = list(manager.tasks.values())
        await hooks.revoked(self, revoked)
        await manager.suspend(tasks)
        try:
            # Routes still known: a partition read by a dirty task stays blocked. Bounded: a hung
            # broker must not hold the rebalance (or a SIGTERM in the middle of it).
            await asyncio.wait_for(self.commit(final=True), self.settings.shutdown_timeout)
        except Exception as exc:
            log.error(
                "commit on revoke failed: %s (records since the last commit will be handled again; "
                "the tasks' table partitions drop their uncommitted writes and restore)",
                exc,
            )
        await manager.close(tasks)
        if revoked:
            log.info("revoked: %s", format_partitions(revoked))

    async def on_partitions_assigned(self, assigned: set[TP]) -> None:
        manager = self.task_manager
        assert manager is not None
        log.info("assigned: %s", format_partitions(assigned))
        if self.stopping:
            return
        await hooks.assigned(self, assigned)
        if self.lifecycle.state is not WorkerState.REBALANCING:
            self.lifecycle.to(WorkerState.REBALANCING)
        if self.faults is not None:
            self.faults.check("rebalance_assigned")
        tasks = manager.create(assigned)
        hooks.tasks_created(self, tasks)
        self._starting = asyncio.ensure_future(self._start_assignment(manager, tasks))

    async def _start_assignment(self, manager: TaskManager, tasks: list[StreamTask]) -> None:
        """Restore and start the assignment's tasks, then run: a failure crashes the worker."""
        try:
            if self.app._producer_started:
                await self.app.producer.unfence()  # after a fence (worker/fencing.py): sends again
            delay = float(self.settings.extra.get("stream_recovery_delay") or 0.0)
            if delay > 0:  # Faust's: let more members join or leave before recovery starts
                await self.clock.sleep(delay)
            await manager.restore_and_start(tasks)
            if self.lifecycle.state is WorkerState.REBALANCING:
                self.lifecycle.to(WorkerState.RUNNING)
            self.assigned.set()
            await hooks.rebalance_complete(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self.stopping:
                log.info("assignment not started: the worker is stopping (%s)", exc)
                return
            log.exception("could not start tasks after the assignment: %s", exc)
            self._crash(exc)

    # -- commit ------------------------------------------------------------------------------------------
    async def commit(self, *, final: bool = False) -> bool:
        """Run the commit unit over the current tasks (see :mod:`agentstream.worker.commit`).

        ``final`` (revoke, stop): the tasks close after it, so a failed offset commit is a dirty close.
        """
        committer = self.committer
        if committer is None:
            return False
        async with self._commit_lock:
            sensed = hooks.commit_initiated(self)  # Faust's sensor hooks: None when no sensor is registered
            committed = await committer.commit(list(self.tasks.values()), final=final)
            if self.eos is not None and self.app._producer_started:
                await self.app.producer.flush()  # timers' and replies' sends (not transactional)
            if committed:
                self.commits += 1
                self.last_commit = time.monotonic()
                if self.purge is not None:
                    self.purge.after_commit(committer.committed)
            hooks.committed(self, sensed, committed)
            return committed

    def _processed_total(self) -> int:
        return sum(task.processed for task in self.tasks.values())

    async def _until_commit_due(self, interval: float, every: int) -> None:
        """Faust's ``broker_commit_every``: return after ``interval`` seconds, or as soon as the
        tasks have handled ``every`` records since this wait began (looked at every
        COMMIT_EVERY_CHECK seconds at most)."""
        clock = self.clock
        began, base = clock.monotonic(), self._processed_total()
        while True:
            left = interval - (clock.monotonic() - began)
            if left <= 0:
                return
            await clock.sleep(min(left, COMMIT_EVERY_CHECK))
            total = self._processed_total()
            if total < base:  # the tasks were recreated (a rebalance): count from them
                base = 0
            if total - base >= every or self._commit_soon.is_set():
                return

    async def _commit_loop(self) -> None:
        interval = self.settings.commit_interval
        every = int(self.settings.extra.get("broker_commit_every") or 0)
        livelock = LivelockWarning(float(self.settings.extra.get("broker_commit_livelock_soft_timeout", 300.0)))
        soon = self._commit_soon
        while True:
            if every > 0:
                await self._until_commit_due(interval, every)
            elif not soon.is_set():
                try:
                    await self.clock.wait_for(soon.wait(), interval)
                except TimeoutError:
                    pass
            soon.clear()
            livelock.check(self.tasks.values(), self.last_commit, time.monotonic())
            try:
                await self.commit()
            except StopProcessing:
                raise
            except GroupFenced as exc:
                if self.task_manager is not None:  # fencing: close the tasks dirty until the rejoin
                    self.task_manager.fenced(exc)
                log.warning("offset commit fenced, the tasks close dirty and the worker rejoins: %s", exc)
                continue
            except ProducerFenced as exc:  # exactly_once: a task's transaction was fenced by its next owner
                self._task_migrated(exc)
                continue
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
        clock, sleep = self.clock, timer.interval
        while True:
            began = clock.monotonic()
            await clock.sleep(sleep)
            sleep = timer.next_sleep(clock.monotonic() - began)
            if timer.on_leader and not self.app.is_leader():  # the app's leader assignor decides
                continue
            try:
                args = (self.app,) if len(inspect.signature(timer.fun).parameters) == 1 else ()
                await timer.fun(*args)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("timer %s raised: %s", timer.name, exc)
