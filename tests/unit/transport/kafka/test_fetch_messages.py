"""Fetched records as agentstream Messages (transport/kafka/fetch.py): the same records, offsets
and positions as aiokafka's own PartitionRecords, over real record batches (aiokafka's builders):
plain, mid-batch fetch offsets, control batches and aborted transactions under read_committed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from aiokafka.consumer import fetcher as aiokafka_fetcher  # type: ignore[import-untyped,unused-ignore]
from aiokafka.record.default_records import (  # type: ignore[import-untyped,unused-ignore]
    DefaultRecordBatchBuilder,
)
from aiokafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped,unused-ignore]
from aiokafka.structs import ConsumerRecord, TopicPartition  # type: ignore[import-untyped,unused-ignore]

from agentstream.transport.kafka import fetch
from agentstream.transport.message import FIELDS, Message

TP = TopicPartition("words", 3)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # aiokafka's isolation levels
PRODUCER_ID = 7
ABORT_MARKER_KEY = b"\x00\x00\x00\x00"  # control record key: version 0, type 0 (abort)


def _batch(
    base: int,
    count: int,
    *,
    transactional: bool = False,
    control: bool = False,
    key: bytes | None = b"k",
    headers: list[tuple[str, bytes]] | None = None,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=int(transactional),
        producer_id=PRODUCER_ID if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
        batch_size=1 << 20,
    )
    for i in range(count):
        if control:
            builder.append(i, timestamp=1_000, key=ABORT_MARKER_KEY, value=b"\x00\x00\x00\x00\x00\x00", headers=[])
        else:
            value = b"v%d" % (base + i)
            builder.append(i, timestamp=1_000 + base + i, key=key, value=value, headers=headers or [])
    raw = bytearray(builder.build())
    raw[0:8] = base.to_bytes(8, "big")  # the batch's base offset, as the broker assigns it
    if control:
        attributes = int.from_bytes(raw[21:23], "big") | 0x20  # the control flag
        raw[21:23] = attributes.to_bytes(2, "big")
    return bytes(raw)


def _fix_crc(raw: bytes) -> bytes:
    """A control flag set after building changes the bytes the CRC covers: recompute it."""
    from aiokafka.record.util import calc_crc32c  # type: ignore[import-untyped,unused-ignore]

    out = bytearray(raw)
    out[17:21] = calc_crc32c(bytes(out[21:])).to_bytes(4, "big")
    return bytes(out)


def _read(cls: Any, data: bytes, fetch_offset: int, isolation: int, aborted: Any = None) -> tuple[list[Any], int]:
    records = cls(TP, MemoryRecords(data), aborted, fetch_offset, fetch.raw_bytes, None, True, isolation)
    out = list(records)
    return out, records.next_fetch_offset


def _fields(record: Any) -> tuple[Any, ...]:
    if isinstance(record, Message):
        return record._fields()
    return dataclasses.astuple(record)


CASES = {
    "one batch": (_batch(0, 5), 0, READ_UNCOMMITTED, None),
    "mid-batch fetch offset (compressed or compacted)": (_batch(0, 5) + _batch(5, 3), 2, READ_UNCOMMITTED, None),
    "keyless, with headers": (_batch(10, 3, key=None, headers=[("h", b"x")]), 10, READ_UNCOMMITTED, None),
    "control batch skipped": (_batch(0, 2) + _fix_crc(_batch(2, 1, control=True)) + _batch(3, 2), 0, READ_UNCOMMITTED, None),
    "aborted transaction under read_committed": (
        _batch(0, 2) + _batch(2, 3, transactional=True) + _fix_crc(_batch(5, 1, transactional=True, control=True))
        + _batch(6, 2),
        0,
        READ_COMMITTED,
        [(PRODUCER_ID, 2)],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_message_records_read_what_aiokafka_reads(case: str) -> None:
    data, offset, isolation, aborted = CASES[case]
    theirs, their_next = _read(fetch._Original, data, offset, isolation, aborted)
    ours, our_next = _read(fetch.MessageRecords, data, offset, isolation, aborted)
    assert theirs, "the case reads something"
    assert all(type(r) is ConsumerRecord for r in theirs)
    assert all(type(m) is Message for m in ours)
    assert [_fields(m) for m in ours] == [_fields(r) for r in theirs]
    assert our_next == their_next


def test_aborted_records_are_not_read_under_read_committed() -> None:
    data, offset, isolation, aborted = CASES["aborted transaction under read_committed"]
    ours, next_offset = _read(fetch.MessageRecords, data, offset, isolation, aborted)
    assert [m.offset for m in ours] == [0, 1, 6, 7]
    assert next_offset == 8


def test_message_has_consumer_record_fields_in_order_and_faust_tp() -> None:
    args = ("t", 2, 5, 1_000, 0, b"k", b"v", None, 1, 1, (("h", b"x"),))
    message, record = Message(*args), ConsumerRecord(*args)
    assert _fields(message) == _fields(record)
    assert [f.name for f in dataclasses.fields(record)] == list(FIELDS)
    assert message.tp == TopicPartition("t", 2)
    assert message == Message(*args) and message != Message(*args[:2], 6, *args[3:])
    assert "offset=5" in repr(message)


def test_only_marked_consumers_get_messages() -> None:
    """The hook stands in aiokafka's fetcher module for every consumer of the process: others
    (no raw_bytes key deserializer) keep aiokafka's ConsumerRecords and deserializers."""
    assert fetch.install()
    assert fetch.install()  # idempotent
    build = aiokafka_fetcher.PartitionRecords
    data = _batch(0, 2)
    ours = build(TP, MemoryRecords(data), None, 0, fetch.raw_bytes, None, True, READ_UNCOMMITTED)
    theirs = build(TP, MemoryRecords(data), None, 0, bytes.upper, None, True, READ_UNCOMMITTED)
    assert [type(m) for m in ours] == [Message, Message]
    assert [(type(r), r.key) for r in theirs] == [(ConsumerRecord, b"K"), (ConsumerRecord, b"K")]


def test_an_unknown_fetcher_shape_leaves_aiokafka_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another aiokafka (its fetcher changed): no hook, and the marker is an identity
    deserializer, so the consumer reads ConsumerRecords with bytes keys as before."""

    class Other(fetch._Original):  # type: ignore[misc]
        pass

    monkeypatch.setattr(aiokafka_fetcher, "PartitionRecords", Other)
    assert not fetch.install()
    assert aiokafka_fetcher.PartitionRecords is Other
    records, _ = _read(Other, _batch(0, 2), 0, READ_UNCOMMITTED)
    assert [(type(r), r.key) for r in records] == [(ConsumerRecord, b"k"), (ConsumerRecord, b"k")]
