"""The ``memory://`` transport: an in-process twin of Kafka for tests and single-process runs.

It keeps Kafka's observable semantics rather than a convenient approximation, so code that works
here works against a broker: murmur2 key partitioning, append-only partitions with offsets,
committed offsets per group, eager rebalances (all revoked, leader assigns, all assigned) run as
a background task, and no auto-creation of topics. Brokers are process-global and keyed by the
URL, so several apps in one process that use the same URL share topics and consumer groups.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, Unpack
from urllib.parse import urlsplit

from aiokafka.structs import RecordMetadata  # type: ignore[import-untyped, unused-ignore]

from agentstream.exceptions import (
    CommitFailed,
    ConfigError,
    PartitionCountMismatch,
    ProducerError,
    ProducerFenced,
    TransportError,
)
from agentstream.transport.base import TP, Assignor, MemberInfo, RebalanceListener, SendOptions, TopicSpec
from agentstream.transport.message import Message
from agentstream.transport.partitioner import default_partition

__all__ = ["MemoryTransport", "MemoryProducer", "MemoryConsumer", "MemoryFaults", "FAULT_KINDS", "Record"]

Record: TypeAlias = Message  # key and value are bytes (or None) on this transport
DEFAULT_MAX_RECORDS = 500
log = logging.getLogger(__name__)


@dataclass
class _Partition:
    records: list[Record] = field(default_factory=list)
    log_start_offset: int = 0  # raised by a future deletion/compaction emulation
    open_txns: dict[str, int] = field(default_factory=dict)  # transactional_id -> its first offset here
    aborted: set[int] = field(default_factory=set)  # offsets of records whose transaction aborted

    def end(self) -> int:
        """Log end offset (the high watermark: every append is immediately 'replicated')."""
        return len(self.records)

    def stable_end(self) -> int:
        """The last stable offset: read_committed consumers stop before the first open transaction."""
        if self.open_txns:
            return min(self.open_txns.values())
        return len(self.records)


@dataclass
class _Txn:
    """One open transaction: where its records went, and the offsets it commits."""

    transactional_id: str
    epoch: int
    records: dict[TP, list[int]] = field(default_factory=dict)
    offsets: dict[str, dict[TP, int]] = field(default_factory=dict)
    failed: str | None = None  # why it can only be aborted now (a failed send, a failed or aborted commit)


FAULT_KINDS = ("send_fail", "send_cancel", "commit_fail", "txn_commit_fail", "txn_abort")


class MemoryFaults:
    """Failures the memory broker injects on request, each the way Kafka shows it to a client.

    ``send_fail``        the record is not written; its delivery fails with ProducerError, and every
                         later ``flush()`` of that producer raises until it is stopped (or, in a
                         transaction, until the transaction is aborted: it can no longer commit)
    ``send_cancel``      the same, but the delivery is cancelled (a batch cancelled before it was queued)
    ``commit_fail``      an offset commit raises CommitFailed and stores nothing
    ``txn_commit_fail``  ``commit_transaction`` raises ProducerError; the transaction stays open and
                         can only be aborted (Kafka's abortable error)
    ``txn_abort``        the coordinator aborts the transaction at commit (e.g. it timed out): its
                         records are hidden from read_committed readers, its offsets are not stored,
                         ``commit_transaction`` raises ProducerError

    ``arm(kind, times)`` fails the next ``times`` operations of that kind; ``randomly(seed, **rates)``
    fails each operation with a probability (seeded, so a failing run can be replayed).
    """

    def __init__(self) -> None:
        self._armed: collections.Counter[str] = collections.Counter()
        self._rates: dict[str, float] = {}
        self._rng = random.Random(0)
        self.fired: collections.Counter[str] = collections.Counter()
        self.active = False  # one attribute check on the send path when no fault is set

    def arm(self, kind: str, times: int = 1) -> None:
        self._check(kind)
        self._armed[kind] += times
        self.active = True

    def randomly(self, seed: int, **rates: float) -> None:
        for kind, rate in rates.items():
            self._check(kind)
            if not 0 <= rate <= 1:
                raise ValueError(f"fault rate {kind}={rate!r} must be a probability in 0..1")
        self._rng = random.Random(seed)
        self._rates = dict(rates)
        self.active = bool(self._armed) or any(self._rates.values())

    def clear(self) -> None:
        self._armed.clear()
        self._rates.clear()
        self.active = False

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No fault fires inside this block (a test feeding input or reading results); armed ones wait."""
        active, self.active = self.active, False
        try:
            yield
        finally:
            self.active = active or bool(self._armed) or any(self._rates.values())

    def take(self, kind: str) -> bool:
        """Should this operation of ``kind`` fail? (Counts it in ``fired`` when it does.)"""
        if not self.active:
            return False
        if self._armed[kind] > 0:
            self._armed[kind] -= 1
        elif not (self._rates.get(kind) and self._rng.random() < self._rates[kind]):
            return False
        self.fired[kind] += 1
        log.info("memory transport: injected fault %s", kind)
        return True

    @staticmethod
    def _check(kind: str) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; use one of {', '.join(FAULT_KINDS)}")


@dataclass
class _Topic:
    spec: TopicSpec
    partitions: list[_Partition]


class _Group:
    """Members (join order, first is leader), committed offsets and the rebalance runner."""

    def __init__(self, broker: _Broker, group_id: str) -> None:
        self.broker = broker
        self.group_id = group_id
        self.members: list[MemoryConsumer] = []
        self.committed: dict[TP, int] = {}
        self._dirty = False
        self._task: asyncio.Task[None] | None = None

    def request_rebalance(self) -> None:
        """Mark the group for a rebalance; one runner task serializes and coalesces them."""
        self._dirty = True
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._run(), name=f"memory-rebalance-{self.group_id}")

    def pending(self) -> asyncio.Task[None] | None:
        task = self._task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            return None
        return task

    async def _run(self) -> None:
        while self._dirty:
            self._dirty = False
            members = list(self.members)
            try:
                await self._rebalance(members)
            except Exception as exc:  # surfaced from every member's next getmany
                log.exception("memory transport: rebalance of group %r failed", self.group_id)
                for m in members:
                    m._error = exc

    async def _rebalance(self, members: list[MemoryConsumer]) -> None:
        for m in members:  # eager protocol: everyone gives everything back first
            await m._revoke()
        members = [m for m in self.members if m in members]  # some may have left meanwhile
        if not members:
            return
        topics = {t for m in members for t in m._topics}
        counts = {t: len(self.broker.topics[t].partitions) for t in sorted(topics) if t in self.broker.topics}
        leader = members[0]._assignor
        if leader is not None:
            infos = [
                MemberInfo(m.member_id, frozenset(m._topics), m._assignor.member_user_data() if m._assignor else b"")
                for m in members
            ]
            plan = leader.assign(counts, infos)
        else:
            plan = _range_assign(counts, members)
        _validate(plan, counts)
        for m in members:
            if m in self.members:
                tps, user_data = plan.get(m.member_id, ([], b""))
                await m._assign_from_group(tps, user_data)


def _range_assign(counts: Mapping[str, int], members: Sequence[MemoryConsumer]) -> dict[str, tuple[list[TP], bytes]]:
    """Kafka's RangeAssignor: per topic, contiguous ranges by member id (keeps co-partitioning)."""
    plan: dict[str, tuple[list[TP], bytes]] = {m.member_id: ([], b"") for m in members}
    for topic, n in counts.items():
        subs = sorted(m.member_id for m in members if topic in m._topics)
        per, extra = divmod(n, len(subs)) if subs else (0, 0)
        start = 0
        for i, mid in enumerate(subs):
            size = per + (1 if i < extra else 0)
            plan[mid][0].extend(TP(topic, p) for p in range(start, start + size))
            start += size
    return plan


def _validate(plan: Mapping[str, tuple[list[TP], bytes]], counts: Mapping[str, int]) -> None:
    """Catch assignor bugs here; a real broker would silently let two members read one partition."""
    owner: dict[TP, str] = {}
    for mid, (tps, _) in plan.items():
        for tp in tps:
            if not 0 <= tp.partition < counts.get(tp.topic, 0):
                raise TransportError(
                    f"assignor gave member {mid!r} {tp}, which no member subscribes to or does not exist"
                )
            if tp in owner:
                raise TransportError(
                    f"assignor gave {tp} to both {owner[tp]!r} and {mid!r}; each partition needs one owner"
                )
            owner[tp] = mid


class _Broker:
    def __init__(self) -> None:
        self.topics: dict[str, _Topic] = {}
        self.groups: dict[str, _Group] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        self._member_ids = itertools.count(1)
        self.txn_epochs: dict[str, int] = {}  # transactional_id -> current producer epoch
        self.open_txns: dict[str, _Txn] = {}
        self.faults = MemoryFaults()

    # -- transactions (Kafka's transaction coordinator, minus control records) -----------------------
    def init_producer(self, transactional_id: str) -> int:
        """InitProducerId: bump the epoch (fencing older producers) and abort their open transaction."""
        old = self.open_txns.get(transactional_id)
        if old is not None:
            self.end_txn(old, commit=False)
        epoch = self.txn_epochs.get(transactional_id, -1) + 1
        self.txn_epochs[transactional_id] = epoch
        return epoch

    def end_txn(self, txn: _Txn, *, commit: bool) -> None:
        """Commit (records visible, offsets stored) or abort (records hidden) all at once."""
        if self.open_txns.get(txn.transactional_id) is not txn:
            return
        del self.open_txns[txn.transactional_id]
        for tp, offsets in txn.records.items():
            part = self.partition(tp)
            part.open_txns.pop(txn.transactional_id, None)
            if not commit:
                part.aborted.update(offsets)
        if commit:
            for group_id, offs in txn.offsets.items():
                self.group(group_id).committed.update(offs)
        self.wake()

    def topic(self, name: str) -> _Topic:
        try:
            return self.topics[name]
        except KeyError:
            raise TransportError(
                f"topic {name!r} does not exist on the memory broker (auto-creation is off, as on a "
                f"production Kafka). Fix: declare it with app.topic({name!r}, ...) so it is created at start-up."
            ) from None

    def partition(self, tp: TP) -> _Partition:
        parts = self.topic(tp.topic).partitions
        if not 0 <= tp.partition < len(parts):
            raise TransportError(f"{tp} does not exist: topic {tp.topic!r} has {len(parts)} partitions")
        part: _Partition = parts[tp.partition]
        return part

    def group(self, group_id: str) -> _Group:
        if group_id not in self.groups:
            self.groups[group_id] = _Group(self, group_id)
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
        txn: _Txn | None = None,
    ) -> RecordMetadata:
        part = self.partition(tp)
        ts = timestamp_ms if timestamp_ms is not None else int(time.time() * 1000)
        offset = part.end()
        if txn is not None:
            part.open_txns.setdefault(txn.transactional_id, offset)
            txn.records.setdefault(tp, []).append(offset)
        rec: Record = Message(
            tp.topic, tp.partition, offset, ts, 0, key, value, None,
            -1 if key is None else len(key), -1 if value is None else len(value), tuple(headers),
        )  # fmt: skip
        part.records.append(rec)
        self.wake()
        return RecordMetadata(tp.topic, tp.partition, tp, offset, ts, 0, part.log_start_offset)

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


class MemoryProducer:
    """Appends synchronously: the returned future is already resolved, ``flush`` has nothing to wait for.

    Failures (only injected ones, see :class:`MemoryFaults`) are sticky like the kafka://
    producer's: every later ``flush()`` raises until the producer is stopped or its transaction
    aborted. There is no batch a cancelled ``send`` could leave half-filled: a send appends
    without suspending, so it either happened or did not.

    With a ``transactional_id`` it follows Kafka's transaction rules: sends only inside a
    transaction, records invisible to read_committed readers until the commit, and a newer
    producer with the same id fences this one (its next operation raises ProducerFenced).
    """

    def __init__(self, broker: _Broker, transactional_id: str | None = None, **settings: Any) -> None:
        self._broker = broker
        self._next: dict[str, int] = {}  # round-robin cursor per topic for keyless records
        self._started = self._stopped = False
        self.transactional_id = transactional_id
        self._epoch = -1
        self._txn: _Txn | None = None
        self._failure: str | None = None  # raised by every flush until stop() / abort_transaction()

    async def start(self) -> None:
        if self.transactional_id is not None and not self._started:
            self._epoch = self._broker.init_producer(self.transactional_id)
        self._started = True

    def _check_txn(self, *, in_txn: bool) -> _Txn | None:
        tid = self.transactional_id
        if tid is None:
            raise TransportError(
                "this producer has no transactional_id: create it with transport.producer(transactional_id=...)"
            )
        if not self._started or self._stopped:
            raise TransportError("memory producer is not running: call start() first and not after stop()")
        if self._broker.txn_epochs.get(tid) != self._epoch:
            self._txn = None
            raise ProducerFenced(
                f"producer {tid!r} (epoch {self._epoch}) was fenced by a newer producer with the same transactional_id"
            )
        if in_txn and self._txn is None:
            raise TransportError(f"producer {tid!r} has no open transaction: call begin_transaction() first")
        return self._txn

    async def begin_transaction(self) -> None:
        if self._check_txn(in_txn=False) is not None:
            raise TransportError(f"producer {self.transactional_id!r} already has an open transaction")
        assert self.transactional_id is not None
        self._txn = _Txn(self.transactional_id, self._epoch)
        self._broker.open_txns[self.transactional_id] = self._txn

    async def send_offsets_to_transaction(self, offsets: Mapping[TP, int], group_id: str) -> None:
        txn = self._check_txn(in_txn=True)
        assert txn is not None
        txn.offsets.setdefault(group_id, {}).update(offsets)

    async def commit_transaction(self) -> None:
        txn = self._check_txn(in_txn=True)
        assert txn is not None
        faults = self._broker.faults
        if txn.failed is None and faults.take("txn_commit_fail"):
            txn.failed = "commit_transaction failed (injected: coordinator not available)"
            raise ProducerError(f"producer {self.transactional_id!r}: {txn.failed}; abort the transaction")
        if txn.failed is None and faults.take("txn_abort"):
            txn.failed = "the coordinator aborted the transaction (injected)"
            self._broker.end_txn(txn, commit=False)
            raise ProducerError(f"producer {self.transactional_id!r}: {txn.failed}")
        if txn.failed is not None:
            raise ProducerError(
                f"producer {self.transactional_id!r} cannot commit: {txn.failed}; abort the transaction"
            )
        self._txn = None
        self._broker.end_txn(txn, commit=True)

    async def abort_transaction(self) -> None:
        txn = self._check_txn(in_txn=True)
        assert txn is not None
        self._txn = None
        self._failure = None  # the failed records are discarded with the transaction
        self._broker.end_txn(txn, commit=False)

    async def stop(self) -> None:
        self._stopped = True
        self._failure = None

    _SEND_OPTIONS: ClassVar[frozenset[str]] = SendOptions.__optional_keys__ | SendOptions.__required_keys__

    async def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> asyncio.Future[RecordMetadata]:
        if options and not self._SEND_OPTIONS.issuperset(options):  # as the Kafka producer's keywords
            unknown = sorted(options.keys() - self._SEND_OPTIONS)
            raise TypeError(f"send() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        partition = options.get("partition")
        if not self._started or self._stopped:
            raise TransportError("memory producer is not running: call start() before send() and not after stop()")
        txn = self._check_txn(in_txn=True) if self.transactional_id is not None else None
        if txn is not None and txn.failed is not None:
            raise ProducerError(f"producer {self.transactional_id!r} cannot send: {txn.failed}; abort the transaction")
        n = len(self._broker.topic(topic).partitions)
        if partition is None:
            if key is not None:
                partition = default_partition(key, n)
            else:
                partition = self._next.get(topic, 0) % n
                self._next[topic] = partition + 1
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        faults = self._broker.faults
        if faults.active:
            for kind in ("send_fail", "send_cancel"):
                if faults.take(kind):
                    return self._fail(fut, kind, TP(topic, partition), txn)
        meta = self._broker.append(
            TP(topic, partition), key, value, options.get("timestamp_ms"), options.get("headers") or (), txn
        )
        fut.set_result(meta)
        return fut

    def _fail(
        self, fut: asyncio.Future[RecordMetadata], kind: str, tp: TP, txn: _Txn | None
    ) -> asyncio.Future[RecordMetadata]:
        what = "was cancelled" if kind == "send_cancel" else "failed"
        message = f"delivery to {tp.topic}[{tp.partition}] {what} (injected); offsets past it must not be committed"
        if self._failure is None:
            self._failure = message
        if txn is not None and txn.failed is None:
            txn.failed = message
        if kind == "send_cancel":
            fut.cancel()
        else:
            fut.set_exception(ProducerError(message))
            fut.exception()  # retrieved: reported by flush(), not by the garbage collector
        return fut

    async def flush(self) -> None:
        if self._failure is not None:
            raise ProducerError(self._failure)

    async def partitions_for(self, topic: str) -> int:
        return len(self._broker.topic(topic).partitions)


class MemoryConsumer:
    """A group member (``subscribe``) or a group-less reader (``assign``) with Kafka's fetch rules."""

    def __init__(
        self, broker: _Broker, group_id: str | None, assignor: Assignor | None,
        auto_offset_reset: str = "earliest", isolation_level: str = "read_uncommitted", **settings: Any,
    ) -> None:  # fmt: skip
        if auto_offset_reset not in ("earliest", "latest"):
            raise ConfigError(
                "auto_offset_reset", f"{auto_offset_reset!r} is not supported", "use 'earliest' or 'latest'"
            )
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ConfigError(
                "isolation_level", f"{isolation_level!r} is not supported", "use 'read_uncommitted' or 'read_committed'"
            )
        self._read_committed = isolation_level == "read_committed"
        self._broker = broker
        self._group_id = group_id
        self._assignor = assignor
        self._reset_earliest = auto_offset_reset == "earliest"
        self.member_id = broker.next_member_id(group_id or "reader")
        self._topics: tuple[str, ...] = ()
        self._listener: RebalanceListener | None = None
        self._assigned: set[TP] = set()
        self._paused: set[TP] = set()
        self._positions: dict[TP, int] = {}
        self._fetched: set[TP] = set()  # answered by a fetch since assigned: highwater() is known
        self._blocked = False  # no fetching while a rebalance is in flight for this member
        self._error: Exception | None = None
        self._rr = 0
        self._started = self._stopped = False

    # -- lifecycle and group membership -------------------------------------------------------

    def _group(self) -> _Group | None:
        return self._broker.group(self._group_id) if self._group_id is not None else None

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        if self._group_id is None:
            raise TransportError(
                "subscribe() needs a consumer created with a group_id; use assign() to read without a group"
            )
        self._topics, self._listener = tuple(topics), listener
        group = self._group()
        if self._started and not self._stopped and group is not None and self in group.members:
            group.request_rebalance()

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        group = self._group()
        if self._topics and group is not None:
            self._blocked = True
            group.members.append(self)
            group.request_rebalance()

    async def stop(self) -> None:
        """Leave the group (like aiokafka: no revoke callback; the caller commits before stopping)."""
        if self._stopped:
            return
        self._stopped = True
        self._assigned.clear()
        self._fetched.clear()
        self._positions.clear()
        group = self._group()
        if group is not None and self in group.members:
            group.members.remove(self)
            group.request_rebalance()
        self._broker.wake()

    async def _revoke(self) -> None:
        self._blocked = True
        old = set(self._assigned)
        try:
            if self._listener is not None:  # still owns `old` here, so it may commit them
                await self._listener.on_partitions_revoked(old)
        except Exception as exc:
            log.exception("memory transport: on_partitions_revoked failed for %s", self.member_id)
            self._error = exc
        finally:
            self._assigned.clear()
            self._fetched.clear()
            self._positions.clear()
            self._paused.clear()

    async def _assign_from_group(self, tps: list[TP], user_data: bytes) -> None:
        if self._assignor is not None:
            self._assignor.on_assignment(list(tps), user_data)
        self._assigned = set(tps)
        try:
            if self._listener is not None:
                await self._listener.on_partitions_assigned(set(tps))
        except Exception as exc:
            log.exception("memory transport: on_partitions_assigned failed for %s", self.member_id)
            self._error = exc
        finally:
            self._blocked = False
            self._broker.wake()

    def assign(self, partitions: Sequence[TP]) -> None:
        if self._topics:
            raise TransportError("assign() cannot be mixed with subscribe() on one consumer; use a second consumer")
        self._assigned = set(partitions)
        self._fetched.clear()  # a new assignment: ends unknown until fetched, as on Kafka
        self._positions = {tp: p for tp, p in self._positions.items() if tp in self._assigned}
        self._paused &= self._assigned
        self._broker.wake()

    def assignment(self) -> set[TP]:
        return set(self._assigned)

    # -- fetching -------------------------------------------------------------------------------

    async def getmany(
        self, *partitions: TP, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TP, list[Record]]:
        if not self._started or self._stopped:
            raise TransportError("memory consumer is not running: call start() before getmany() and not after stop()")
        limit = DEFAULT_MAX_RECORDS if max_records is None else max_records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            if self._error is not None:
                exc, self._error = self._error, None
                raise TransportError(f"rebalance failed for member {self.member_id}: {exc!r}") from exc
            batch = self._fetch(limit, partitions)
            remaining = deadline - loop.time()
            if batch or remaining <= 0 or self._stopped:
                return batch
            await self._broker.wait(remaining)

    def _fetch(self, limit: int, only: tuple[TP, ...] = ()) -> dict[TP, list[Record]]:
        out: dict[TP, list[Record]] = {}
        tps = sorted((self._assigned - self._paused).intersection(only) if only else self._assigned - self._paused)
        if self._blocked or not tps:
            return out
        start = self._rr % len(tps)  # rotate so one busy partition cannot starve the others
        self._rr += 1
        for tp in tps[start:] + tps[:start]:
            if limit <= 0:
                break
            if tp.topic not in self._broker.topics:
                continue
            part = self._broker.partition(tp)
            self._fetched.add(tp)
            pos = self._resolve(tp, part)
            recs = part.records[pos : min(self._end(part), pos + limit)]
            self._positions[tp] = pos + len(recs)  # aborted records are skipped, not returned
            if self._read_committed and part.aborted and recs:
                recs = [r for r in recs if r.offset not in part.aborted]
            if recs:
                out[tp] = recs
                limit -= len(recs)
        return out

    def _end(self, part: _Partition) -> int:
        """How far this consumer may read: the last stable offset under read_committed."""
        return part.stable_end() if self._read_committed else part.end()

    def _resolve(self, tp: TP, part: _Partition) -> int:
        """Position, else committed offset, else auto_offset_reset; out-of-range also resets."""
        pos = self._positions.get(tp)
        if pos is None:
            group = self._group()
            pos = group.committed.get(tp) if group is not None else None
        if pos is None or not part.log_start_offset <= pos <= part.end():
            pos = part.log_start_offset if self._reset_earliest else part.stable_end()
        self._positions[tp] = pos
        return pos

    def _check_assigned(self, tp: TP) -> None:
        if tp not in self._assigned:
            raise TransportError(f"{tp} is not assigned to this consumer (assigned: {sorted(self._assigned)})")

    def pause(self, *partitions: TP) -> None:
        for tp in partitions:
            self._check_assigned(tp)
        self._paused.update(partitions)

    def resume(self, *partitions: TP) -> None:
        for tp in partitions:
            self._check_assigned(tp)
        self._paused.difference_update(partitions)
        self._broker.wake()

    def seek(self, partition: TP, offset: int) -> None:
        self._check_assigned(partition)
        self._positions[partition] = offset
        self._broker.wake()

    async def seek_to_beginning(self, *partitions: TP) -> None:
        for tp in partitions or tuple(self._assigned):
            self.seek(tp, self._broker.partition(tp).log_start_offset)

    async def position(self, partition: TP) -> int:
        self._check_assigned(partition)
        return self._resolve(partition, self._broker.partition(partition))

    def highwater(self, partition: TP) -> int | None:
        """As Kafka's: known from the first fetch that asked for the partition since it was assigned."""
        if partition not in self._fetched:
            return None
        try:
            return self._end(self._broker.partition(partition))
        except TransportError:
            return None

    async def commit(self, offsets: Mapping[TP, int]) -> None:
        group = self._group()
        if group is None:
            raise TransportError("commit() needs a consumer created with a group_id")
        if self._topics:  # a member may only commit what it owns (Kafka: CommitFailedError)
            lost = sorted(tp for tp in offsets if tp not in self._assigned)
            if lost:
                raise CommitFailed(f"commit failed: {lost} are not assigned to {self.member_id} (moved by a rebalance)")
        if offsets and self._broker.faults.take("commit_fail"):
            raise CommitFailed(f"commit of {len(offsets)} offsets failed (injected: coordinator not available)")
        group.committed.update(offsets)

    async def committed(self, partition: TP) -> int | None:
        group = self._group()
        if group is None:  # as Kafka: offsets belong to a group
            raise TransportError("committed() needs a consumer created with a group_id")
        offset: int | None = group.committed.get(partition)
        return offset


class MemoryTransport:
    """``memory://[name]``: a process-global broker per URL, shared by every transport using it."""

    _brokers: ClassVar[dict[str, _Broker]] = {}

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme != "memory":
            raise ConfigError("broker", f"{url!r} is not a memory:// URL", "use memory:// or memory://<name>")
        self.url = url
        self._key = (parts.netloc + parts.path).rstrip("/")

    @classmethod
    def reset_all(cls) -> None:
        """Drop every broker (topics, offsets, groups); tests call this between cases."""
        cls._brokers.clear()

    @property
    def faults(self) -> MemoryFaults:
        """The broker's fault switches (shared by every client of this URL), for tests."""
        return self._broker.faults

    @property
    def _broker(self) -> _Broker:
        broker = self._brokers.get(self._key)
        if broker is None:
            broker = self._brokers[self._key] = _Broker()
        return broker

    def producer(self, **settings: Any) -> MemoryProducer:
        return MemoryProducer(self._broker, **settings)

    def consumer(self, *, group_id: str | None, assignor: Assignor | None = None, **settings: Any) -> MemoryConsumer:
        return MemoryConsumer(self._broker, group_id, assignor, **settings)

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> dict[str, int]:
        broker = self._broker
        for spec in specs:  # check everything first so a mismatch creates nothing
            if spec.partitions < 1:
                raise TransportError(f"topic {spec.name!r} needs at least 1 partition, got {spec.partitions}")
            existing = broker.topics.get(spec.name)
            if existing is not None and len(existing.partitions) != spec.partitions:
                raise PartitionCountMismatch(spec.name, len(existing.partitions), spec.partitions)
        created = set()
        for spec in specs:
            if spec.name not in broker.topics:
                broker.topics[spec.name] = _Topic(spec, [_Partition() for _ in range(spec.partitions)])
                created.add(spec.name)
        for group in broker.groups.values():  # Kafka rebalances when a subscribed topic appears
            if any(created.intersection(m._topics) for m in group.members):
                group.request_rebalance()
        return {spec.name: len(broker.topics[spec.name].partitions) for spec in specs}  # as kafka://: the asked ones

    async def partition_count(self, topic: str) -> int | None:
        t = self._broker.topics.get(topic)
        return len(t.partitions) if t is not None else None

    async def list_topics(self) -> list[str]:
        return sorted(self._broker.topics)

    async def group_members(self, group_id: str) -> list[str]:
        group = self._broker.groups.get(group_id)
        return [m.member_id for m in group.members] if group is not None else []

    async def close(self) -> None:
        return None  # the broker outlives its clients, like a real one

    async def settle(self) -> None:
        """Wait until no group on this broker has a rebalance in flight (for tests and the harness)."""
        while tasks := [t for g in self._broker.groups.values() if (t := g.pending()) is not None]:
            await asyncio.gather(*tasks, return_exceptions=True)

    def read_topic(self, topic: str, *, committed: bool = False) -> list[Record]:
        """Every record of ``topic``, partition by partition, for assertions in tests.

        ``committed=True`` reads like a read_committed consumer: no open or aborted transactions.
        """
        out: list[Record] = []
        for p in self._broker.topic(topic).partitions:
            recs = p.records[p.log_start_offset : p.stable_end() if committed else p.end()]
            out.extend(r for r in recs if not committed or r.offset not in p.aborted)
        return out

    def end_offsets(self, partitions: Sequence[TP]) -> dict[TP, int]:
        return {tp: self._broker.partition(tp).end() for tp in partitions}


if TYPE_CHECKING:  # mypy proves the classes satisfy the transport protocols
    from agentstream.transport.base import Consumer, Producer, Transport

    def _conforms(t: MemoryTransport, p: MemoryProducer, c: MemoryConsumer) -> tuple[Transport, Producer, Consumer]:
        return t, p, c
