"""The kafka:// producer's failure bookkeeping, on a scripted stand-in for aiokafka's producer.

What must hold (issue 13, defects 1 and 3): a batch that fails, is cancelled or never gets
queued is never appended to again, and every later ``flush()`` raises until the producer is
stopped (or its transaction aborted), so no commit after any flush can pass its records. The
same on the real broker: tests/integration/test_transport_contract.py (a failed delivery)
and tests/integration/test_kafka_transport.py (a send cancelled while its batch waits).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentstream.exceptions import MembershipLapsed, ProducerError
from agentstream.transport.kafka import KafkaProducer

pytestmark = pytest.mark.asyncio


class FakeBuilder:
    """aiokafka's BatchBuilder as the producer uses it: append until closed (or full)."""

    def __init__(self, capacity: int = 100) -> None:
        self.records: list[bytes | None] = []
        self.capacity = capacity
        self.closed = False

    def append(self, *, timestamp: Any, key: Any, value: bytes | None, headers: Any) -> Any:
        if self.closed or len(self.records) >= self.capacity:
            return None
        self.records.append(value)
        return type("Meta", (), {"offset": len(self.records) - 1, "timestamp": timestamp})()


class FakeAioProducer:
    """Queues batches like aiokafka's accumulator; the test decides when send_batch returns and
    how each queued batch ends (delivered or failed)."""

    def __init__(self) -> None:
        self.queued: list[tuple[FakeBuilder, asyncio.Future[Any]]] = []
        self.gate = asyncio.Event()  # send_batch waits on it while cleared (back-pressure)
        self.gate.set()

    def create_batch(self) -> FakeBuilder:
        return FakeBuilder()

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def send_batch(self, builder: FakeBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        await self.gate.wait()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queued.append((builder, fut))
        return fut

    def deliver_all(self) -> None:
        """The sender takes every queued batch (closing it) and the broker acknowledges it."""
        for builder, fut in self.queued:
            builder.closed = True
            if not fut.done():
                fut.set_result(
                    type("MD", (), {"offset": 0, "timestamp": -1, "timestamp_type": 0, "log_start_offset": 0})()
                )

    def delivered_values(self) -> list[bytes | None]:
        return [
            v for b, f in self.queued if f.done() and not f.cancelled() and f.exception() is None for v in b.records
        ]

    async def flush(self) -> None:
        self.deliver_all()

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def abort_transaction(self) -> None:
        pass


async def producer(**settings: Any) -> tuple[KafkaProducer, FakeAioProducer]:
    fake = FakeAioProducer()
    p = KafkaProducer(["127.0.0.1:1"], settings, client_factory=lambda **config: fake)
    await p.start()  # on the stand-in
    return p, fake


async def test_a_send_cancelled_while_queueing_fails_every_later_flush_and_later_records_are_delivered() -> None:
    p, fake = await producer()
    for i in range(5):
        await p.send("t", b"k", b"%d" % i, partition=0)
    await p.flush()
    assert fake.delivered_values() == [b"0", b"1", b"2", b"3", b"4"]

    fake.gate.clear()  # the broker is slow: the next hand-over waits in send_batch ...
    stuck = asyncio.ensure_future(p.send("t", b"k", b"5", partition=0))
    await asyncio.sleep(0.01)
    stuck.cancel()  # ... and its agent is cancelled (shutdown_timeout during a rebalance)
    with pytest.raises(asyncio.CancelledError):
        await stuck
    fake.gate.set()
    for i in range(6, 10):  # later records must not go into the dead batch
        await p.send("t", b"k", b"%d" % i, partition=0)
    for _ in range(3):  # every flush reports the lost record, not just the first
        with pytest.raises(ProducerError, match=r"t\[0\].*cancelled"):
            await p.flush()
    assert fake.delivered_values() == [b"%d" % i for i in range(10) if i != 5]

    await p.stop()  # a new life of the producer starts clean
    await p.start()
    await p.send("t", b"k", b"10", partition=0)
    await p.flush()


async def test_a_batch_refused_by_the_broker_fails_every_later_flush_until_stop() -> None:
    p, fake = await producer()
    await p.send("t", b"k", b"a", partition=0)
    builder, fut = fake.queued[-1]
    builder.closed = True
    fut.set_exception(OSError("broker went away"))  # aiokafka's batch future fails
    await asyncio.sleep(0)
    await p.send("t", b"k", b"b", partition=0)
    assert fake.queued[-1][0] is not builder, "a record was appended to a failed batch"
    for _ in range(3):
        with pytest.raises(ProducerError, match=r"delivery to t\[0\] failed: OSError: broker went away"):
            await p.flush()
    await p.stop()
    await p.start()
    await p.flush()


async def test_a_failed_batch_still_open_is_never_appended_to() -> None:
    """aiokafka fails an expired batch without closing its builder: the producer must stop filling it."""
    p, fake = await producer()
    await p.send("t", b"k", b"a", partition=0)
    builder, fut = fake.queued[-1]
    fut.set_exception(TimeoutError("batch expired"))
    await asyncio.sleep(0)
    await p.send("t", b"k", b"b", partition=0)
    assert builder.records == [b"a"]
    with pytest.raises(ProducerError):
        await p.flush()
    assert fake.delivered_values() == [b"b"]


async def test_abort_transaction_forgets_the_aborted_batches_failure() -> None:
    p, fake = await producer(transactional_id="app-0_0")
    await p.send("t", b"k", b"a", partition=0)
    fake.queued[-1][1].set_exception(OSError("refused"))
    await asyncio.sleep(0)
    with pytest.raises(ProducerError):
        await p.flush()
    await p.abort_transaction()  # the failed records are discarded with the transaction
    await p.send("t", b"k", b"b", partition=0)
    await p.flush()
    assert fake.delivered_values() == [b"b"]


async def test_while_the_producer_is_unfenced_a_flush_says_fenced_not_broken() -> None:
    """After a fence the worker unfences the producer at its next assignment, which starts a new
    aiokafka producer; a commit that flushes meanwhile must meet the fence (the worker goes on and
    rejoins), not "producer is not started" (which stopped the worker)."""
    starting = asyncio.Event()

    class SlowToStart(FakeAioProducer):
        async def start(self) -> None:
            await starting.wait()

    clients = iter([FakeAioProducer(), SlowToStart()])
    p = KafkaProducer(["127.0.0.1:1"], {}, client_factory=lambda **config: next(clients))
    await p.start()
    await p.send("t", b"k", b"before", partition=0)
    fence = MembershipLapsed("the coordinator answered nothing for 7s")
    await p.fence(fence)
    unfencing = asyncio.ensure_future(p.unfence())
    await asyncio.sleep(0.01)  # the new client is starting
    with pytest.raises(MembershipLapsed):
        await p.flush()
    starting.set()
    await unfencing
    await p.send("t", b"k", b"after", partition=0)
    await p.flush()
