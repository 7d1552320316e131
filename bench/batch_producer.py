"""The batch-API producer a careful user writes by hand with aiokafka: one ``BatchBuilder`` per
partition (``producer.create_batch()`` / ``append``), full batches handed over with
``producer.send_batch()``, the partition chosen once per distinct key (murmur2, as aiokafka's
default partitioner). The ``raw_batch_*`` baselines share it, so both measure the same care.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import murmur2


class BatchSender:
    """Appends records to per-(topic, partition) batches; ``flush()`` sends the open ones and waits."""

    def __init__(self, producer: AIOKafkaProducer, partitions: dict[str, int], *, memo: bool = True) -> None:
        self.producer = producer
        self.memo = memo  # off where every key is new (pass-through): a memo would only cost
        self.partitions = partitions
        self._open: dict[tuple[str, int], Any] = {}
        self._futures: list[asyncio.Future[Any]] = []
        self._partition_of: dict[tuple[str, bytes], int] = {}

    def partition(self, topic: str, key: bytes) -> int:
        if not self.memo:
            return (murmur2(key) & 0x7FFFFFFF) % self.partitions[topic]
        memo = self._partition_of
        p = memo.get((topic, key))
        if p is None:
            p = (murmur2(key) & 0x7FFFFFFF) % self.partitions[topic]
            memo[(topic, key)] = p
        return p

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        where = (topic, self.partition(topic, key))
        batch = self._open.get(where)
        if batch is None:
            batch = self._open[where] = self.producer.create_batch()
        if batch.append(key=key, value=value, timestamp=None) is None:
            await self._ship(where, batch)
            batch = self._open[where] = self.producer.create_batch()
            batch.append(key=key, value=value, timestamp=None)

    async def _ship(self, where: tuple[str, int], batch: Any) -> None:
        self._futures.append(await self.producer.send_batch(batch, where[0], partition=where[1]))

    async def flush(self) -> None:
        """Send every open batch and wait until the broker acknowledged all of them."""
        for where, batch in list(self._open.items()):
            if batch.record_count():
                await self._ship(where, batch)
        self._open.clear()
        futures, self._futures = self._futures, []
        if futures:
            await asyncio.gather(*futures)


async def topic_partitions(producer: AIOKafkaProducer, *topics: str) -> dict[str, int]:
    return {t: len(await producer.partitions_for(t)) for t in topics}
