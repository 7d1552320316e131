"""Hand-over of open batches to aiokafka's accumulator, in order, with the real deadline.

aiokafka's sender task takes a queued batch when the broker connection is free; until then the
batch stays open and goes on filling. ``send_batch`` waits while the partition's previous batch
is still queued: the same back-pressure ``AIOKafkaProducer.send`` applies to a producer faster
than the broker.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import errors as kafka_errors  # type: ignore[import-untyped,unused-ignore]

from ...exceptions import ProducerError
from .batches import OpenBatch
from .config import describe

__all__ = ["Sender"]


class Sender:
    """Queues batches in aiokafka's accumulator, one hand-over at a time per partition."""

    def __init__(self, request_timeout_s: float) -> None:
        self._request_timeout_s = request_timeout_s
        self._locks: dict[str, list[asyncio.Lock]] = {}

    def learn(self, topic: str, count: int) -> None:
        """Prepare the per-partition hand-over order of a topic (its first send)."""
        self._locks.setdefault(topic, [asyncio.Lock() for _ in range(count)])

    async def hand_over(self, client: Any, batch: OpenBatch) -> None:
        """Queue ``batch`` with aiokafka; a batch that cannot be queued (error, cancel) fails at once."""
        deadline = time.monotonic() + self._request_timeout_s
        try:
            # One hand-over at a time per partition, in the order the batches were opened: the
            # lock is FIFO, and nothing awaits between opening a batch and queueing for the lock.
            # Without it, tasks sending to one partition can overtake each other in send_batch.
            async with self._locks[batch.topic][batch.partition]:
                while True:
                    try:
                        fut = await client.send_batch(batch.builder, batch.topic, partition=batch.partition)
                        break
                    except kafka_errors.KafkaTimeoutError:
                        # aiokafka's add_batch subtracts the time since its *first* wait on every
                        # wait, so it can give up early: keep the real deadline (request_timeout_ms).
                        if time.monotonic() >= deadline:
                            raise
        except asyncio.CancelledError:
            # Never queued: its records (this one and any appended while it waited) will never
            # reach the broker. Failing it drops it from the open batches and makes every later
            # flush() raise, so no commit passes them.
            batch.fail(
                ProducerError(
                    f"send to {batch.topic}[{batch.partition}] was cancelled before its batch "
                    "was queued; its records were not delivered"
                )
            )
            raise
        except (kafka_errors.KafkaError, kafka_errors.IllegalOperation, AssertionError) as exc:
            error = ProducerError(f"could not send to {batch.topic}[{batch.partition}]: {describe(exc)}")
            batch.fail(error)
            raise error from exc
        batch.track(fut)
