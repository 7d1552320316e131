"""The consumed record both transports hand out: aiokafka's ``ConsumerRecord`` fields, as a
compiled class (``event.message``).

aiokafka builds a ``ConsumerRecord`` dataclass for every fetched record from Python code, which
was the largest cost left on the worker's fetch path (about 0.5 µs a record). This class has the
same fields in the same order (positional construction too), plus Faust's ``tp``; compiled,
building one is a native allocation and reading a field a native read. It is not a dataclass:
``dataclasses.replace``/``asdict`` do not apply (``_asdict()`` gives the fields by name), it
compares equal only to another Message, and a message format 0 record's missing timestamp is -1
(ConsumerRecord says None). :func:`from_fetched` builds it from aiokafka's record object (see
:mod:`agentstream.transport.kafka.fetch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from aiokafka.errors import CorruptRecordException  # type: ignore[import-untyped,unused-ignore]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped,unused-ignore]

__all__ = ["Message", "from_fetched", "fetched_messages", "FIELDS"]

FIELDS = (
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestamp_type",
    "key",
    "value",
    "checksum",
    "serialized_key_size",
    "serialized_value_size",
    "headers",
)
"""Message's fields, in ConsumerRecord's order (its positional arguments)."""


class Message:
    """One consumed record: ``topic``, ``partition``, ``offset``, ``timestamp`` (ms),
    ``timestamp_type``, ``key``, ``value`` (bytes as read; the harness's in-memory channels carry
    objects), ``checksum``, the serialized sizes (-1 for None) and ``headers``."""

    __slots__ = (
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "checksum",
        "serialized_key_size",
        "serialized_value_size",
        "headers",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: Any,
        value: Any,
        checksum: int | None,
        serialized_key_size: int,
        serialized_value_size: int,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.checksum = checksum
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size
        self.headers = headers

    @property
    def tp(self) -> Any:  # aiokafka's TopicPartition (untyped)
        """Faust's ``message.tp``."""
        return TopicPartition(self.topic, self.partition)

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.topic,
            self.partition,
            self.offset,
            self.timestamp,
            self.timestamp_type,
            self.key,
            self.value,
            self.checksum,
            self.serialized_key_size,
            self.serialized_value_size,
            self.headers,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:  # mutable, like the dataclass it stands for
        raise TypeError("unhashable type: 'Message'")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """copy, deepcopy and pickle rebuild it from its fields (a compiled class has no
        argument-less constructor for them to call)."""
        return (Message, self._fields())

    def _asdict(self) -> dict[str, Any]:
        """The fields by name (what ``dataclasses.asdict`` gave for a ConsumerRecord)."""
        return dict(zip(FIELDS, self._fields()))

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, partition={self.partition!r}, offset={self.offset!r}, "
            f"timestamp={self.timestamp!r}, timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
            f"value={self.value!r}, checksum={self.checksum!r}, serialized_key_size={self.serialized_key_size!r}, "
            f"serialized_value_size={self.serialized_value_size!r}, headers={self.headers!r})"
        )


def from_fetched(tp: Any, record: Any) -> Message:
    """A :class:`Message` from aiokafka's fetched record (its ``DefaultRecord`` or legacy
    record) of partition ``tp``; no deserializer: keys and values stay bytes. A record of message
    format 0 has no timestamp: -1 and timestamp type -1, as the Java client reports it."""
    key = record.key
    value = record.value
    timestamp = record.timestamp
    return Message(
        tp.topic,
        tp.partition,
        record.offset,
        -1 if timestamp is None else timestamp,
        -1 if timestamp is None else record.timestamp_type,
        key,
        value,
        record.checksum,
        -1 if key is None else len(key),
        -1 if value is None else len(value),
        tuple(record.headers),
    )


def fetched_messages(owner: Any, tp: Any, records: Any, check_crcs: bool) -> Iterator[Message]:
    """The Messages of a fetched partition's record batches (aiokafka's ``MemoryRecords``), read
    uncommitted: batch by batch, each batch's CRC checked first when ``check_crcs``, control
    batches skipped, records before the fetch position skipped (a compressed or compacted batch
    starts before it). ``owner.next_fetch_offset`` (aiokafka's partition records) is kept where
    aiokafka's own reader keeps it: past each record handed out, then past each batch.

    Our consumers read their partitions through this (compiled) instead of aiokafka's Python
    generator; read_committed, with its aborted transactions, stays aiokafka's
    (:mod:`agentstream.transport.kafka.fetch`)."""
    topic = tp.topic
    partition = tp.partition
    while records.has_next():
        batch = records.next_batch()
        if check_crcs and not batch.validate_crc():
            # the consumer drops the rest of this fetch and fetches it again
            raise CorruptRecordException(f"Invalid CRC - {tp}")
        if batch.is_control_batch:
            owner.next_fetch_offset = batch.next_offset
            continue
        for record in batch:
            offset: int = record.offset
            if offset < owner.next_fetch_offset:
                continue
            key = record.key
            value = record.value
            timestamp = record.timestamp
            message = Message(
                topic,
                partition,
                offset,
                -1 if timestamp is None else timestamp,
                -1 if timestamp is None else record.timestamp_type,
                key,
                value,
                record.checksum,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
                tuple(record.headers),
            )
            owner.next_fetch_offset = offset + 1
            yield message
        owner.next_fetch_offset = batch.next_offset
