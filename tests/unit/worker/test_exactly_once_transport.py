"""Kafka transaction semantics of the memory transport: what exactly_once is built on."""

from __future__ import annotations

import pytest

from agentstream.exceptions import ProducerFenced, TransportError
from agentstream.transport.base import TP, TopicSpec
from agentstream.transport.memory import MemoryConsumer, MemoryTransport

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def transport() -> MemoryTransport:
    MemoryTransport.reset_all()
    t = MemoryTransport("memory://txn-test")
    await t.ensure_topics([TopicSpec("out", 1), TopicSpec("in", 1)])
    return t


async def read(transport: MemoryTransport, isolation: str) -> list[bytes | None]:
    consumer = transport.consumer(group_id=None, isolation_level=isolation)
    await consumer.start()
    consumer.assign([TP("out", 0)])
    batch = await consumer.getmany(timeout_ms=0)
    await consumer.stop()
    return [m.value for m in batch.get(TP("out", 0), [])]


async def test_read_committed_sees_a_transaction_only_once_it_commits(transport: MemoryTransport) -> None:
    p = transport.producer(transactional_id="app-0_0")
    await p.start()
    await p.begin_transaction()
    await p.send("out", None, b"a", partition=0)
    await p.send("out", None, b"b", partition=0)
    assert await read(transport, "read_committed") == []
    assert await read(transport, "read_uncommitted") == [b"a", b"b"]
    await p.commit_transaction()
    assert await read(transport, "read_committed") == [b"a", b"b"]


async def test_aborted_records_are_never_seen_by_read_committed(transport: MemoryTransport) -> None:
    p = transport.producer(transactional_id="app-0_0")
    await p.start()
    await p.begin_transaction()
    await p.send("out", None, b"aborted", partition=0)
    await p.abort_transaction()
    await p.begin_transaction()
    await p.send("out", None, b"kept", partition=0)
    await p.commit_transaction()
    assert await read(transport, "read_committed") == [b"kept"]
    assert await read(transport, "read_uncommitted") == [b"aborted", b"kept"]


async def test_open_transaction_holds_back_later_plain_records(transport: MemoryTransport) -> None:
    txn = transport.producer(transactional_id="app-0_0")
    plain = transport.producer()
    await txn.start()
    await plain.start()
    await txn.begin_transaction()
    await txn.send("out", None, b"t", partition=0)
    await plain.send("out", None, b"p", partition=0)
    consumer = transport.consumer(group_id=None, isolation_level="read_committed")
    await consumer.start()
    consumer.assign([TP("out", 0)])
    assert await consumer.getmany(timeout_ms=0) == {}
    assert consumer.highwater(TP("out", 0)) == 0  # the last stable offset
    await txn.commit_transaction()
    assert [m.value for m in (await consumer.getmany(timeout_ms=0))[TP("out", 0)]] == [b"t", b"p"]


async def test_offsets_commit_with_the_transaction_only(transport: MemoryTransport) -> None:
    p = transport.producer(transactional_id="app-0_0")
    await p.start()
    group = transport.consumer(group_id="app")
    assert isinstance(group, MemoryConsumer)
    await p.begin_transaction()
    await p.send("out", None, b"x", partition=0)
    await p.send_offsets_to_transaction({TP("in", 0): 5}, "app")
    await p.abort_transaction()
    assert await group.committed(TP("in", 0)) is None
    await p.begin_transaction()
    await p.send_offsets_to_transaction({TP("in", 0): 7}, "app")
    await p.commit_transaction()
    assert await group.committed(TP("in", 0)) == 7


async def test_late_transaction_offsets_reach_the_group_at_the_ids_next_init_producer_id(
    transport: MemoryTransport,
) -> None:
    """txn_offsets_late: Kafka's OffsetFetch v3 (aiokafka's) right after a commit, before its markers are written."""
    transport.faults.arm("txn_offsets_late")
    group = transport.consumer(group_id="app")
    assert isinstance(group, MemoryConsumer)
    p = transport.producer(transactional_id="app-0_0")
    await p.start()
    await p.begin_transaction()
    await p.send("out", None, b"x", partition=0)
    await p.send_offsets_to_transaction({TP("in", 0): 7}, "app")
    await p.commit_transaction()
    assert await read(transport, "read_committed") == [b"x"]  # the records are committed
    assert await group.committed(TP("in", 0)) is None  # the offsets not yet
    successor = transport.producer(transactional_id="app-0_0")
    await successor.start()  # InitProducerId waits for the previous transaction to complete
    assert await group.committed(TP("in", 0)) == 7


async def test_newer_producer_fences_the_zombie_and_aborts_its_transaction(transport: MemoryTransport) -> None:
    zombie = transport.producer(transactional_id="app-1_0")
    await zombie.start()
    await zombie.begin_transaction()
    await zombie.send("out", None, b"zombie", partition=0)
    successor = transport.producer(transactional_id="app-1_0")
    await successor.start()  # InitProducerId: bumps the epoch, aborts the zombie's transaction
    with pytest.raises(ProducerFenced):
        await zombie.send("out", None, b"more", partition=0)
    with pytest.raises(ProducerFenced):
        await zombie.commit_transaction()
    await successor.begin_transaction()
    await successor.send("out", None, b"new owner", partition=0)
    await successor.commit_transaction()
    assert await read(transport, "read_committed") == [b"new owner"]


async def test_transactional_producer_refuses_sends_outside_a_transaction(transport: MemoryTransport) -> None:
    p = transport.producer(transactional_id="app-0_0")
    await p.start()
    with pytest.raises(TransportError, match="begin_transaction"):
        await p.send("out", None, b"x", partition=0)
    plain = transport.producer()
    await plain.start()
    with pytest.raises(TransportError, match="transactional_id"):
        await plain.begin_transaction()


async def test_a_tasks_first_sends_side_by_side_begin_its_transaction_once(transport: MemoryTransport) -> None:
    """A commit flushes each table partition's changelog in its own coroutine: when those are the
    task's first sends since the last commit (a table and its suppression buffer, nothing sent by the
    agent), each found no transaction open and began one; the Kafka producer refused the second
    (IN_TRANSACTION -> IN_TRANSACTION) and the task died."""
    import asyncio

    from agentstream.worker.eos import TaskTransaction

    inner = transport.producer(transactional_id="app-0_1")

    class Yielding:
        """The memory producer, with a begin_transaction that awaits the network as Kafka's does."""

        transactional_id = "app-0_1"
        begun = 0

        async def begin_transaction(self) -> None:
            await asyncio.sleep(0)
            self.begun += 1
            await inner.begin_transaction()

        def __getattr__(self, name: str) -> object:
            return getattr(inner, name)

    producer = Yielding()
    txn = TaskTransaction(producer, "app")  # type: ignore[arg-type]
    await txn.start()
    await asyncio.gather(*(txn.send("out", None, v, partition=0) for v in (b"a", b"b", b"c")))
    assert producer.begun == 1
    assert await txn.commit({})
    assert await read(transport, "read_committed") == [b"a", b"b", b"c"]
