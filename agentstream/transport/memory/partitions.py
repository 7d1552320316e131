"""The memory broker's storage: a topic's partitions as append-only logs of records with offsets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from agentstream.transport.base import TopicSpec
from agentstream.transport.message import Message

__all__ = ["Record", "PartitionLog", "TopicLog"]

Record: TypeAlias = Message  # key and value are bytes (or None) on this transport


@dataclass
class PartitionLog:
    """One partition: its records (a record's offset is its index), open transactions and aborted offsets."""

    records: list[Record] = field(default_factory=list)
    log_start_offset: int = 0  # raised by a future deletion/compaction emulation
    open_txns: dict[str, int] = field(default_factory=dict)  # transactional_id -> its first offset here
    aborted: set[int] = field(default_factory=set)  # offsets of records whose transaction aborted

    def end(self) -> int:
        """Log end offset (the high watermark: every append is immediately 'replicated')."""
        return len(self.records)

    def stable_end(self) -> int:
        """The last stable offset: read_committed consumers stop before the first open transaction."""
        if self.open_txns:
            return min(self.open_txns.values())
        return len(self.records)

    def readable_end(self, read_committed: bool) -> int:
        """How far a reader may read: the last stable offset under read_committed, else the log end."""
        return self.stable_end() if read_committed else self.end()

    def read(self, start: int, max_records: int | None, *, read_committed: bool) -> tuple[list[Record], int]:
        """Up to ``max_records`` records from offset ``start``, and the offset to read next.

        read_committed skips the records of aborted transactions (they still advance the offset).
        """
        stop = self.readable_end(read_committed)
        if max_records is not None:
            stop = min(stop, start + max_records)
        records = self.records[start:stop]
        next_offset = start + len(records)
        if read_committed and self.aborted and records:
            records = [r for r in records if r.offset not in self.aborted]
        return records, next_offset


@dataclass
class TopicLog:
    """A created topic: the spec it was created with and its partitions."""

    spec: TopicSpec
    partitions: list[PartitionLog]
