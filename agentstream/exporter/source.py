"""``agentstream_changelog``: a PySpark Python Data Source reading a changelog topic.

Spark's own Kafka connector is a JVM jar that would have to be downloaded at run time; this
source needs nothing but the Python packages agentstream already uses. Each Kafka partition is
one Spark input partition with a fixed offset range ``[start, end)`` chosen on the driver when
the read starts, so every executor reads a consistent snapshot and a retried task reads exactly
the same records. Executors read with aiokafka and decode there (the driver never sees the data),
yielding Arrow record batches (no per-row Python->JVM conversion).

Direct use (``read_changelog`` sets all of this up from the app's table)::

    spark.dataSource.register(ChangelogDataSource)  # from agentstream.exporter.datasource
    df = (spark.read.format("agentstream_changelog")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("topic", "wordcount-word_counts-changelog")
          .load())

Options: ``bootstrap.servers``, ``topic`` (or ``spec``: a :class:`~.schema.TableSpec` as JSON),
``ranges`` (JSON ``[[partition, start, end], ...]``; default: every partition up to its end
now, computed when Spark plans the read), ``bookkeeping`` (``false``: no ``raw_key`` and
``tombstone`` columns, which only the latest-value computation needs), ``window.size.ms`` (windowed changelog without a
spec), ``idle.timeout`` (seconds a partition may make no progress before the read fails; 60).
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Iterator
from typing import Any, Protocol

import orjson
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ..bulk_gc import bulk_gc
from .offsets import ExportError, PartitionRange, snapshot_ranges
from .schema import TableSpec, bulk_decoder, side_decoder, split_session_key, split_window_key

__all__ = [
    "ChangelogReader",
    "ChangelogPartition",
    "ReadSettings",
    "SOURCE_NAME",
    "read_partition",
    "spec_from",
    "bookkeeping",
]

SOURCE_NAME = "agentstream_changelog"
BATCH_ROWS = 65_536  # at least this many rows per Arrow batch handed to Spark (amortises per-batch costs)
_KEY, _VALUE = operator.attrgetter("key"), operator.attrgetter("value")
_OFFSET, _TIMESTAMP = operator.attrgetter("offset"), operator.attrgetter("timestamp")


class ChangelogPartition(InputPartition):  # type: ignore[misc]
    """One Kafka partition's offset range (pickled to the executor that reads it)."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__((partition, start, end))
        self.partition, self.start, self.end = partition, start, end


def spec_from(options: Any) -> TableSpec:
    if "spec" in options:
        return TableSpec.loads(options["spec"])
    topic = options.get("topic")
    if not topic:
        raise ExportError("the agentstream_changelog source needs option 'topic' (or 'spec')")
    size = options.get("window.size.ms")
    return TableSpec(
        table=topic,
        topic=topic,
        key={"codec": "json", "type": "text"},
        value={"codec": "json_text", "type": "json"},
        window_size_ms=None if size is None else int(size),
    )


def reader_options(options: Any) -> tuple[TableSpec, str, str]:
    """(decode spec, topic, bootstrap servers) from a reader's options, batch and stream alike."""
    spec = spec_from(options)
    bootstrap = options.get("bootstrap.servers") or options.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ExportError("the agentstream_changelog source needs option 'bootstrap.servers'")
    return spec, options.get("topic") or spec.topic, str(bootstrap)


def bookkeeping(options: Any) -> bool:
    return str(options.get("bookkeeping", "true")).lower() != "false"


class ChangelogReader(DataSourceReader):  # type: ignore[misc]
    """Plans one input partition per Kafka partition; reads one in each executor task."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.spec, self.topic, self.bootstrap = reader_options(options)
        self.ranges: list[PartitionRange] | None = None
        if options.get("ranges"):
            self.ranges = [PartitionRange(int(p), int(s), int(e)) for p, s, e in orjson.loads(options["ranges"])]
        self.idle_timeout = float(options.get("idle.timeout", 60))
        self.schema = schema

    def partitions(self) -> list[ChangelogPartition]:
        """Runs on the driver: offsets from the options, or this partition's end right now."""
        ranges = self.ranges if self.ranges is not None else snapshot_ranges(self.bootstrap.split(","), self.topic)
        return [ChangelogPartition(r.partition, r.start, r.end) for r in ranges if r.end > r.start]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Runs in an executor: Arrow batches of the records of ``[start, end)``."""
        return read_partition(self, partition)


class ReadSettings(Protocol):
    """What reading one partition needs from a (batch or stream) reader."""

    spec: TableSpec
    topic: str
    bootstrap: str
    idle_timeout: float
    schema: StructType


def read_partition(settings: ReadSettings, partition: InputPartition) -> Iterator[Any]:
    """Runs in an executor: Arrow batches of the records of one partition's ``[start, end)``."""
    if not isinstance(partition, ChangelogPartition) or partition.end <= partition.start:
        return iter(())
    return _PartitionReader(settings, partition).batches()


class _PartitionReader:
    """The executor side: fetch with aiokafka on a private event loop, decode, batch as Arrow."""

    def __init__(self, reader: ReadSettings, part: ChangelogPartition) -> None:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]
        from pyspark.sql.pandas.types import to_arrow_schema

        self.reader, self.part = reader, part
        self.pa, self.pc = pa, pc
        # Exactly the schema Spark checks returned batches against.
        self.arrow_schema = to_arrow_schema(reader.schema, timezone="UTC")
        self.decode_key = side_decoder(reader.spec.key)
        self.decode_value = side_decoder(reader.spec.value)
        self.decode_keys = bulk_decoder(reader.spec.key)
        self.decode_values = bulk_decoder(reader.spec.value)
        self.window_ms = reader.spec.window_size_ms
        self.bookkeeping = "raw_key" in self.arrow_schema.names

    def batches(self) -> Iterator[Any]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        part = self.part
        tp = TopicPartition(self.reader.topic, part.partition)
        loop = asyncio.new_event_loop()

        async def start() -> Any:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.reader.bootstrap.split(","),
                enable_auto_commit=False,
                auto_offset_reset="earliest",  # a start below the log start (compacted away): read from there
                isolation_level="read_committed",
                fetch_max_wait_ms=100,
                max_partition_fetch_bytes=8 * 1024 * 1024,
                fetch_max_bytes=64 * 1024 * 1024,
            )
            await consumer.start()
            consumer.assign([tp])
            consumer.seek(tp, part.start)
            return consumer

        try:
            with bulk_gc():  # a record object per changelog record: see bulk_gc
                yield from self._read(loop, start, tp)
        finally:
            loop.close()

    def _read(self, loop: asyncio.AbstractEventLoop, start: Any, tp: Any) -> Iterator[Any]:
        part = self.part
        consumer = loop.run_until_complete(start())
        try:
            rows = _Columns()
            position, last_progress = part.start, time.monotonic()
            while position < part.end:
                # Everything fetched so far (up to max_partition_fetch_bytes), not BATCH_ROWS at a time:
                # one pass through the event loop per fetch instead of several, and the buffer is empty
                # when the loop next runs, so the next fetch goes out then (measured: the Parquet export
                # ~25% faster at the same CPU; docs/spark.md).
                fetched = loop.run_until_complete(consumer.getmany(tp, timeout_ms=500))
                messages = fetched.get(tp, ())
                before = position
                if messages:
                    self._add(rows, messages)
                    position = messages[-1].offset + 1
                else:  # nothing returned: control records / aborted data may still move us on
                    position = max(position, loop.run_until_complete(consumer.position(tp)))
                now = time.monotonic()
                if position > before:
                    last_progress = now
                elif now - last_progress > self.reader.idle_timeout:
                    raise ExportError(
                        f"{tp.topic}[{part.partition}]: no progress for {self.reader.idle_timeout:.0f}s at offset "
                        f"{position} (reading up to {part.end})"
                    )
                if len(rows) >= BATCH_ROWS or (position >= part.end and len(rows)):
                    yield self._batch(rows)
                    rows = _Columns()
        finally:
            loop.run_until_complete(consumer.stop())

    def _add(self, rows: _Columns, messages: Any) -> None:
        if self.window_ms is None:
            self._add_bulk(rows, messages)
        else:
            self._add_rows(rows, messages)

    def _add_bulk(self, rows: _Columns, messages: Any) -> None:
        """A plain (not windowed) changelog: a whole fetched batch decoded column by column
        (:func:`~.schema.bulk_decoder`; offsets, timestamps and bookkeeping columns by Arrow), one
        Arrow chunk per column; a record that fails to decode sends the batch through
        :meth:`_add_rows`, which names it."""
        pa, pc = self.pa, self.pc
        end = self.part.end
        if messages and messages[-1].offset >= end:
            messages = [m for m in messages if m.offset < end]  # written after the read started
        raw_keys = list(map(_KEY, messages))
        if None in raw_keys:
            messages = [m for m in messages if m.key is not None]  # a table never writes keyless records
            raw_keys = list(map(_KEY, messages))
        if not messages:
            return
        raw_values = list(map(_VALUE, messages))
        try:
            keys = self.decode_keys(raw_keys)
            if None in raw_values:  # tombstones: decoded around
                decode_value = self.decode_value
                values = [None if v is None else decode_value(v) for v in raw_values]
            else:
                values = self.decode_values(raw_values)
        except Exception:
            self._add_rows(rows, messages)  # raises ExportError naming the record
            return
        stamps = pa.array(list(map(_TIMESTAMP, messages)), pa.int64())
        stamps = pc.multiply_checked(pc.if_else(pc.less(stamps, 0), pa.scalar(None, pa.int64()), stamps), 1000)
        chunk: dict[str, Any] = {
            "key": keys,
            "value": values,
            "offset": _offsets(pa, messages),
            "timestamp": stamps,
        }
        if self.bookkeeping:
            chunk["raw_key"] = pa.array(raw_keys, pa.binary())
            chunk["tombstone"] = pa.array(raw_values, pa.binary()).is_null()
        rows.add(chunk, len(messages))

    def _add_rows(self, rows: _Columns, messages: Any) -> None:
        out = rows.open_rows()
        end, p = self.part.end, self.part.partition
        decode_key, decode_value, window_ms = self.decode_key, self.decode_value, self.window_ms
        window_format = self.reader.spec.window_format
        for m in messages:
            offset = m.offset
            if offset >= end:
                break  # written after the read started: not part of this snapshot
            raw = m.key
            if raw is None:
                continue  # a table never writes keyless records
            try:
                if window_format == "session":
                    session = split_session_key(raw)
                    if session is None:
                        continue  # the session table's stream-time entry: bookkeeping, not data
                    kb, start_ms, end_ms = session
                    out.window_start.append(start_ms * 1000)
                    out.window_end.append(end_ms * 1000)
                elif window_ms is not None:
                    split = split_window_key(raw, window_format)
                    if split is None:
                        continue  # the windowed table's stream-time entry: bookkeeping, not data
                    kb, start_ms = split
                    out.window_start.append(start_ms * 1000)
                    out.window_end.append((start_ms + window_ms) * 1000)
                else:
                    kb = raw
                out.key.append(decode_key(kb))
                v = m.value
                out.value.append(None if v is None else decode_value(v))
            except Exception as exc:
                raise ExportError(
                    f"{self.reader.topic}[{p}] offset {offset}: cannot decode the record (key {raw[:60]!r}): {exc!r}"
                ) from exc
            out.offset.append(offset)
            out.timestamp.append(m.timestamp * 1000 if m.timestamp is not None and m.timestamp >= 0 else None)
            out.raw_key.append(raw)
            out.tombstone.append(m.value is None)

    def _batch(self, rows: _Columns) -> Any:
        pa, schema = self.pa, self.arrow_schema
        partition = pa.scalar(self.part.partition, pa.int32())
        arrays = []
        for f in schema:
            parts = []
            for chunk, n in rows.chunks():
                if f.name == "partition":
                    parts.append(pa.repeat(partition, n))
                    continue
                col = chunk[f.name]
                if not isinstance(col, pa.Array):
                    col = pa.array(col, type=f.type)
                elif col.type != f.type:
                    col = col.cast(f.type)
                parts.append(col)
            arrays.append(parts[0] if len(parts) == 1 else pa.concat_arrays(parts))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _offsets(pa: Any, messages: Any) -> Any:
    """The records' offsets as an int64 array: a range when they are contiguous (no compacted or
    filtered gap, the common case), without a pass over the records."""
    first, last = messages[0].offset, messages[-1].offset
    if last - first == len(messages) - 1:  # offsets only grow within a partition: no gap
        import numpy as np

        return pa.array(np.arange(first, last + 1, dtype=np.int64))
    return pa.array(list(map(_OFFSET, messages)), pa.int64())


class _Rows:
    """Column lists of rows added one at a time (windowed changelogs, a batch with a bad record)."""

    __slots__ = ("key", "value", "offset", "timestamp", "raw_key", "tombstone", "window_start", "window_end")

    def __init__(self) -> None:
        self.key: list[Any] = []
        self.value: list[Any] = []
        self.offset: list[int] = []
        self.timestamp: list[int | None] = []
        self.raw_key: list[bytes] = []
        self.tombstone: list[bool] = []
        self.window_start: list[int] = []
        self.window_end: list[int] = []

    def __len__(self) -> int:
        return len(self.offset)

    def columns(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class _Columns:
    """The rows of one Arrow batch being built: chunks of columns (Arrow arrays or lists), one per
    fetched batch decoded in bulk, and rows added one at a time in between."""

    def __init__(self) -> None:
        self._chunks: list[tuple[dict[str, Any], int]] = []
        self._rows: _Rows | None = None
        self._n = 0

    def add(self, chunk: dict[str, Any], n: int) -> None:
        self._seal()
        self._chunks.append((chunk, n))
        self._n += n

    def open_rows(self) -> _Rows:
        """Where rows added one at a time go (kept in order with the chunks around them)."""
        if self._rows is None:
            self._rows = _Rows()
        return self._rows

    def _seal(self) -> None:
        if self._rows is not None and len(self._rows):
            self._chunks.append((self._rows.columns(), len(self._rows)))
            self._n += len(self._rows)
        self._rows = None

    def chunks(self) -> list[tuple[dict[str, Any], int]]:
        self._seal()
        return self._chunks

    def __len__(self) -> int:
        return self._n + (len(self._rows) if self._rows is not None else 0)
