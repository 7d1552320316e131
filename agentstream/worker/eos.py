"""Exactly-once processing: one Kafka transaction per task and commit interval.

Kafka Streams' EOS "v1" model, because it is the one aiokafka 0.14 can enforce: every task gets
its own transactional producer with ``transactional_id = <app>-<task id>``. When a task moves,
its new owner starts a producer with the same id, which makes the broker abort the old owner's
open transaction and fence it (its next send or commit raises ProducerFenced). EOS "v2" (one
producer per worker, fenced through the consumer group generation in TxnOffsetCommit) needs a
TxnOffsetCommit version aiokafka does not send, so a zombie would not be fenced there.

A task's transaction holds everything its records caused: sink and repartition records, the
changelog records of the table partitions it wrote, dead letters, and its consumed offsets
(``send_offsets_to_transaction``). Values reach the local stores only after the commit, so an
abort needs nothing undone on disk: the cache and pending writes are dropped.

The commit sequence itself is :class:`agentstream.worker.commit.ExactlyOnceCommit`.
Sends find their task through :data:`agentstream.runtime.current_task`, a ContextVar set by each agent instance's
asyncio task (see ``StreamTask._run_instance``). A commit must not cut a record in half, so each
task has a :class:`CommitGate`: the commit waits until no agent instance of the task holds a
record, and instances wait for the commit before taking the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Protocol, Unpack

from ..exceptions import ProducerFenced, TopologyError, TransactionsUnsupported, TransportError
from ..runtime import current_task
from ..transport.base import TP, Delivery, Producer, SendOptions


class TransactionalTask(Protocol):
    """A task as the producers' set-up sees it (agentstream.worker.task.StreamTask): an id that
    names its transactional producer, and the slot that producer's transaction goes in."""

    txn: TaskTransaction | None

    @property
    def id(self) -> Any: ...


log = logging.getLogger("agentstream.eos")

__all__ = ["current_task", "CommitGate", "TaskTransaction", "ExactlyOnce", "transactional_id"]


PROBE_TIMEOUT = 15.0


def transactional_id(app_id: str, task_id: object) -> str:
    """``<app>-<task id>`` (``wordcount-1_3``): stable across workers, so the broker can fence."""
    return f"{app_id}-{task_id}"


class CommitGate:
    """Counts the agent instances holding a record; a commit runs only when that count is zero.

    An instance is *busy* from the moment it takes a record until it asks for the next one (when
    the previous one is acknowledged), so at a closed gate the task's committable offsets cover
    exactly the records whose effects were sent.
    """

    def __init__(self) -> None:
        self.busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()

    def enter_nowait(self) -> None:
        self.busy += 1
        self._idle.clear()

    async def enter(self) -> None:
        """Take a record: waits while a commit is running."""
        while not self._open.is_set():
            await self._open.wait()
        self.enter_nowait()

    def leave(self) -> None:
        self.busy = max(0, self.busy - 1)
        if self.busy == 0:
            self._idle.set()

    @asynccontextmanager
    async def closed(self) -> AsyncIterator[None]:
        """Hold new records back and wait for the ones in hand to be finished."""
        self._open.clear()
        try:
            await self._idle.wait()
            yield
        finally:
            self._open.set()


class TaskTransaction:
    """A task's transactional producer: begins a transaction at the first send after a commit."""

    def __init__(self, producer: Producer, group_id: str) -> None:
        self.producer = producer
        self.group_id = group_id
        self.transactional_id = producer.transactional_id
        self.in_transaction = False
        self.sent = 0
        # Sends run side by side (a commit flushes each table partition's changelog in its own
        # coroutine): the first ones after a commit must begin the transaction once, not each.
        self._beginning = asyncio.Lock()

    async def start(self) -> None:
        """InitProducerId: fences any older producer of this task and aborts its open transaction."""
        await self.producer.start()

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> Delivery:
        if not self.in_transaction:
            await self._begin()
        self.sent += 1
        return await self.producer.send(topic, key, value, **options)

    async def _begin(self) -> None:
        async with self._beginning:
            if not self.in_transaction:
                await self.producer.begin_transaction()
                self.in_transaction = True

    async def flush(self) -> None:
        await self.producer.flush()

    async def partitions_for(self, topic: str) -> int:
        return await self.producer.partitions_for(topic)

    async def commit(self, offsets: Mapping[TP, int]) -> bool:
        """Offsets + every record sent since the last commit, atomically; False if nothing to do."""
        if not self.in_transaction and not offsets:
            return False
        if not self.in_transaction:
            await self._begin()
        if offsets:
            await self.producer.send_offsets_to_transaction(offsets, self.group_id)
        await self.producer.flush()
        await self.producer.commit_transaction()
        self.in_transaction = False
        return True

    async def abort(self) -> None:
        """Best effort: a fenced or disconnected producer's transaction is aborted by the broker anyway."""
        if not self.in_transaction:
            return
        self.in_transaction = False
        try:
            await self.producer.abort_transaction()
        except ProducerFenced as exc:
            log.info(
                "transaction %s was aborted by the broker already (%s): the task has a newer owner",
                self.transactional_id,
                exc,
            )
        except TransportError as exc:
            log.warning(
                "abort of transaction %s failed (%s); the broker aborts it when the task's next owner starts",
                self.transactional_id,
                exc,
            )

    async def stop(self) -> None:
        try:
            await self.producer.stop()
        except Exception as exc:  # closing a fenced/disconnected producer must not block a rebalance
            log.warning("closing producer %s: %s", self.transactional_id, exc)


class ExactlyOnce:
    """The worker's exactly-once machinery: broker check, task producers, per-task commits."""

    def __init__(self, app: Any) -> None:
        self.app = app

    # -- start-up checks ----------------------------------------------------------------------------
    @staticmethod
    def check_topology(topology: Any) -> None:
        """Each source topic must feed one sub-topology: its offsets go into one task's transaction."""
        owners: dict[str, list[str]] = {}
        for st in topology.subtopologies:
            for name in st.source_topics:
                owners.setdefault(name, []).append(f"{st.agent.name}#{st.id}")
        shared = {t: o for t, o in owners.items() if len(o) > 1}
        if shared:
            topic, agents = next(iter(sorted(shared.items())))
            raise TopologyError(
                f"under processing_guarantee='exactly_once' a topic may be read by one agent only, but {topic!r} "
                f"is read by {', '.join(agents)}: each task commits its consumed offsets in its own transaction. "
                "Fix: read the topic in one agent and forward to the others (or use at_least_once)"
            )

    async def check_broker(self) -> None:
        """Refuse to start rather than degrade: InitProducerId must work on this broker."""
        probe = self.app.transport.producer(
            transactional_id=transactional_id(self.app.id, "probe"), **self.app.producer_settings()
        )
        try:
            await asyncio.wait_for(probe.start(), PROBE_TIMEOUT)
        except TransactionsUnsupported:
            raise
        except TimeoutError as exc:
            raise TransactionsUnsupported(
                self.app.settings.broker, f"InitProducerId got no answer within {PROBE_TIMEOUT:.0f}s"
            ) from exc
        finally:
            try:
                await probe.stop()
            except Exception:
                pass

    # -- task producers ---------------------------------------------------------------------------------
    async def start_tasks(self, tasks: Iterable[TransactionalTask]) -> None:
        """Create and start each task's producer (before restoring: this fences the previous owner,
        whose open transaction would otherwise hold back read_committed readers of the changelog)."""
        pending = [t for t in tasks if t.txn is None]

        async def one(task: TransactionalTask) -> None:
            producer = self.app.transport.producer(
                transactional_id=transactional_id(self.app.id, task.id), **self.app.producer_settings()
            )
            txn = TaskTransaction(producer, self.app.id)
            await txn.start()
            task.txn = txn

        await asyncio.gather(*(one(t) for t in pending))

    async def close_tasks(self, tasks: Iterable[TransactionalTask]) -> None:
        closing = [t for t in tasks if t.txn is not None]
        for task in closing:
            assert task.txn is not None
            await task.txn.abort()  # nothing open after a successful commit
        await asyncio.gather(*(t.txn.stop() for t in closing if t.txn is not None))
        for task in closing:
            task.txn = None
