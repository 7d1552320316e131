"""Fetched record batches read as :class:`~agentstream.transport.message.Message`, compiled.

What aiokafka's ``PartitionRecords`` does per record (its Python generator and the
``ConsumerRecord`` dataclass it builds), done by compiled code for our consumers
(:mod:`agentstream.transport.kafka.fetch` installs it): :func:`fetched_messages` reads a
fetched partition uncommitted, :func:`from_fetched` builds one Message from aiokafka's record
object (what aiokafka's own read_committed reader calls per record).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aiokafka.errors import CorruptRecordException  # type: ignore[import-untyped,unused-ignore]

from ..message import Message

__all__ = ["message_of", "from_fetched", "fetched_messages"]


def message_of(topic: str, partition: int, offset: int, record: Any) -> Message:
    """The :class:`Message` of one record of ``topic[partition]`` at ``offset``: ``record`` is
    aiokafka's fetched record object (or a ConsumerRecord: the same attribute names). No
    deserializer: keys and values stay bytes. A record of message format 0 has no timestamp: -1
    and timestamp type -1, as the Java client reports it."""
    key = record.key
    value = record.value
    timestamp = record.timestamp
    return Message(
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
        tuple(headers) if (headers := record.headers) else (),
    )


def from_fetched(tp: Any, record: Any) -> Message:
    """aiokafka's per-record step (``PartitionRecords._consumer_record``), giving a Message."""
    return message_of(tp.topic, tp.partition, record.offset, record)


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
        start: int = owner.next_fetch_offset  # read once a batch: only this loop moves it, forward
        for record in batch:
            offset: int = record.offset
            if offset < start:
                continue
            message = message_of(topic, partition, offset, record)
            owner.next_fetch_offset = offset + 1
            yield message
        owner.next_fetch_offset = batch.next_offset
