"""Driver side of an export: which offsets of each changelog partition make up "the table now".

The end of a partition is taken from the high watermark a *fetch* reports, not from
ListOffsets(latest): the dev broker (tansu) answers the latter with the base offset of the last
batch + 1, which would silently drop the tail of every partition. A fetch's high watermark is
right on the dev broker and on a real Kafka alike. With ``read_committed`` the end is the last
stable offset instead, so an export never waits for (or includes) an open transaction.

Existence is checked by listing topics first: asking about a missing topic auto-creates it on
the dev broker (with the wrong partition count, which would then break the app).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from ..exceptions import AgentStreamError

__all__ = ["ChangelogNotFound", "ExportError", "PartitionRange", "changelog_ranges", "snapshot_ranges", "run_sync"]

T = TypeVar("T")


class ExportError(AgentStreamError):
    """An export could not read the changelog (broker unreachable, partition stuck, ...)."""


class ChangelogNotFound(ExportError):
    """The table's changelog topic does not exist (yet) on the broker."""


@dataclass(frozen=True)
class PartitionRange:
    """Offsets ``[start, end)`` of one changelog partition: one Spark input partition."""

    partition: int
    start: int
    end: int

    @property
    def span(self) -> int:
        """Offsets in the range: the record count, an upper bound once compaction left gaps."""
        return max(0, self.end - self.start)


async def topic_partitions(consumer: Any, topic: str) -> list[int]:
    """Partition numbers of ``topic`` from an all-topics metadata request (never auto-creates)."""
    metadata = await consumer._client.fetch_all_metadata()
    parts = metadata.partitions_for_topic(topic)
    if not parts:
        known = sorted(t for t in metadata.topics() if not t.startswith("__"))
        raise ChangelogNotFound(
            f"changelog topic {topic!r} does not exist on the broker (topics: {', '.join(known) or 'none'}). "
            "Fix: run the app's worker (it creates its changelogs) against this broker, or pass the right --broker"
        )
    return sorted(parts)


async def changelog_ranges(
    bootstrap: str | list[str], topic: str, *, timeout: float = 30.0, isolation_level: str = "read_committed"
) -> list[PartitionRange]:
    """``[start, end)`` per partition of ``topic`` as of now (see the module docstring)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=1024,
        request_timeout_ms=int(timeout * 1000),
    )
    try:
        await consumer.start()
    except KafkaError as exc:
        await consumer.stop()
        raise ExportError(
            f"cannot reach the broker at {bootstrap}: {exc!r}. Fix: check --broker / the app's broker"
        ) from exc
    try:
        numbers = await topic_partitions(consumer, topic)
        tps = [TopicPartition(topic, p) for p in numbers]
        consumer.assign(tps)
        starts: dict[Any, int] = await consumer.beginning_offsets(tps)
        # ListOffsets(latest) is only a hint of where to fetch from (it may be short on the dev
        # broker, never long on any broker): fetching from just before it returns little data
        # and the response carries the true high watermark.
        hints: dict[Any, int] = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, max(starts[tp], hints[tp] - 1))
        deadline = time.monotonic() + timeout
        pending = set(tps)
        while pending:
            if time.monotonic() > deadline:
                raise ExportError(
                    f"no fetch answer for {topic} partitions {sorted(tp.partition for tp in pending)} within {timeout}s"
                )
            await consumer.getmany(*pending, timeout_ms=200, max_records=1)
            for tp in list(pending):
                end = consumer.last_stable_offset(tp) if isolation_level == "read_committed" else None
                if end is None or end < 0:
                    end = consumer.highwater(tp)
                if end is not None:
                    pending.discard(tp)
                    starts[tp] = min(starts[tp], end)
                    hints[tp] = end
        return [PartitionRange(tp.partition, starts[tp], hints[tp]) for tp in tps]
    finally:
        await consumer.stop()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, even when the caller is inside an event loop
    (a notebook, an async test): then on a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="agentstream-export-offsets", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["result"]
    return result


def snapshot_ranges(bootstrap: str | list[str], topic: str, *, timeout: float = 30.0) -> list[PartitionRange]:
    """Sync :func:`changelog_ranges`: what the driver calls when a read starts."""
    return run_sync(changelog_ranges(bootstrap, topic, timeout=timeout))
