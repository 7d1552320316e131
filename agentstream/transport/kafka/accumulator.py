"""The producer's open batches (one per partition) and its sticky failure.

A batch that fails, is cancelled or could not be queued leaves the open batches at once, so
nothing is appended to a dead batch, and its failure is remembered: every later ``flush()``
raises it until the producer is stopped or its transaction aborted (a new *generation* of
batches starts then, and failures of older batches no longer count). A commit that follows any
flush can therefore never pass an undelivered record.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...exceptions import GroupFenced, ProducerError
from .batches import OpenBatch
from .config import describe

__all__ = ["Accumulator"]


class Accumulator:
    """Open batches per topic and partition, the batches handed over since the last flush, and
    the first failure of this generation."""

    def __init__(self) -> None:
        self.open: dict[str, dict[int, OpenBatch]] = {}
        self.sent: list[OpenBatch] = []  # handed to aiokafka since the last flush
        self.failure: tuple[str, BaseException] | None = None  # (message, cause): raised by every flush
        self.generation = 0  # +1 at stop and abort: failures of older batches no longer count

    def topic(self, topic: str) -> dict[int, OpenBatch]:
        """The open batches of ``topic`` by partition (the same dict from now on)."""
        return self.open.setdefault(topic, {})

    def new_batch(self, topic: str, partition: int, builder: Any, loop: asyncio.AbstractEventLoop) -> OpenBatch:
        """Open the next batch of a partition (replacing a full, taken or failed one)."""
        batch = self.open[topic][partition] = OpenBatch(
            topic, partition, builder, loop, self._batch_failed, self.generation
        )
        return batch

    def reset(self) -> None:
        """Forget open batches and the remembered failure: a new generation of batches starts."""
        self.generation += 1
        for batches in self.open.values():
            batches.clear()
        self.sent = []
        self.failure = None

    def fail_all(self, error: BaseException) -> None:
        """Fail every open and handed-over batch with ``error`` (a fence), which every later flush
        raises; also when every batch had already been delivered."""
        for batches in list(self.open.values()):
            for batch in list(batches.values()):
                batch.fail(error)
        for batch in self.sent:
            batch.fail(error)
        if self.failure is None:
            self.failure = (str(error), error)

    def take_sent(self) -> list[OpenBatch]:
        """The batches handed over since the last call (a flush waits for exactly these)."""
        sent, self.sent = self.sent, []
        return sent

    def _batch_failed(self, batch: OpenBatch, error: BaseException) -> None:
        """Called by a batch the moment it fails: never append to it again, and remember why."""
        open_batches = self.open.get(batch.topic)
        if open_batches is not None and open_batches.get(batch.partition) is batch:
            del open_batches[batch.partition]
        if batch.generation != self.generation or self.failure is not None:
            return
        if isinstance(error, ProducerError):
            self.failure = (str(error), error)
        else:
            what = "was cancelled" if isinstance(error, asyncio.CancelledError) else "failed"
            self.failure = (
                f"delivery to {batch.topic}[{batch.partition}] {what}: "
                f"{describe(error).rstrip('.')}; offsets past it must not be committed",
                error,
            )

    def raise_failure(self) -> None:
        """Raise ProducerError if a batch of this generation failed."""
        if self.failure is not None:
            message, cause = self.failure
            if isinstance(cause, GroupFenced):
                raise cause  # a fence is not a delivery failure: the worker rejoins rather than stops
            raise ProducerError(message) from cause
