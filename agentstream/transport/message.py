"""The consumed record both transports hand out: aiokafka's ``ConsumerRecord`` fields, as a
compiled class (``event.message``).

aiokafka builds a ``ConsumerRecord`` dataclass for every fetched record from Python code, which
was the largest cost left on the worker's fetch path (about 0.5 µs a record). This class has the
same fields in the same order (positional construction too), plus Faust's ``tp``; compiled,
building one is a native allocation and reading a field a native read. It is not a dataclass:
``dataclasses.replace``/``asdict`` do not apply (``_asdict()`` gives the fields by name), it
compares equal only to another Message, and a message format 0 record's missing timestamp is -1
(ConsumerRecord says None).

``timestamp`` is Faust's: seconds, a float (None for a record without one). The milliseconds the
record carries are ``timestamp_ms``, the field every internal reader uses (an int, no division on
the per-record path); the constructor's fourth argument is still ConsumerRecord's milliseconds. The kafka:// consumer builds them in compiled code
(:mod:`agentstream.transport.kafka.reader`); the memory transport, the harness and joins build
them directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiokafka.structs import TopicPartition  # type: ignore[import-untyped,unused-ignore]

__all__ = ["Message", "FIELDS"]

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
    """One consumed record: ``topic``, ``partition``, ``offset``, ``timestamp_ms`` (-1: none),
    ``timestamp_type``, ``key``, ``value`` (bytes as read; the harness's in-memory channels carry
    objects), ``checksum``, the serialized sizes (-1 for None) and ``headers``."""

    __slots__ = (  # FIELDS, with the milliseconds as timestamp_ms (``timestamp`` is the property)
        "topic",
        "partition",
        "offset",
        "timestamp_ms",
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
        self.timestamp_ms = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.checksum = checksum
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size
        self.headers = headers

    @property
    def timestamp(self) -> float | None:
        """Faust's ``message.timestamp``: the record's time in seconds (None: the record has none)."""
        ms = self.timestamp_ms
        return None if ms < 0 else ms / 1000.0

    @property
    def tp(self) -> Any:  # aiokafka's TopicPartition (untyped)
        """Faust's ``message.tp``."""
        return TopicPartition(self.topic, self.partition)

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.topic,
            self.partition,
            self.offset,
            self.timestamp_ms,
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
        """The fields by name (what ``dataclasses.asdict`` gave for a ConsumerRecord: ``timestamp`` in ms)."""
        return dict(zip(FIELDS, self._fields()))

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, partition={self.partition!r}, offset={self.offset!r}, "
            f"timestamp_ms={self.timestamp_ms!r}, timestamp_type={self.timestamp_type!r}, key={self.key!r}, "
            f"value={self.value!r}, checksum={self.checksum!r}, serialized_key_size={self.serialized_key_size!r}, "
            f"serialized_value_size={self.serialized_value_size!r}, headers={self.headers!r})"
        )
