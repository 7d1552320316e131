"""The changelog as a Spark Structured Streaming source (``spark.readStream.format("agentstream_changelog")``).

PySpark's Python data source stream reader: Spark asks the driver-side reader for the latest offsets
(:meth:`~ChangelogStreamReader.latestOffset`), checkpoints the micro-batch's ``start -> end`` in its
offset log, plans one input partition per Kafka partition with records in that range
(:meth:`~ChangelogStreamReader.partitions`) and reads them in executors exactly as a batch read does
(:func:`.source.read_partition`). A restarted query resumes from the checkpointed offsets; a batch
that was planned but not committed is read again with the same offsets (the same records).

The latest offsets are the high watermarks a fetch reports (:func:`.offsets.changelog_ranges`), not
ListOffsets(latest), which the dev broker answers short. Options: those of the batch source (without
``ranges``) plus ``max.records.per.batch`` (a cap per micro-batch, shared between the partitions that
have records; default: everything available).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from .offsets import PartitionRange, snapshot_ranges
from .source import ChangelogPartition, read_partition, reader_options
from .stream_offsets import StreamOffset, advance, batch_ranges

__all__ = ["ChangelogStreamReader"]


try:  # pyspark 4.2+: Trigger.AvailableNow (read what is there now, in micro-batches, then stop)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older pyspark: the trigger is not offered

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in on pyspark versions without the mixin."""


class ChangelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Offsets per Kafka partition; one input partition per partition with new records."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        # Built in the driver's long-lived planner process and in every executor task: cheap, no I/O.
        self.spec, self.topic, self.bootstrap = reader_options(options)
        self.idle_timeout = float(options.get("idle.timeout", 60))
        limit = options.get("max.records.per.batch")
        self.max_records = int(limit) if limit else None
        self.schema = schema
        self._latest: dict[int, int] = {}  # partition -> end, from the last probe (reported as the latest offset)
        self._log_starts: dict[int, int] = {}
        self._last_end: StreamOffset | None = None
        self._until: dict[int, int] | None = None  # Trigger.AvailableNow: the ends when the query started

    # -- driver side ------------------------------------------------------------------------------
    def _probe(self) -> list[PartitionRange]:
        ranges = snapshot_ranges(self.bootstrap.split(","), self.topic)
        self._latest = {r.partition: r.end for r in ranges}
        self._log_starts = {r.partition: r.start for r in ranges}
        if self._until is not None:  # nothing written after the AvailableNow query started
            ranges = [
                PartitionRange(r.partition, r.start, min(r.end, self._until.get(r.partition, r.start))) for r in ranges
            ]
        return ranges

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: read up to the ends of now, then stop (an incremental
        batch export: each run reads only what the last one did not)."""
        self._until = None
        self._until = {r.partition: r.end for r in self._probe()}

    def _offset(self, data: Mapping[str, Any]) -> StreamOffset:
        return StreamOffset.from_json(data, topic=self.topic)

    def initialOffset(self) -> dict[str, Any]:
        """A new query starts at every partition's log start: the whole table, then its changes."""
        return StreamOffset(self.topic, {r.partition: r.start for r in self._probe()}).to_json()

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadAllAvailable() if self.max_records is None else ReadMaxRows(self.max_records)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        """The end of the next micro-batch: each partition's end now (capped by ``limit``).

        ``start`` and ``limit`` are passed by Spark 4.2+; older versions call it without them."""
        from pyspark.sql.streaming.datasource import ReadMaxRows

        if start is not None:
            begin = self._offset(start)
        elif self._last_end is not None:
            begin = self._last_end
        else:
            begin = self._offset(self.initialOffset())
        if limit is None:
            cap = self.max_records
        else:
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = advance(begin, self._probe(), cap)
        self._last_end = end
        return end.to_json()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The broker's ends seen by the last probe (Spark's progress shows them as ``latestOffset``)."""
        return StreamOffset(self.topic, self._latest).to_json() if self._latest else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[ChangelogPartition]:
        ranges = batch_ranges(self._offset(start), self._offset(end), self._log_starts)
        return [ChangelogPartition(r.partition, r.start, r.end) for r in ranges]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the changelog is the app's, and its consumer group is not touched
        (Spark's checkpoint is the export's only position)."""

    # -- executor side ----------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self, partition)
