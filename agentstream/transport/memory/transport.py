"""``memory://[name]``: the transport that hands out the memory broker's clients, one broker per URL."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from agentstream.exceptions import ConfigError, PartitionCountMismatch, TransportError
from agentstream.transport.base import TP, Assignor, TopicSpec

from .broker import MemoryBroker
from .consumer import MemoryConsumer
from .faults import MemoryFaults
from .partitions import PartitionLog, Record, TopicLog
from .producer import MemoryProducer

__all__ = ["MemoryTransport"]


class MemoryTransport:
    """``memory://[name]``: a process-global broker per URL, shared by every transport using it."""

    _brokers: ClassVar[dict[str, MemoryBroker]] = {}

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
    def broker(self) -> MemoryBroker:
        """The broker behind this URL (shared by every client of it): what tests inspect and steer."""
        return self._broker

    @property
    def faults(self) -> MemoryFaults:
        """The broker's fault switches (shared by every client of this URL), for tests."""
        return self._broker.faults

    @property
    def _broker(self) -> MemoryBroker:
        broker = self._brokers.get(self._key)
        if broker is None:
            broker = self._brokers[self._key] = MemoryBroker()
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
                broker.topics[spec.name] = TopicLog(spec, [PartitionLog() for _ in range(spec.partitions)])
                created.add(spec.name)
        for group in broker.groups.values():  # Kafka rebalances when a subscribed topic appears
            if any(created.intersection(m.subscription) for m in group.members):
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
            out.extend(p.read(p.log_start_offset, None, read_committed=committed)[0])
        return out

    def end_offsets(self, partitions: Sequence[TP], *, committed: bool = False) -> dict[TP, int]:
        """Each partition's log end (``committed=True``: its last stable offset, where a
        read_committed consumer stops before the first open transaction)."""
        return {tp: self._broker.partition(tp).readable_end(committed) for tp in partitions}


if TYPE_CHECKING:  # mypy proves the classes satisfy the transport protocols
    from agentstream.transport.base import Consumer, Producer, Transport

    def _conforms(t: MemoryTransport, p: MemoryProducer, c: MemoryConsumer) -> tuple[Transport, Producer, Consumer]:
        return t, p, c
