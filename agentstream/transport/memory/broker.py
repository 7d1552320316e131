"""The memory broker: topics, consumer groups, the transaction coordinator, and wake-ups for waiting readers.

One per ``memory://`` URL (see :class:`~agentstream.transport.memory.transport.MemoryTransport`);
its clients call it directly, with no network and no batching in between.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka.structs import RecordMetadata  # type: ignore[import-untyped, unused-ignore]

from agentstream.clock import REAL_CLOCK, Clock
from agentstream.exceptions import TransportError
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.message import Message

from .faults import MemoryFaults
from .group import ConsumerGroup
from .partitions import PartitionLog, Record, TopicLog

__all__ = ["MemoryBroker", "Transaction"]


@dataclass
class Transaction:
    """One open transaction: where its records went, and the offsets it commits."""

    transactional_id: str
    epoch: int
    records: dict[TP, list[int]] = field(default_factory=dict)
    offsets: dict[str, dict[TP, int]] = field(default_factory=dict)
    failed: str | None = None  # why it can only be aborted now (a failed send, a failed or aborted commit)


class MemoryBroker:
    """Everything one ``memory://`` URL's clients share; the state tests inspect after a run."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicLog] = {}
        self.groups: dict[str, ConsumerGroup] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        self._member_ids = itertools.count(1)
        self.txn_epochs: dict[str, int] = {}  # transactional_id -> current producer epoch
        self.open_txns: dict[str, Transaction] = {}
        # transactional_id -> offsets of its committed transaction not yet in the group (txn_offsets_late)
        self.late_offsets: dict[str, dict[str, dict[TP, int]]] = {}
        self.faults = MemoryFaults()
        self.clock: Clock = REAL_CLOCK  # stamps records sent without a timestamp (the harness's virtual time)
        self.appended = 0  # records appended so far: the harness's cheap "did anything happen" check
        # > 0: a topic first named by a send or a fetch is created with this many partitions, as a
        # broker with auto.create.topics.enable does; 0 (the default): refused, as in production.
        self.auto_create_partitions = 0
        self.journal: list[Record] | None = None  # a list: every record appended, in append order (the harness's)

    # -- transactions (Kafka's transaction coordinator, minus control records) -----------------------
    def init_producer(self, transactional_id: str) -> int:
        """InitProducerId: bump the epoch (fencing older producers) and abort their open transaction.
        It completes only after the id's previous transaction did, so that one's offsets are in the group."""
        self._offsets_arrive(transactional_id)
        old = self.open_txns.get(transactional_id)
        if old is not None:
            self.end_txn(old, commit=False)
        epoch = self.txn_epochs.get(transactional_id, -1) + 1
        self.txn_epochs[transactional_id] = epoch
        return epoch

    def end_txn(self, txn: Transaction, *, commit: bool) -> None:
        """Commit (records visible, offsets stored) or abort (records hidden) all at once."""
        if self.open_txns.get(txn.transactional_id) is not txn:
            return
        del self.open_txns[txn.transactional_id]
        self._offsets_arrive(txn.transactional_id)
        for tp, offsets in txn.records.items():
            part = self.partition(tp)
            part.open_txns.pop(txn.transactional_id, None)
            if not commit:
                part.aborted.update(offsets)
        if commit and txn.offsets and self.faults.take("txn_offsets_late"):
            self.late_offsets[txn.transactional_id] = txn.offsets
        elif commit:
            for group_id, offs in txn.offsets.items():
                self.group(group_id).committed.update(offs)
        self.wake()

    def _offsets_arrive(self, transactional_id: str) -> None:
        """The late offsets of the id's last committed transaction reach their groups (txn_offsets_late)."""
        for group_id, offs in self.late_offsets.pop(transactional_id, {}).items():
            self.group(group_id).committed.update(offs)

    # -- topics, partitions and groups --------------------------------------------------------------
    def topic(self, name: str) -> TopicLog:
        try:
            return self.topics[name]
        except KeyError:
            if self.auto_create_partitions > 0:  # a dev broker's auto.create.topics.enable
                spec = TopicSpec(name, self.auto_create_partitions)
                log = self.topics[name] = TopicLog(spec, [PartitionLog() for _ in range(spec.partitions)])
                return log
            raise TransportError(
                f"topic {name!r} does not exist on the memory broker (auto-creation is off, as on a "
                f"production Kafka). Fix: declare it with app.topic({name!r}, ...) so it is created at start-up."
            ) from None

    def partition(self, tp: TP) -> PartitionLog:
        parts = self.topic(tp.topic).partitions
        if not 0 <= tp.partition < len(parts):
            raise TransportError(f"{tp} does not exist: topic {tp.topic!r} has {len(parts)} partitions")
        part: PartitionLog = parts[tp.partition]
        return part

    def group(self, group_id: str) -> ConsumerGroup:
        if group_id not in self.groups:
            self.groups[group_id] = ConsumerGroup(self.topics, group_id)
        return self.groups[group_id]

    def next_member_id(self, group_id: str) -> str:
        return f"{group_id}-{next(self._member_ids):06d}"  # zero-padded so sorting is join order

    def append(
        self,
        tp: TP,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes]],
        txn: Transaction | None = None,
    ) -> RecordMetadata:
        part = self.partition(tp)
        ts = timestamp_ms if timestamp_ms is not None else int(self.clock.time() * 1000)
        self.appended += 1
        offset = part.end()
        if txn is not None:
            part.open_txns.setdefault(txn.transactional_id, offset)
            txn.records.setdefault(tp, []).append(offset)
        rec: Record = Message(
            tp.topic, tp.partition, offset, ts, 0, key, value, None,
            -1 if key is None else len(key), -1 if value is None else len(value), tuple(headers),
        )  # fmt: skip
        part.records.append(rec)
        if self.journal is not None:
            self.journal.append(rec)
        self.wake()
        return RecordMetadata(tp.topic, tp.partition, tp, offset, ts, 0, part.log_start_offset)

    # -- readers waiting for records ---------------------------------------------------------------
    def wake(self) -> None:
        """Wake every getmany waiting for data or for a state change (seek, resume, assignment)."""
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
        self._waiters.clear()

    async def wait(self, timeout: float) -> None:
        # A fresh future per wait, so a broker outliving a test's event loop never holds a dead one.
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        try:
            # asyncio.wait, not wait_for: 3.11's wait_for can swallow a cancellation that races
            # the timeout, which left readers unstoppable.
            await asyncio.wait({fut}, timeout=timeout)
        finally:
            self._waiters.discard(fut)
            if not fut.done():
                fut.cancel()
