"""Fetched records as agentstream Messages (transport/kafka/fetch.py): the same records, offsets
and positions as aiokafka's own PartitionRecords, over real record batches (aiokafka's builders):
plain, mid-batch fetch offsets, control batches, aborted transactions under read_committed,
legacy message formats, a corrupt batch, and aiokafka's FetchResult taking them in steps."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import Any

import pytest
from aiokafka.consumer import fetcher as aiokafka_fetcher  # type: ignore[import-untyped,unused-ignore]
from aiokafka.errors import CorruptRecordException  # type: ignore[import-untyped,unused-ignore]
from aiokafka.record.default_records import (  # type: ignore[import-untyped,unused-ignore]
    DefaultRecordBatchBuilder,
)
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder  # type: ignore[import-untyped,unused-ignore]
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


def _compacted(base: int, count: int, last_offset_delta: int) -> bytes:
    """A batch whose last records were compacted away: it ends (lastOffsetDelta) past its last record."""
    raw = bytearray(_batch(base, count))
    raw[23:27] = last_offset_delta.to_bytes(4, "big")
    return _fix_crc(bytes(raw))


CASES = {
    "one batch": (_batch(0, 5), 0, READ_UNCOMMITTED, None),
    "mid-batch fetch offset (compressed or compacted)": (_batch(0, 5) + _batch(5, 3), 2, READ_UNCOMMITTED, None),
    "keyless, with headers": (_batch(10, 3, key=None, headers=[("h", b"x")]), 10, READ_UNCOMMITTED, None),
    "control batch skipped": (_batch(0, 2) + _fix_crc(_batch(2, 1, control=True)) + _batch(3, 2), 0, READ_UNCOMMITTED, None),
    "control batch last": (_batch(0, 2) + _fix_crc(_batch(2, 1, control=True)), 0, READ_UNCOMMITTED, None),
    "compacted batch ends past its last record": (_compacted(0, 3, 9) + _batch(10, 2), 0, READ_UNCOMMITTED, None),
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


def test_positions_after_a_trailing_control_batch_and_a_compacted_batch() -> None:
    _, next_offset = _read(fetch.MessageRecords, *CASES["control batch last"][:3])
    assert next_offset == 3
    ours, next_offset = _read(fetch.MessageRecords, _compacted(0, 3, 9), 0, READ_UNCOMMITTED)
    assert [m.offset for m in ours] == [0, 1, 2] and next_offset == 10


def test_read_uncommitted_is_our_reader_and_read_committed_aiokafkas(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read uncommitted never calls the per-record builder aiokafka's reader calls (ours reads the
    batches itself); read committed does (aiokafka's reader, for its aborted transactions)."""

    def refuse(tp: Any, record: Any) -> Any:
        raise AssertionError("aiokafka's reader ran")

    monkeypatch.setattr(fetch.MessageRecords, "_consumer_record", staticmethod(refuse))
    ours, _ = _read(fetch.MessageRecords, _batch(0, 3), 0, READ_UNCOMMITTED)
    assert [m.offset for m in ours] == [0, 1, 2]
    with pytest.raises(AssertionError, match="aiokafka's reader ran"):
        _read(fetch.MessageRecords, _batch(0, 3), 0, READ_COMMITTED)


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


def _legacy(magic: int, base: int, count: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    for i in range(count):
        builder.append(base + i, timestamp=None if magic == 0 else 1_000 + i, key=b"k", value=b"v%d" % i)
    return bytes(builder.build())


def test_legacy_formats_read_as_aiokafka_reads_them() -> None:
    """Message format 1 as aiokafka reads it; format 0 has no timestamp: -1 and type -1 (Java's
    NO_TIMESTAMP), where a ConsumerRecord says None (Message's timestamp is an int)."""
    theirs, their_next = _read(fetch._Original, _legacy(1, 0, 3), 0, READ_UNCOMMITTED)
    ours, our_next = _read(fetch.MessageRecords, _legacy(1, 0, 3), 0, READ_UNCOMMITTED)
    assert [_fields(m) for m in ours] == [_fields(r) for r in theirs] and our_next == their_next
    theirs, _ = _read(fetch._Original, _legacy(0, 5, 2), 5, READ_UNCOMMITTED)
    ours, _ = _read(fetch.MessageRecords, _legacy(0, 5, 2), 5, READ_UNCOMMITTED)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in theirs] == [(5, None, None), (6, None, None)]
    assert [(m.offset, m.timestamp_ms, m.timestamp_type, m.value) for m in ours] == [
        (5, -1, -1, b"v0"),
        (6, -1, -1, b"v1"),
    ]


def test_a_corrupt_batch_fails_at_the_same_record_with_the_same_position() -> None:
    good, bad = _batch(0, 3), bytearray(_batch(3, 3))
    bad[-1] ^= 0xFF  # a flipped byte in the last record: the batch's CRC no longer matches
    results = []
    for cls in (fetch._Original, fetch.MessageRecords):
        records = cls(TP, MemoryRecords(good + bytes(bad)), None, 0, fetch.raw_bytes, None, True, READ_UNCOMMITTED)
        got = []
        with pytest.raises(CorruptRecordException):
            for record in records:
                got.append(record.offset)
        results.append((got, records.next_fetch_offset))
    assert results[0] == results[1] == ([0, 1, 2], 3)


class _State:
    def __init__(self, position: int) -> None:
        self.position, self.paused = position, False

    def consumed_to(self, offset: int) -> None:
        self.position = offset


class _Assignment:
    """aiokafka's subscription assignment as FetchResult reads it: one partition's position."""

    active = True

    def __init__(self, position: int) -> None:
        self.state = _State(position)

    def state_value(self, tp: Any) -> _State:
        return self.state


def test_fetch_result_takes_messages_in_steps_as_it_takes_consumer_records() -> None:
    """aiokafka's FetchResult over either class: getall(max_records) in steps, getone between
    them, the position after each step, and the end."""
    data = _batch(0, 4) + _batch(4, 4)
    steps: list[list[Any]] = []
    for cls in (fetch._Original, fetch.MessageRecords):
        assignment = _Assignment(0)
        records = cls(TP, MemoryRecords(data), None, 0, fetch.raw_bytes, None, True, READ_UNCOMMITTED)
        result = aiokafka_fetcher.FetchResult(TP, assignment=assignment, partition_records=records, backoff=0)
        seen: list[Any] = []
        for take in ("3", "one", "3", "one", "5"):  # (aiokafka drops a drained result: no step after)
            got = [result.getone()] if take == "one" else result.getall(max_records=int(take))
            seen.append(([None if r is None else r.offset for r in got], assignment.state.position, result.has_more()))
        steps.append(seen)
    assert steps[0] == steps[1]
    assert steps[1] == [
        ([0, 1, 2], 3, True),
        ([3], 4, True),
        ([4, 5, 6], 7, True),
        ([7], 8, True),
        ([], 8, False),  # drained: getall found the end
    ]


def test_message_copies_and_pickles() -> None:
    message = Message("t", 2, 5, 1_000, 0, b"k", b"v", None, 1, 1, (("h", b"x"),))
    for twin in (copy.copy(message), copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert type(twin) is Message and twin == message and twin is not message
    assert message._asdict()["offset"] == 5 and list(message._asdict()) == list(FIELDS)


def test_only_marked_consumers_get_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook stands in aiokafka's fetcher module for every consumer of the process: others
    (no raw_bytes key deserializer) keep aiokafka's ConsumerRecords and deserializers."""
    monkeypatch.setattr(aiokafka_fetcher, "PartitionRecords", fetch._Original)  # undone after the test
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


def test_a_fetcher_of_another_signature_is_not_hooked(monkeypatch: pytest.MonkeyPatch) -> None:
    class Changed(fetch._Original):  # type: ignore[misc]
        def __init__(self, tp: Any, records: Any, *rest: Any) -> None:
            super().__init__(tp, records, *rest)

    monkeypatch.setattr(fetch, "_Original", Changed)
    monkeypatch.setattr(aiokafka_fetcher, "PartitionRecords", Changed)
    assert not fetch.install()
    assert aiokafka_fetcher.PartitionRecords is Changed


@pytest.mark.asyncio
async def test_a_consumer_converts_when_the_hook_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """start() asks for the hook; refused, the consumer converts (and says so), installed, not."""
    from agentstream.exceptions import TransportError
    from agentstream.transport.kafka import KafkaConsumer
    from agentstream.transport.kafka import consumer as consumer_module

    for installed in (False, True):
        monkeypatch.setattr(consumer_module, "install_fetch_hook", lambda installed=installed: installed)
        consumer = KafkaConsumer(["127.0.0.1:1"], None, None, {})  # nothing listens: start() fails after
        with pytest.raises(TransportError):
            await consumer.start()
        assert consumer._convert is not installed


@pytest.mark.asyncio
async def test_without_the_hook_the_consumer_converts_what_aiokafka_gives() -> None:
    """The consumer hands out Messages either way: the hot path reads nothing else."""
    from agentstream.transport.kafka import KafkaConsumer

    class Client:
        async def getmany(self, *partitions: Any, timeout_ms: int, max_records: int | None) -> dict[Any, list[Any]]:
            return {TP: [ConsumerRecord("words", 3, 7, None, None, b"k", b"v", None, 1, 1, [("h", b"x")])]}

    consumer = KafkaConsumer(["127.0.0.1:1"], None, None, {})
    consumer._consumer, consumer._convert = Client(), True
    [message] = (await consumer.getmany())[TP]
    assert type(message) is Message
    assert message._fields() == ("words", 3, 7, -1, -1, b"k", b"v", None, 1, 1, (("h", b"x"),))
