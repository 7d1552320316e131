"""Issue 30: a commit refused because the group moved on (GroupFenced) closes the tasks dirty.

Kafka Streams' TaskMigratedException: once this member's generation is fenced, its partitions may
belong to another member, so it must commit no offset and write no changelog or sink record for
them any more (a zombie's late writes would land after the new owner's), and rejoin.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder

import agentstream
from agentstream.exceptions import GroupFenced, MembershipLapsed
from agentstream.testing_faults import FailingCall
from agentstream.transport.base import TP
from agentstream.transport.kafka import KafkaProducer, abort
from agentstream.transport.kafka.abort import reset_connections
from agentstream.transport.memory import MemoryConsumer, MemoryTransport
from agentstream.worker.fencing import fence_margin
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio


async def until(cond: Any, timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def counting_app(name: str, commit_interval: float) -> tuple[agentstream.App, agentstream.Table, list[int]]:
    app = agentstream.App(
        name,
        broker=f"memory://{name}",
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=commit_interval,
        shutdown_timeout=2.0,
    )
    source = app.topic("src", key_type=str, value_type=int)
    out = app.topic("out", key_type=str, value_type=int)
    table = app.Table("counts", default=int, partitions=1)
    handled = [0]

    @app.agent(source)
    async def count(stream: agentstream.Stream) -> None:
        async for key, _ in stream.items():
            table[key] += 1
            handled[0] += 1
            await out.send(key=key, value=table[key])

    return app, table, handled


def memory(app: agentstream.App) -> MemoryTransport:
    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    return transport


def committed(app: agentstream.App, tp: TP) -> int:
    group = memory(app)._broker.groups.get(app.id)
    return 0 if group is None else group.committed.get(tp, 0)


async def feed(app: agentstream.App, n: int) -> None:
    for _ in range(n):
        await app.topics["src"].send(key="a", value=1, partition=0)


async def five_committed_then_two_more(app: agentstream.App, worker: Worker, handled: list[int]) -> None:
    """Once assigned: 5 records handled and committed, then 2 more handled, not committed."""
    await until(worker.assigned.is_set)
    await feed(app, 5)
    await until(lambda: handled[0] == 5)
    assert await worker.commit()
    await feed(app, 2)
    await until(lambda: handled[0] == 7)


async def test_fenced_periodic_commit_closes_the_tasks_dirty_and_the_zombie_writes_nothing_more() -> None:
    app, table, handled = counting_app("fence-periodic", commit_interval=0.05)
    tp = TP("src", 0)
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        await feed(app, 5)
        await until(lambda: committed(app, tp) == 5)
        with FailingCall(MemoryConsumer, "commit", GroupFenced) as fence:
            await feed(app, 3)
            await until(lambda: handled[0] == 8)
            await until(lambda: fence.fired)  # the periodic commit of records 5..7 was refused
            await until(lambda: all(t.dirty is not None for t in worker.tasks.values()))
            changelog = len(memory(app).read_topic(table.changelog_topic.name))
            outputs = len(memory(app).read_topic("out"))
            await feed(app, 4)  # the group moved on: these records are the new owner's
            for _ in range(20):
                await asyncio.sleep(0.01)
                assert not await worker.commit(), "a fenced member committed offsets"
        assert committed(app, tp) == 5, "offsets passed the fenced commit"
        assert handled[0] == 8, "the zombie went on processing after it was fenced"
        assert len(memory(app).read_topic(table.changelog_topic.name)) == changelog, "zombie changelog write"
        assert len(memory(app).read_topic("out")) == outputs, "zombie sink write"

        # The rejoin (what the consumer does next): revoke closes the dirty tasks without a commit,
        # the new assignment restores the table from its changelog and handles 5..11 again.
        memory(app)._broker.groups[app.id].request_rebalance()
        memory(app)._broker.wake()
        await until(lambda: committed(app, tp) == 12)
        # At least once: records 5..7 were counted before the fence (their changelog was flushed)
        # and again after the rejoin; nothing is lost.
        assert table["a"] == 12 + 3
    finally:
        await worker.stop()


async def test_fenced_commit_at_revoke_commits_nothing_and_drops_pending_writes() -> None:
    app, table, handled = counting_app("fence-revoke", commit_interval=1000.0)
    tp = TP("src", 0)
    worker = Worker(app)
    await worker.start()
    try:
        await five_committed_then_two_more(app, worker, handled)
        assert worker.consumer is not None
        assignment = set(worker.consumer.assignment())
        with FailingCall(MemoryConsumer, "commit", GroupFenced) as fence:
            await worker.on_partitions_revoked(assignment)
        assert fence.fired
        assert committed(app, tp) == 5
    finally:
        await worker.stop()
    assert committed(app, tp) == 5, "stop committed offsets of a task fenced at revoke"


# -- the membership lease (worker/fencing.py) ------------------------------------------------------


class ScriptedAccumulator:
    def __init__(self, client: ScriptedClient) -> None:
        self.client = client
        self.failed: BaseException | None = None

    def fail_all(self, error: BaseException) -> None:
        self.failed = error
        for fut in self.client.futures:
            if not fut.done():
                fut.set_exception(error)


class ScriptedClient:
    """aiokafka's producer as KafkaProducer and abort_producer use it: batches are queued until
    ``flush()`` acknowledges them all; ``stop()`` after ``fail_all`` is an abort."""

    def __init__(self) -> None:
        self.futures: list[asyncio.Future[Any]] = []
        self._message_accumulator = ScriptedAccumulator(self)
        self.started = self.aborted = False

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(16384, 0)

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.futures.append(fut)
        return fut

    async def flush(self) -> None:
        for fut in self.futures:
            if not fut.done():
                fut.set_result(None)

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.aborted = self._message_accumulator.failed is not None


@pytest.mark.filterwarnings("ignore:The test <Function:pytest.PytestWarning")
def test_the_fence_comes_before_the_deadline_but_after_the_next_heartbeat() -> None:
    assert fence_margin(10.0, 2.0) == 2.5  # a quarter of the session timeout
    assert fence_margin(4.0, 2.0) == 1.0  # 4 - 1.5 * 2: the fence point waits for the next heartbeat
    assert fence_margin(10.0, 9.0) == 0.0  # a heartbeat interval near the session timeout: at the deadline


async def test_a_lapsed_membership_fences_the_worker_which_rejoins_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lease loop fences once the coordinator has answered nothing for the session timeout
    (less the margin): the producer's flushes and sends raise MembershipLapsed, the tasks go dirty
    and get no records, and the worker asks to rejoin; the rejoin's assignment takes sends again
    and the table ends exact (at least once: counted again from the committed offsets)."""
    app, table, handled = counting_app("fence-lease", commit_interval=1000.0)
    tp = TP("src", 0)
    lapsed = [False]
    rejoins = [0]

    def deadline(self: MemoryConsumer) -> float | None:
        return time.monotonic() - 1.0 if lapsed[0] else None

    request_rejoin = MemoryConsumer.request_rejoin

    def counted_rejoin(self: MemoryConsumer) -> None:
        rejoins[0] += 1
        request_rejoin(self)

    monkeypatch.setattr(MemoryConsumer, "membership_deadline", deadline)
    monkeypatch.setattr(MemoryConsumer, "request_rejoin", counted_rejoin)
    worker = Worker(app)
    await worker.start()
    try:
        await five_committed_then_two_more(app, worker, handled)
        tasks = list(worker.tasks.values())
        before = set(map(id, tasks))
        lapsed[0] = True
        await until(lambda: rejoins[0] == 1)
        lapsed[0] = False
        assert all(isinstance(t.dirty, MembershipLapsed) for t in tasks), "the tasks were not closed dirty"
        # the rejoin: new tasks restore the table (5, the committed state) and count 5..6 again
        # started, not only created: the producer takes sends again once the assignment starts
        await until(
            lambda: worker.assigned.is_set() and bool(worker.tasks) and not before & set(map(id, worker.tasks.values()))
        )
        await feed(app, 3)
        await until(lambda: table["a"] == 10)
        assert await worker.commit(), "the producer did not take sends again after the rejoin"
        assert committed(app, tp) == 10
    finally:
        await worker.stop()


async def test_a_fenced_kafka_producer_fails_its_unacknowledged_records_and_resets_its_connections() -> None:
    """``KafkaProducer.fence``: the open batches fail with the fence (every flush raises it, a
    GroupFenced, so the worker rejoins rather than stops), aiokafka's producer is closed without
    delivering (its sender cancelled, its batches failed, its connections reset), and sends raise
    until ``unfence`` starts a new one."""
    clients: list[ScriptedClient] = []

    def factory(**config: Any) -> ScriptedClient:
        clients.append(ScriptedClient())
        return clients[-1]

    producer = KafkaProducer(["fake:9092"], {}, client_factory=factory)
    await producer.start()
    delivery = await producer.send("t", b"k", b"v", partition=0)
    error = MembershipLapsed("no heartbeat answered")
    await producer.fence(error)
    assert clients[0].aborted, "aiokafka's producer was not aborted"
    assert clients[0]._message_accumulator.failed is error
    with pytest.raises(MembershipLapsed):
        await delivery
    with pytest.raises(MembershipLapsed):
        await producer.flush()
    with pytest.raises(MembershipLapsed):
        await producer.send("t", b"k", b"v2", partition=0)
    await producer.unfence()
    assert len(clients) == 2 and clients[1].started
    await producer.send("t", b"k", b"v3", partition=0)
    await producer.flush()
    await producer.stop()


async def test_a_fence_whose_aiokafka_producer_never_finishes_stopping_still_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fence asks the group to rejoin only after the producer's abort: an aiokafka ``stop()`` that
    waits for ever (a flush of batches no sender will drain, a connection that never reports closed)
    must not hold it, or the fenced worker idles with its tasks closed and never rejoins (issue 39)."""
    monkeypatch.setattr(abort, "STOP_S", 0.05)
    hung: list[bool] = []

    class HangingStop(ScriptedClient):
        async def stop(self) -> None:
            hung.append(True)
            await asyncio.Event().wait()

    producer = KafkaProducer(["fake:9092"], {}, client_factory=lambda **config: HangingStop())
    await producer.start()
    delivery = await producer.send("t", b"k", b"v", partition=0)
    error = MembershipLapsed("no heartbeat answered")
    await asyncio.wait_for(producer.fence(error), 10)  # returns although stop() never does
    assert hung
    with pytest.raises(MembershipLapsed):
        await delivery


async def test_reset_connections_drops_what_the_kernel_has_not_sent() -> None:
    """SO_LINGER 0 then abort: the peer sees a reset, not the bytes still queued on our side."""
    received = bytearray()
    reset = asyncio.Event()
    go_read = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await go_read.wait()  # a broker that stopped reading (a cut link)
        try:
            while chunk := await reader.read(1 << 16):
                received.extend(chunk)
        except ConnectionResetError:
            reset.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 64 << 20  # far more than the socket buffers hold: most of it is still ours
    writer.write(b"x" * sent)
    await asyncio.sleep(0.2)

    class Conn:
        _writer = writer

    class Client:
        _conns = {0: Conn()}

    assert reset_connections(Client()) == 1
    go_read.set()
    await asyncio.wait_for(reset.wait(), 10)
    assert len(received) < sent, "the whole write reached the peer"
    server.close()
    await server.wait_closed()


async def test_an_agent_whose_send_the_fence_refuses_ends_quietly_and_the_worker_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent in the middle of a record when the worker fences itself: its next send raises the
    fence (MembershipLapsed). That ends the dirty task's agent quietly (no error policy, no worker
    stop); the record is handled again after the rejoin and nothing is lost."""
    app = agentstream.App(
        "fence-agent",
        broker="memory://fence-agent",
        topic_partitions=1,
        store="memory://",
        web_enabled=False,
        commit_interval=1000.0,
        shutdown_timeout=5.0,
    )
    source = app.topic("src", key_type=str, value_type=int)
    out = app.topic("out", key_type=str, value_type=int)
    release = asyncio.Event()
    refused: list[BaseException] = []

    @app.agent(source)
    async def relay(stream: agentstream.Stream) -> None:
        async for key, value in stream.items():
            if value == 1 and not release.is_set():
                await release.wait()  # the fence comes while this record is in hand
            try:
                await out.send(key=key, value=value)
            except MembershipLapsed as exc:
                refused.append(exc)
                raise

    lapsed = [False]
    monkeypatch.setattr(
        MemoryConsumer, "membership_deadline", lambda self: time.monotonic() - 1.0 if lapsed[0] else None
    )
    monkeypatch.setattr(MemoryConsumer, "request_rejoin", lambda self: None)  # the broker is out of reach
    worker = Worker(app)
    await worker.start()
    try:
        await until(worker.assigned.is_set)
        tasks = list(worker.tasks.values())
        await source.send(key="a", value=1, partition=0)
        await asyncio.sleep(0.05)
        lapsed[0] = True
        await until(lambda: all(t.dirty is not None for t in tasks))
        lapsed[0] = False
        release.set()
        await until(lambda: bool(refused))
        await asyncio.sleep(0.1)
        stopped = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert not stopped, f"a send refused by the fence went to the error policy: {stopped}"
        assert worker.lifecycle.state.value == "running", "a send refused by the fence stopped the worker"
        memory(app)._broker.groups[app.id].request_rebalance()  # the broker back: the rejoin
        memory(app)._broker.wake()
        await until(lambda: len(memory(app).read_topic("out")) >= 1)  # handled again after the rejoin
        await source.send(key="a", value=2, partition=0)
        await until(lambda: len(memory(app).read_topic("out")) >= 2)
        assert worker.lifecycle.state.value in ("running", "rebalancing"), "the worker stopped"
    finally:
        await worker.stop()


async def test_a_fenced_producer_stops_quietly_and_the_clients_close(caplog: pytest.LogCaptureFixture) -> None:
    """A worker stopping while fenced: the producer's flush would raise the fence, whose records
    were dropped on purpose. Closing the clients says so at INFO and still closes the transport."""
    app = agentstream.App("fence-stop", broker=f"memory://fence-stop-{time.monotonic_ns()}", web_enabled=False)
    producer = await app.start_producer()
    await producer.fence(MembershipLapsed("no answered heartbeat for the session timeout"))
    transport = app.transport
    closed: list[bool] = []
    real_close = transport.close

    async def close() -> None:
        closed.append(True)
        await real_close()

    transport.close = close  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="agentstream.app"):
        await app.stop_clients()  # no exception
    assert closed, "the transport was not closed"
    assert [r.levelno for r in caplog.records if "fenced" in r.getMessage()] == [logging.INFO]
