"""Offsets of the changelog stream source: what Spark checkpoints, and the ranges of a micro-batch.

An offset is the changelog topic plus, per Kafka partition, the next offset to read; Spark stores it
as JSON in the query's checkpoint (its offset log), so a restarted query resumes where the last
committed micro-batch ended. The topic is part of it so that a checkpoint taken from another topic
(the app redeployed under a new version, hence new changelog names) is refused instead of being
applied to offsets that mean something else. Pure functions: unit-tested without a broker or JVM.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .offsets import ExportError, PartitionRange

__all__ = ["StreamOffset", "advance", "batch_ranges", "lag", "TopicChanged", "ChangelogRewound"]


class TopicChanged(ExportError):
    """A checkpoint was taken from another changelog topic than the table's current one."""


class ChangelogRewound(ExportError):
    """A changelog partition ends before the checkpoint's position: the topic was made anew."""


@dataclass(frozen=True)
class StreamOffset:
    """``offsets[p]``: the next offset of partition ``p`` to read (everything before it was read)."""

    topic: str
    offsets: Mapping[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON-able dict Spark checkpoints (string keys: JSON objects have no int keys)."""
        return {"topic": self.topic, "offsets": {str(p): o for p, o in sorted(self.offsets.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, topic: str) -> StreamOffset:
        """Parse a checkpointed offset; :class:`TopicChanged` when it belongs to another topic."""
        try:
            got_topic = str(data["topic"])
            offsets = {int(p): int(o) for p, o in dict(data["offsets"]).items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise ExportError(f"not an agentstream changelog offset: {data!r}") from exc
        if got_topic != topic:
            raise TopicChanged(
                f"the checkpoint follows changelog {got_topic!r}, but the table's changelog is now {topic!r} "
                "(the app was redeployed with a new version or id?). Fix: export to a new --out directory "
                "(or delete the old one to rebuild it from the new changelog)"
            )
        return cls(got_topic, offsets)

    @property
    def total(self) -> int:
        return sum(self.offsets.values())


def advance(start: StreamOffset, now: Iterable[PartitionRange], max_records: int | None = None) -> StreamOffset:
    """The end of the next micro-batch: every partition up to its end ``now``, or fewer records when
    ``max_records`` caps the batch (shared evenly between the partitions that have records, so
    each partition moves on in every batch).

    A partition new since ``start`` (the topic grew) starts at its beginning; a position below the
    log start (records compacted or deleted away) reads from the log start. A partition that ends
    before the position (the topic was deleted and made again, e.g. by ``agentstream reset``) is
    :class:`ChangelogRewound`: its new offsets do not continue what was read."""
    ranges = sorted(now, key=lambda r: r.partition)
    rewound = [r for r in ranges if r.end < start.offsets.get(r.partition, 0)]
    if rewound:
        where = ", ".join(
            f"[{r.partition}] ends at {r.end}, was read up to {start.offsets[r.partition]}" for r in rewound
        )
        raise ChangelogRewound(
            f"{start.topic}{where}: the changelog was deleted and created again (a reset?), so its offsets "
            "no longer continue the checkpoint's. Fix: export to a new --out directory (or delete this one)"
        )
    begin = {r.partition: max(r.start, start.offsets.get(r.partition, r.start)) for r in ranges}
    ends = {r.partition: max(begin[r.partition], r.end) for r in ranges}
    if max_records is not None:
        pending = [p for p in ends if ends[p] > begin[p]]
        if pending:
            share = max(1, math.ceil(max_records / len(pending)))
            for p in pending:
                ends[p] = min(ends[p], begin[p] + share)
    # a partition the broker no longer reports keeps its position
    merged = dict(start.offsets)
    merged.update(ends)
    return StreamOffset(start.topic, merged)


def batch_ranges(
    start: StreamOffset, end: StreamOffset, log_starts: Mapping[int, int] | None = None
) -> list[PartitionRange]:
    """The ``[start, end)`` range of every partition with records in the micro-batch ``start -> end``.

    A partition missing from ``start`` (new since) reads from ``log_starts`` (or 0: the partition
    reader starts at the log start when that offset is gone)."""
    out = []
    for p, stop in sorted(end.offsets.items()):
        begin = start.offsets.get(p)
        if begin is None:
            begin = (log_starts or {}).get(p, 0)
        if stop > begin:
            out.append(PartitionRange(p, begin, stop))
    return out


def lag(end: StreamOffset, latest: Mapping[int, int]) -> dict[int, int]:
    """Records per partition written but not read yet: the broker's end minus the batch's end."""
    return {p: max(0, latest[p] - end.offsets.get(p, 0)) for p in sorted(latest)}
