"""The producer's per-record append (``send_now``) writes into aiokafka's record builder itself,
as ``BatchBuilder.append`` would: these tests run it on aiokafka's real BatchBuilder and read
the built batches back, so a change in aiokafka (or in the inlined append) shows here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords

from agentstream.transport.kafka import KafkaProducer
from agentstream.transport.kafka.batches import OpenBatch

pytestmark = pytest.mark.asyncio


class RealBatchesProducer:
    """aiokafka's producer as far as KafkaProducer uses it, with aiokafka's own BatchBuilder
    (small, so batches fill up) and a sender that takes (closes) each queued batch at once."""

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
    opened = [b for b in batches if b._relative_offset]
    got = [(k, v) for b in opened for k, v, _ in _read(b)]
    assert sorted(got) == sorted(sent)  # every record once, none lost at a batch boundary
    for b in opened:
        assert [off for _, _, off in _read(b)] == list(range(b._relative_offset))  # offsets dense from 0
    for b in batches[:-2]:  # every batch but the two still open (one per partition) filled up
        assert b._closed


async def test_a_batch_closed_by_the_sender_is_never_appended_to() -> None:
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
    other = OpenBatch("t", 0, object(), loop)
    assert real.records is not None and other.records is None
