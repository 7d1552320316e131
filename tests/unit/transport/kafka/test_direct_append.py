"""The producer's per-record append (``send_now``) writes into aiokafka's C record builder through
our RecordBuilder, which stands in for aiokafka's BatchBuilder in ``send_batch``: these tests
start from aiokafka's real BatchBuilder (``create_batch()``), read the built batches back, and
hold RecordBuilder to what BatchBuilder does, so a change in aiokafka (or in the inlined
append) shows here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from agentstream.transport.kafka import KafkaProducer
from agentstream.transport.kafka.batches import OpenBatch, RecordBuilder
from agentstream.transport.partitioner import default_partition

pytestmark = pytest.mark.asyncio


class RealBatchesProducer:
    """aiokafka's producer as far as KafkaProducer uses it, with aiokafka's own BatchBuilder
    (small, so batches fill up) and a sender that only queues what it is handed (the tests
    close, sequence or build a batch as aiokafka's sender would)."""

    def __init__(self, batch_size: int = 512) -> None:
        self.batch_size = batch_size
        self.queued: list[BatchBuilder] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_size, 0)

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1}

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        self.queued.append(builder)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        return fut

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def _read(builder: BatchBuilder) -> list[tuple[bytes | None, bytes | None, int]]:
    records = MemoryRecords(bytes(builder._build()))
    out = []
    while records.has_next():
        batch = records.next_batch()
        out += [(r.key, r.value, r.offset) for r in batch]
    return out


async def test_send_now_appends_what_batchbuilder_append_would_and_opens_a_new_batch_when_full() -> None:
    fake = RealBatchesProducer()
    producer = KafkaProducer(["fake:9092"], {}, client_factory=lambda **_: fake)
    await producer.start()
    sent: list[tuple[bytes, bytes]] = []
    for i in range(200):
        key, value = b"k%d" % (i % 7), b"value-%d" % i
        if producer.send_now("t", key, value, None, 1000 + i, None) is None:  # first send, or a full batch
            await producer.send("t", key, value, timestamp_ms=1000 + i)
        sent.append((key, value))
    batches = fake.queued
    assert len(batches) > 2  # 200 records do not fit in a 512-byte batch: full batches were closed
    assert all(type(b) is RecordBuilder for b in batches)  # what send_batch was handed
    counts = [b.record_count() for b in batches]
    opened = [b for b in batches if b.record_count()]
    got = [(k, v) for b in opened for k, v, _ in _read(b)]
    assert sorted(got) == sorted(sent)  # every record once, none lost at a batch boundary
    for b, count in zip(batches, counts):
        if count:
            assert [off for _, _, off in _read(b)] == list(range(count))  # offsets dense from 0
    for b in batches[:-2]:  # every batch but the two still open (one per partition) filled up
        assert b.closed()


async def test_a_batch_closed_by_the_sender_is_never_appended_to() -> None:
    """aiokafka closes a batch (its ``close()``, or ``_build()`` when it builds it)."""
    fake = RealBatchesProducer(batch_size=16384)
    producer = KafkaProducer(["fake:9092"], {}, client_factory=lambda **_: fake)
    await producer.start()
    await producer.send("t", b"k", b"first", partition=0)
    first = fake.queued[-1]
    first.close()  # aiokafka's sender took it
    assert producer.send_now("t", b"k", b"second", 0, None, None) is None
    await producer.send("t", b"k", b"second", partition=0)
    assert [v for _, v, _ in _read(first)] == [b"first"]
    assert [v for _, v, _ in _read(fake.queued[-1])] == [b"second"]


async def test_the_direct_append_is_used_for_aiokafkas_builder_only() -> None:
    loop = asyncio.get_running_loop()
    real = OpenBatch("t", 0, BatchBuilder(1024, 0), loop)
    scripted = object()
    other = OpenBatch("t", 0, scripted, loop)
    assert type(real.records) is RecordBuilder and real.builder is real.records
    assert other.records is None and other.builder is scripted


def _same_appends(builder: Any, n: int, *, producer_state: tuple[int, int, int] | None = None) -> list[Any]:
    """Append n records through aiokafka's BatchBuilder API; what each call returned."""
    out = []
    for i in range(n):
        meta = builder.append(timestamp=1_000 + i, key=b"k%d" % i, value=b"v" * 40, headers=[("h", b"%d" % i)])
        out.append(None if meta is None else (meta.offset, meta.timestamp, meta.size))
    if producer_state is not None:
        builder._set_producer_state(*producer_state)
    return out


@pytest.mark.parametrize("transactional", [False, True])
async def test_record_builder_builds_what_batchbuilder_builds(transactional: bool) -> None:
    """Same appends (until full), counts, closed flag, size and bytes (producer state too, as an
    idempotent or transactional producer sets it) as aiokafka's own BatchBuilder."""
    theirs = BatchBuilder(600, 0, is_transactional=int(transactional))
    ours = RecordBuilder(BatchBuilder(600, 0, is_transactional=int(transactional))._builder)
    state = (42, 3, 17) if transactional else None
    assert _same_appends(ours, 20, producer_state=state) == _same_appends(theirs, 20, producer_state=state)
    assert ours.record_count() == theirs.record_count() > 0
    assert ours.closed() is theirs.closed() is True  # full: closed by the refused append
    assert ours.size() == theirs.size()
    assert bytes(ours._build()) == bytes(theirs._build())
    assert ours.size() == theirs.size() and ours.append(timestamp=None, key=b"k", value=b"v") is None


async def test_record_builder_closed_before_full_takes_nothing_more() -> None:
    ours = RecordBuilder(BatchBuilder(1 << 16, 0)._builder)
    assert ours.append(timestamp=None, key=None, value=b"a") is not None
    ours.close()
    assert ours.closed() and ours.append(timestamp=None, key=None, value=b"b") is None
    assert [v for _, v, _ in _read(ours)] == [b"a"]


class _Leaders:
    def leader_for_partition(self, tp: Any) -> int:
        return 0


class _Sequences:
    """aiokafka's transaction manager as its accumulator asks it, for an idempotent producer."""

    producer_id, producer_epoch, transactional_id = 42, 0, None

    def __init__(self) -> None:
        self.next: dict[Any, int] = {}

    def has_pid(self) -> bool:
        return True

    def sequence_number(self, tp: Any) -> int:
        return self.next.get(tp, 0)

    def increment_sequence_number(self, tp: Any, count: int) -> None:
        self.next[tp] = self.next.get(tp, 0) + count

    def maybe_add_partition_to_txn(self, tp: Any) -> None:
        pass


async def test_a_batch_given_its_sequence_numbers_takes_no_more_records() -> None:
    """aiokafka's accumulator takes a batch in two steps: sequence numbers for record_count()
    records at the pop, the build later in the produce task. The producer's appends in between
    must not land in the batch, or it goes out with more records than sequence numbers."""
    from aiokafka.producer.message_accumulator import MessageAccumulator
    from aiokafka.structs import TopicPartition

    fake = RealBatchesProducer(batch_size=16384)
    producer = KafkaProducer(["fake:9092"], {}, client_factory=lambda **_: fake)
    await producer.start()
    await producer.send("t", b"k", b"first", partition=0)  # opens the batch, hands it over
    assert producer.send_now("t", b"k", b"second", 0, None, None) is not None
    builder = fake.queued[-1]
    sequences = _Sequences()
    accumulator = MessageAccumulator(_Leaders(), 16384, 0, 30, txn_manager=sequences)
    tp = TopicPartition("t", 0)
    await accumulator.add_batch(builder, tp, 1.0)
    accumulator.drain_by_nodes(ignore_nodes=set())  # the pop: sequence numbers 0 and 1
    assert sequences.next[tp] == 2
    assert producer.send_now("t", b"k", b"third", 0, None, None) is None  # the next batch takes it
    await producer.send("t", b"k", b"third", partition=0)
    assert [v for _, v, _ in _read(builder)] == [b"first", b"second"]
    assert [v for _, v, _ in _read(fake.queued[-1])] == [b"third"]


async def test_send_now_puts_a_keyed_record_in_its_keys_partition_and_refuses_a_partition_out_of_range() -> None:
    """send_now reads the key -> partition memo inline (issue 41): a key's first record and every
    later one go to Kafka's default partition of the key, a given partition wins over the key, and
    a partition out of range appends nothing (send() raises the error)."""
    fake = RealBatchesProducer(batch_size=1 << 20)
    producer = KafkaProducer(["fake:9092"], {}, client_factory=lambda **_: fake)
    await producer.start()
    keys = [b"k%d" % i for i in range(20)]
    for key in keys + keys:
        delivery = producer.send_now("t", key, b"v", None, None, None)
        if delivery is None:  # first send to the topic, or no open batch for the partition yet
            delivery = await producer.send("t", key, b"v")
        assert delivery._batch.partition == default_partition(key, 2)
    assert {default_partition(key, 2) for key in keys} == {0, 1}  # both partitions were chosen
    given = producer.send_now("t", keys[0], b"v", 1 - default_partition(keys[0], 2), None, None)
    assert given is not None and given._batch.partition == 1 - default_partition(keys[0], 2)
    assert producer.send_now("t", keys[0], b"v", 2, None, None) is None
    assert producer.send_now("t", keys[0], b"v", -1, None, None) is None
