"""Produce batching for the ``kafka://`` producer: records go into one open batch per partition.

Why not ``AIOKafkaProducer.send`` per record: it costs ~15 µs of pure Python per record (metadata
set rebuilds, murmur2 in Python, a future per record resolved by a loop callback, an async
accumulator append). A stream processor already knows each record's partition (the key ->
partition memo) and needs delivery only per commit, so it appends to aiokafka's
:class:`BatchBuilder` (C record encoding) itself and queues whole batches with the public
``send_batch`` API: one future per batch, not per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

from aiokafka.producer.message_accumulator import BatchBuilder  # type: ignore[import-untyped,unused-ignore]
from aiokafka.structs import RecordMetadata, TopicPartition  # type: ignore[import-untyped,unused-ignore]

__all__ = ["OpenBatch", "RecordDelivery"]


FailureHook = Callable[["OpenBatch", BaseException], None]


def _direct_append_fits() -> bool:
    """Whether this aiokafka's BatchBuilder has the parts :meth:`OpenBatch` appends through
    (checked once at import; else every append goes through ``BatchBuilder.append``)."""
    try:
        probe = BatchBuilder(1024, 0)
        return (
            probe._relative_offset == 0
            and probe._closed is False
            and probe._key_serializer is None
            and probe._value_serializer is None
            and callable(probe._builder.append)
        )
    except Exception:
        return False


_DIRECT = _direct_append_fits()


class OpenBatch:
    """The batch being filled for one partition, and later its delivery.

    ``on_failed`` is called synchronously the moment the batch fails or is cancelled (before any
    waiter wakes up), so the producer can stop appending to it and remember the failure at once.
    """

    __slots__ = ("topic", "partition", "builder", "records", "delivered", "generation", "_on_failed")

    def __init__(
        self,
        topic: str,
        partition: int,
        builder: Any,
        loop: asyncio.AbstractEventLoop,
        on_failed: FailureHook | None = None,
        generation: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.builder = builder
        # aiokafka's C record builder inside its BatchBuilder, for the producer's per-record
        # append (what BatchBuilder.append does, without its two Python frames); None when the
        # builder is another kind (tests script one): use builder.append.
        self.records: Any = builder._builder if type(builder) is BatchBuilder and _DIRECT else None
        self.generation = generation  # the producer's generation (stop/abort start a new one)
        self._on_failed = on_failed
        # Resolved from aiokafka's batch future once the broker acknowledged (or refused) it.
        self.delivered: asyncio.Future[RecordMetadata] = loop.create_future()

    def track(self, aiokafka_future: asyncio.Future[Any]) -> None:
        aiokafka_future.add_done_callback(self._settle)

    def _settle(self, fut: asyncio.Future[Any]) -> None:
        if self.delivered.done():
            return
        if fut.cancelled():
            self.delivered.cancel()
            self._failed(asyncio.CancelledError())
            return
        error = fut.exception()  # also marks aiokafka's future retrieved
        if error is not None:
            self._set_failed(error)
        else:
            self.delivered.set_result(fut.result())

    def fail(self, error: BaseException) -> None:
        """Settle the batch as failed (it was never queued, or its hand-over failed or was cancelled)."""
        if not self.delivered.done():
            self._set_failed(error)

    def _set_failed(self, error: BaseException) -> None:
        self.delivered.set_exception(error)
        self.delivered.exception()  # retrieved: the producer reports it from flush(), not the GC
        self._failed(error)

    def _failed(self, error: BaseException) -> None:
        hook, self._on_failed = self._on_failed, None
        if hook is not None:
            hook(self, error)


class RecordDelivery:
    """Delivery of one record: a future-like view of its batch's delivery.

    Offers what callers use of an ``asyncio.Future[RecordMetadata]``: ``await``, ``done()``,
    ``cancelled()``, ``exception()``, ``result()`` and ``add_done_callback``.
    """

    __slots__ = ("_batch", "_meta")

    def __init__(self, batch: OpenBatch, meta: Any) -> None:
        self._batch = batch
        self._meta = meta  # aiokafka's per-record metadata from the builder: relative offset, timestamp

    def done(self) -> bool:
        return self._batch.delivered.done()

    def cancelled(self) -> bool:
        return self._batch.delivered.cancelled()

    def exception(self) -> BaseException | None:
        return self._batch.delivered.exception()

    def result(self) -> RecordMetadata:
        batch = self._batch
        md = batch.delivered.result()
        timestamp = self._meta.timestamp if md.timestamp in (None, -1) else md.timestamp
        return RecordMetadata(
            batch.topic,
            batch.partition,
            TopicPartition(batch.topic, batch.partition),
            md.offset + self._meta.offset,
            timestamp,
            md.timestamp_type,
            md.log_start_offset,
        )

    def add_done_callback(self, fn: Callable[[RecordDelivery], Any]) -> None:
        self._batch.delivered.add_done_callback(lambda _f: fn(self))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        yield from asyncio.shield(self._batch.delivered).__await__()  # shield: one waiter cancelled != batch cancelled
        return self.result()

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<RecordDelivery {self._batch.topic}[{self._batch.partition}]+{self._meta.offset} {state}>"
