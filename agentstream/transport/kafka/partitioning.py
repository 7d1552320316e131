"""Where a record goes when the caller did not say: keyed records by Kafka's default partitioner
(memoised per key), keyless ones to one partition per batch (sticky, KIP-480).

Kept apart from the batches so the producer's hot path reads plain dicts: the producer's route
table holds this module's per-topic memo by reference.
"""

from __future__ import annotations

import random

from ..partitioner import C_HASH, default_partition

__all__ = ["Partitioning"]

# Keys memoised per topic (emptied when full). With the compiled hash a miss costs 0.1 us, so a
# small memo is enough for hot keys and a stream of distinct keys does not grow it by 10 MB; with
# the pure-Python hash (0.7 us a miss) it holds more.
_PARTITION_CACHE_SIZE = 10_000 if C_HASH else 100_000


class Partitioning:
    """Per topic: the partition count (learnt once from metadata), the key -> partition memo and
    the sticky partition of keyless records."""

    __slots__ = ("counts", "memos", "sticky")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.memos: dict[str, dict[bytes, int]] = {}
        self.sticky: dict[str, int] = {}  # keyless records: one partition per batch, then the next

    def learn(self, topic: str, count: int) -> dict[bytes, int]:
        """Record the topic's partition count; returns its key memo (the same dict from now on)."""
        self.counts[topic] = count
        return self.memos.setdefault(topic, {})

    def hash_partition(self, topic: str, key: bytes, count: int) -> int:
        """Kafka's default partitioner for keyed records, memoised per key.

        Keys repeat (words, customer ids): a dict hit costs less than even the C hash
        (:mod:`agentstream.transport.partitioner`), let alone aiokafka's pure-Python one. Same
        result as the Java client: toPositive(murmur2) % n.
        """
        cache = self.memos[topic]
        if len(cache) >= _PARTITION_CACHE_SIZE:
            cache.clear()
        partition = cache[key] = default_partition(key, count)
        return partition

    def sticky_partition(self, topic: str, count: int) -> int:
        """The partition keyless records of ``topic`` go to now (a random one to start with)."""
        partition = self.sticky.get(topic)
        if partition is None:
            partition = self.sticky[topic] = random.randrange(count)
        return partition

    def batch_opened(self, topic: str, partition: int) -> None:
        """Sticky partitioner (KIP-480): a new batch on the sticky partition moves keyless records on."""
        if partition == self.sticky.get(topic):
            self.sticky[topic] = (partition + 1) % self.counts[topic]
