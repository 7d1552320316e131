"""Driver side: type an untyped table's value column from the ``__faust`` tags of its values.

A table declared without ``value_type`` (Faust's usual ``app.Table("latest")``) stores JSON
whose Records carry ``{"__faust": {"ns": "module.Class"}}``. The driver reads the last few
values of every changelog partition; when they all name one registered Record, the export's
value column becomes that Record's struct instead of JSON text.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from ..codecs import JSONCodec
from ..tables.windowed import STREAM_TIME_KEY
from .offsets import PartitionRange, run_sync
from .schema import TableSpec, table_spec

if TYPE_CHECKING:
    from ..tables.table import Table

__all__ = ["sample_values", "typed_spec"]

SAMPLE_PER_PARTITION = 20


async def _sample(
    bootstrap: str | list[str], topic: str, planned: list[PartitionRange], per_partition: int, timeout: float
) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    wanted = [r for r in planned if r.span > 0]
    if not wanted:
        return []
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed", fetch_max_wait_ms=100
    )
    await consumer.start()
    out: list[bytes] = []
    try:
        tps = {TopicPartition(topic, r.partition): r for r in wanted}
        consumer.assign(list(tps))
        for tp, r in tps.items():
            consumer.seek(tp, max(r.start, r.end - per_partition))
        pending = set(tps)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            batches = await consumer.getmany(*pending, timeout_ms=200)
            for tp, messages in batches.items():
                end = tps[tp].end
                for m in messages:
                    if m.offset < end and m.value is not None and m.key != STREAM_TIME_KEY:
                        out.append(m.value)
                if messages and messages[-1].offset + 1 >= end:
                    pending.discard(tp)
    finally:
        await consumer.stop()
    return out


def sample_values(
    bootstrap: str | list[str],
    topic: str,
    planned: list[PartitionRange],
    *,
    per_partition: int = SAMPLE_PER_PARTITION,
    timeout: float = 10.0,
) -> list[bytes]:
    """Up to ``per_partition`` of the newest values of each partition (tombstones and windowed
    tables' bookkeeping records left out)."""
    return run_sync(_sample(bootstrap, topic, planned, per_partition, timeout))


def typed_spec(table: Table, spec: TableSpec, bootstrap: str | list[str], planned: list[PartitionRange]) -> TableSpec:
    """``spec`` with its value column typed from sampled ``__faust`` tags, when the table declares
    no value type and its values are untyped JSON; else ``spec`` unchanged."""
    codec = table.value_codec
    codec = getattr(codec, "inner", codec)  # windowed tables wrap the value codec
    if getattr(table, "value_type", None) is not None or not isinstance(codec, JSONCodec) or codec.type_ is not None:
        return spec
    if spec.value.get("codec") != "json_text":
        return spec  # already typed (e.g. default=int)
    typed = table_spec(table, samples=sample_values(bootstrap, spec.topic, planned))
    return dataclasses.replace(spec, value=typed.value)
