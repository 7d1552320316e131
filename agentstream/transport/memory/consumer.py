"""The memory consumer: a group member or a group-less reader, with Kafka's fetch and commit rules."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agentstream.exceptions import CommitFailed, ConfigError, GroupFenced, TransportError
from agentstream.transport.base import TP, Assignor, RebalanceListener

from .broker import MemoryBroker
from .group import ConsumerGroup
from .partitions import PartitionLog, Record

__all__ = ["MemoryConsumer", "DEFAULT_MAX_RECORDS"]

DEFAULT_MAX_RECORDS = 500
log = logging.getLogger(__name__)


class MemoryConsumer:
    """A group member (``subscribe``) or a group-less reader (``assign``) with Kafka's fetch rules."""

    def __init__(
        self, broker: MemoryBroker, group_id: str | None, assignor: Assignor | None,
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

    def _group(self) -> ConsumerGroup | None:
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

    def membership_deadline(self) -> float | None:
        """None: the memory broker's members have no sessions (a member leaves only by stopping)."""
        return None

    def request_rejoin(self) -> None:
        group = self._group()
        if self._started and not self._stopped and group is not None and self in group.members:
            group.request_rebalance()

    async def stop(self) -> None:
        """Leave the group (like aiokafka: no revoke callback; the caller commits before stopping)."""
        if self._stopped:
            return
        self._stopped = True
        self._drop_assignment()
        group = self._group()
        if group is not None and self in group.members:
            group.members.remove(self)
            group.request_rebalance()
        self._broker.wake()

    def _drop_assignment(self) -> None:
        self._assigned.clear()
        self._fetched.clear()
        self._positions.clear()
        self._paused.clear()

    # -- called by its group during a rebalance (see group.GroupMember) ------------------------------

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._topics

    @property
    def assignor(self) -> Assignor | None:
        return self._assignor

    async def revoke_all(self) -> None:
        self._blocked = True
        old = set(self._assigned)
        try:
            if self._listener is not None:  # still owns `old` here, so it may commit them
                await self._call_listener(self._listener.on_partitions_revoked, old)
        finally:
            self._drop_assignment()

    async def take_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        if self._assignor is not None:
            self._assignor.on_assignment(list(partitions), user_data)
        self._assigned = set(partitions)
        try:
            if self._listener is not None:
                await self._call_listener(self._listener.on_partitions_assigned, set(partitions))
        finally:
            self._blocked = False
            self._broker.wake()

    def rebalance_failed(self, exc: Exception) -> None:
        self._error = exc

    async def _call_listener(self, hook: Callable[[set[TP]], Awaitable[None]], partitions: set[TP]) -> None:
        """Run a rebalance hook; its failure is raised from the next getmany, as Kafka's consumer does."""
        try:
            await hook(partitions)
        except Exception as exc:
            log.exception("memory transport: %s failed for %s", getattr(hook, "__name__", hook), self.member_id)
            self._error = exc

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
            recs, next_offset = part.read(self._resolve(tp, part), limit, read_committed=self._read_committed)
            self._positions[tp] = next_offset  # past aborted records too: they are skipped, not returned
            if recs:
                out[tp] = recs
                limit -= len(recs)
        return out

    def _resolve(self, tp: TP, part: PartitionLog) -> int:
        """Position, else committed offset, else auto_offset_reset; out-of-range also resets."""
        pos = self._positions.get(tp)
        if pos is None:
            group = self._group()
            pos = group.committed.get(tp) if group is not None else None
        if pos is None or not part.log_start_offset <= pos <= part.end():
            pos = part.log_start_offset if self._reset_earliest else part.stable_end()
        self._positions[tp] = pos
        return pos

    def _check_assigned(self, *partitions: TP) -> None:
        for tp in partitions:
            if tp not in self._assigned:
                raise TransportError(f"{tp} is not assigned to this consumer (assigned: {sorted(self._assigned)})")

    def pause(self, *partitions: TP) -> None:
        self._check_assigned(*partitions)
        self._paused.update(partitions)

    def resume(self, *partitions: TP) -> None:
        self._check_assigned(*partitions)
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
            return self._broker.partition(partition).readable_end(self._read_committed)
        except TransportError:
            return None

    def _require_group(self, method: str) -> ConsumerGroup:
        group = self._group()
        if group is None:  # as Kafka: offsets belong to a group
            raise TransportError(f"{method}() needs a consumer created with a group_id")
        return group

    async def commit(self, offsets: Mapping[TP, int]) -> None:
        group = self._require_group("commit")
        if self._topics:  # a member may only commit what it owns (Kafka: CommitFailedError)
            lost = sorted(tp for tp in offsets if tp not in self._assigned)
            if lost:
                raise GroupFenced(f"commit failed: {lost} are not assigned to {self.member_id} (moved by a rebalance)")
        if offsets and self._broker.faults.take("commit_fail"):
            raise CommitFailed(f"commit of {len(offsets)} offsets failed (injected: coordinator not available)")
        group.committed.update(offsets)

    async def committed(self, partition: TP) -> int | None:
        offset: int | None = self._require_group("committed").committed.get(partition)
        return offset
