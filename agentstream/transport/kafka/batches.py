"""Produce batching for the ``kafka://`` producer: records go into one open batch per partition.

Why not ``AIOKafkaProducer.send`` per record: it costs ~15 µs of pure Python per record (metadata
set rebuilds, murmur2 in Python, a future per record resolved by a loop callback, an async
accumulator append). A stream processor already knows each record's partition (the key ->
partition memo) and needs delivery only per commit, so it appends to aiokafka's C record
builder itself, through :class:`RecordBuilder` (aiokafka's BatchBuilder protocol with native
fields), and queues whole batches with the public ``send_batch`` API: one future per batch, not
per record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

from aiokafka.producer.message_accumulator import BatchBuilder  # type: ignore[import-untyped,unused-ignore]
from aiokafka.structs import RecordMetadata, TopicPartition  # type: ignore[import-untyped,unused-ignore]

__all__ = ["OpenBatch", "RecordBuilder", "RecordDelivery"]


FailureHook = Callable[["OpenBatch", BaseException], None]


def _direct_append_fits() -> bool:
    """Whether this aiokafka's BatchBuilder holds the C record builder :class:`RecordBuilder`
    takes over (checked once at import; else the producer fills aiokafka's BatchBuilder)."""
    try:
        probe = BatchBuilder(1024, 0)
        records = probe._builder
        return (
            probe._key_serializer is None
            and probe._value_serializer is None
            and all(
                callable(getattr(records, name, None)) for name in ("append", "build", "size", "set_producer_state")
            )
        )
    except Exception:
        return False


_DIRECT = _direct_append_fits()


class RecordBuilder:
    """aiokafka's ``BatchBuilder`` as its producer uses a batch handed to ``send_batch``
    (``append``, ``close``, ``closed``, ``record_count``, ``size``, ``_set_producer_state``,
    ``_build``), over the C record builder aiokafka's ``create_batch()`` configured.

    Why our own: the producer appends every record itself (:meth:`KafkaProducer.send_now`), and
    aiokafka keeps the record count and the closed flag as Python attributes, three attribute
    lookups a record; here they are native fields. Every append checks ``is_closed``: aiokafka's
    sender takes the batch in two steps, and the batch closes at the first. An idempotent or
    transactional producer gives it its sequence numbers (``_set_producer_state``, as many as
    ``record_count()`` says) and builds it later, in another task: a record appended between the
    two would go out under a sequence number the broker expects on the next batch
    (OutOfOrderSequenceNumber, which aborts the transaction). aiokafka's own BatchBuilder stays
    open there; this one closes.
    """

    def __init__(self, records: Any) -> None:
        self.records: Any = records  # aiokafka's DefaultRecordBatchBuilder; None once built
        self.append_record: Any = records.append  # bound once: (offset, timestamp, key, value, headers)
        self.count = 0  # records appended: the next record's offset relative to the batch
        self.is_closed = False
        self._buffer: Any = None

    def append(self, *, timestamp: int | None, key: bytes | None, value: bytes | None, headers: Any = None) -> Any:
        """Append one record; its metadata, or None when the batch is closed or full (then closed)."""
        return self.add(timestamp, key, value, [] if headers is None else headers)

    def add(self, timestamp: int | None, key: bytes | None, value: bytes | None, headers: Any) -> Any:
        """:meth:`append` with positional arguments (the producer's per-record call: the cheapest)."""
        if self.is_closed:
            return None
        meta = self.append_record(self.count, timestamp, key, value, headers)
        if meta is None:
            self.is_closed = True
            return None
        self.count += 1
        return meta

    def close(self) -> None:
        self.is_closed = True

    def closed(self) -> bool:
        return self.is_closed

    def record_count(self) -> int:
        return self.count

    def size(self) -> int:
        return len(self._buffer) if self._buffer is not None else int(self.records.size())

    def _set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """The sender assigned sequence numbers for ``record_count()`` records: no more may come."""
        self.is_closed = True
        self.records.set_producer_state(producer_id, producer_epoch, base_sequence)

    def _build(self) -> Any:
        """The batch's bytes (closes it; the C builder builds once)."""
        self.is_closed = True
        if self._buffer is None:
            self._buffer = self.records.build()
            self.records = None
            self.append_record = None
        return self._buffer


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
        # aiokafka's BatchBuilder becomes our RecordBuilder over its C record builder (what is
        # handed to send_batch); another kind of builder (tests script one) is filled as it is.
        # ``records``: the RecordBuilder, which :meth:`append` calls natively; else None.
        self.records: RecordBuilder | None = (
            RecordBuilder(builder._builder) if type(builder) is BatchBuilder and _DIRECT else None
        )
        self.builder: Any = builder if self.records is None else self.records
        self.generation = generation  # the producer's generation (stop/abort start a new one)
        self._on_failed = on_failed
        # Resolved from aiokafka's batch future once the broker acknowledged (or refused) it.
        self.delivered: asyncio.Future[RecordMetadata] = loop.create_future()

    def append(self, timestamp_ms: int | None, key: bytes | None, value: bytes | None, headers: Any) -> Any:
        """Append one record (positional arguments: the cheapest call); its metadata, or None
        when the batch is closed or full."""
        records = self.records
        if records is not None:
            return records.add(timestamp_ms, key, value, [] if headers is None else headers)
        return self.builder.append(timestamp=timestamp_ms, key=key, value=value, headers=headers)

    def track(self, aiokafka_future: asyncio.Future[Any]) -> None:
        aiokafka_future.add_done_callback(self._settle)

    def _settle(self, fut: asyncio.Future[Any]) -> None:
        if self.delivered.done():  # failed first (a fence): aiokafka's outcome is only marked seen
            if not fut.cancelled():
                fut.exception()
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
