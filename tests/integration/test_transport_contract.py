"""The transport contract: what ``memory://`` and ``kafka://`` both promise, one suite run against both.

The memory transport is the test harness's broker, so every behaviour here must hold on it exactly
as on the real broker (tansu, started by tests/integration/conftest.py), or tests written against
it prove nothing. Behaviours only one side has (injected faults, tansu's quirks, the producer's
batching under a slow broker) stay in tests/unit/transport/test_memory_transport.py and
tests/integration/test_kafka_transport.py.

Bounded in time: short group timeouts (a new group's first join on tansu takes about half the
session timeout), every wait under ``asyncio.timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from agentstream.devbroker import DevBroker
from agentstream.exceptions import PartitionCountMismatch, ProducerError, TransportError
from agentstream.transport.base import TP, Consumer, MemberInfo, Message, Producer, TopicSpec, Transport
from agentstream.transport.kafka import KafkaTransport
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.partitioner import default_partition

pytestmark = pytest.mark.asyncio

# Short group timeouts: a new group's first join on tansu takes about half the session timeout.
GROUP: dict[str, Any] = dict(
    session_timeout_ms=6000, heartbeat_interval_ms=500, rebalance_timeout_ms=6000, fetch_max_wait_ms=100
)
_ids = itertools.count()


def name(prefix: str) -> str:
    """Unique topic and group names: the broker is shared by the whole session."""
    return f"{prefix}-{next(_ids)}-{id(object()):x}"


BreakDelivery = Callable[[], Awaitable[None]]


@dataclass
class Env:
    """One transport under test, and how to make its deliveries fail."""

    kind: str
    transport: Transport
    doomed: Callable[[], contextlib.AbstractAsyncContextManager[tuple[Transport, BreakDelivery]]]


@contextlib.asynccontextmanager
async def _memory_doomed(t: MemoryTransport) -> AsyncIterator[tuple[Transport, BreakDelivery]]:
    async def arm() -> None:
        t.faults.arm("send_fail")

    yield t, arm


@contextlib.asynccontextmanager
async def _kafka_doomed(tmp_path: Any) -> AsyncIterator[tuple[Transport, BreakDelivery]]:
    """A private broker, stopped under the producer when delivery must fail."""
    own = DevBroker(log_path=tmp_path / "tansu-doomed.log")
    await own.astart()
    t = KafkaTransport(own.url)

    async def stop_broker() -> None:
        await own.astop()

    try:
        yield t, stop_broker
    finally:
        await t.close()
        own.stop()


@pytest_asyncio.fixture(params=["memory", "kafka"])
async def env(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Env]:
    if request.param == "memory":
        MemoryTransport.reset_all()
        mt = MemoryTransport(f"memory://contract-{next(_ids)}")
        yield Env("memory", mt, lambda: _memory_doomed(mt))
        await mt.close()
        MemoryTransport.reset_all()
    else:
        broker: DevBroker = request.getfixturevalue("broker")
        kt = KafkaTransport(broker.url)
        yield Env("kafka", kt, lambda: _kafka_doomed(tmp_path))
        await kt.close()


class RecordingListener:
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TP]]] = []

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self.events.append(("revoked", set(revoked)))

    async def on_partitions_assigned(self, assigned: set[TP]) -> None:
        self.events.append(("assigned", set(assigned)))


class AllToOneAssignor:
    """Gives every partition to the first member (by id) and hands everyone a greeting."""

    name = "all-to-one"

    def __init__(self, tag: bytes) -> None:
        self.tag = tag
        self.seen_members: list[MemberInfo] = []
        self.assigned: list[tuple[list[TP], bytes]] = []

    def member_user_data(self) -> bytes:
        return self.tag

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberInfo]
    ) -> dict[str, tuple[list[TP], bytes]]:
        self.seen_members = list(members)
        first = min(m.member_id for m in members)
        everything = [TP(t, p) for t, n in sorted(partitions_per_topic.items()) for p in range(n)]
        return {m.member_id: (everything if m.member_id == first else [], b"hello " + m.user_data) for m in members}

    def on_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        self.assigned.append((sorted(partitions), user_data))


async def drain(consumer: Consumer, count: int, timeout: float = 20.0) -> list[Message]:
    """Fetch until ``count`` records arrived (bounded)."""
    got: list[Message] = []
    async with asyncio.timeout(timeout):
        while len(got) < count:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(records)
    return got


async def poll_until(consumer: Consumer, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Keep a member polling (as a worker would) until ``predicate()`` holds (records fetched on the
    way are dropped: use it where there are none)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await consumer.getmany(timeout_ms=100)


@contextlib.asynccontextmanager
async def started(*clients: Producer | Consumer) -> AsyncIterator[None]:
    """Start the clients; stop them all at the end, even after a failure (bounded)."""
    try:
        for client in clients:
            await client.start()
        yield
    finally:
        async with asyncio.timeout(30):
            for client in reversed(clients):
                await client.stop()


async def topic_with(env: Env, partitions: int) -> str:
    topic = name("t")
    assert await env.transport.ensure_topics([TopicSpec(topic, partitions)]) == {topic: partitions}
    return topic


# -- topics ------------------------------------------------------------------------------------------


async def test_ensure_topics_creates_counts_and_refuses_a_mismatch(env: Env) -> None:
    t = env.transport
    a, c = name("a"), name("c")
    assert await t.partition_count(a) is None
    assert await t.partition_count(a) is None  # asking must not create it
    assert await t.ensure_topics([TopicSpec(a, 3), TopicSpec(c, 2, compacted=True)]) == {a: 3, c: 2}
    assert await t.ensure_topics([TopicSpec(a, 3)]) == {a: 3}  # existing: fine
    assert await t.partition_count(c) == 2
    with pytest.raises(PartitionCountMismatch) as err:
        await t.ensure_topics([TopicSpec(a, 5)])
    assert (err.value.topic, err.value.existing, err.value.wanted) == (a, 3, 5)
    assert await t.ensure_topics([]) == {}
    assert {a, c} <= set(await t.list_topics())


# -- producing and fetching ----------------------------------------------------------------------------


async def test_records_come_back_in_order_with_keys_headers_timestamps_and_offsets(env: Env) -> None:
    topic = await topic_with(env, 2)
    producer = env.transport.producer()
    consumer = env.transport.consumer(group_id=None, **GROUP)
    p0, p1 = TP(topic, 0), TP(topic, 1)
    async with started(producer, consumer):
        assert await producer.partitions_for(topic) == 2
        sent = [
            await producer.send(
                topic,
                b"k%d" % (i % 3),
                b"v%d" % i,
                partition=0,
                timestamp_ms=1_000 + i,
                headers=[("h", b"%d" % i), ("h", b"again")],
            )
            for i in range(10)
        ]
        tombstone = await producer.send(topic, b"gone", None, partition=1)
        keyless = await producer.send(topic, None, b"no key", partition=1, timestamp_ms=5)
        await producer.flush()
        metas = [d.result() for d in sent]
        assert [(m.topic, m.partition, m.offset) for m in metas] == [(topic, 0, i) for i in range(10)]
        assert [m.timestamp for m in metas] == [1_000 + i for i in range(10)]
        assert (tombstone.result().partition, tombstone.result().offset) == (1, 0)
        assert keyless.result().offset == 1

        consumer.assign([p0, p1])
        assert consumer.assignment() == {p0, p1}
        got = await drain(consumer, 12)
    by_tp = {tp: [r for r in got if (r.topic, r.partition) == tp] for tp in (p0, p1)}
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in by_tp[p0]] == [
        (i, b"k%d" % (i % 3), b"v%d" % i, 1_000 + i) for i in range(10)
    ]
    assert [list(r.headers) for r in by_tp[p0]] == [[("h", b"%d" % i), ("h", b"again")] for i in range(10)]
    assert [(r.offset, r.key, r.value) for r in by_tp[p1]] == [(0, b"gone", None), (1, None, b"no key")]
    assert by_tp[p1][1].timestamp_ms == 5 and list(by_tp[p1][1].headers) == []


async def test_keyed_records_land_on_the_default_partitioner_s_partition(env: Env) -> None:
    topic = await topic_with(env, 5)
    producer = env.transport.producer()
    async with started(producer):
        keys = [b"user-%d" % i for i in range(40)]
        deliveries = [await producer.send(topic, key, b"x") for key in keys]
        keyless = [await producer.send(topic, None, b"x") for _ in range(10)]
        await producer.flush()
    assert [d.result().partition for d in deliveries] == [default_partition(key, 5) for key in keys]
    assert all(0 <= d.result().partition < 5 for d in keyless)


async def test_sending_to_a_partition_that_does_not_exist_or_before_start_fails(env: Env) -> None:
    topic = await topic_with(env, 2)
    producer = env.transport.producer()
    with pytest.raises(TransportError, match="start"):
        await producer.send(topic, b"k", b"v", partition=0)
    async with started(producer):
        await producer.send(topic, b"k", b"v", partition=0)  # the topic is known from now on
        with pytest.raises(TransportError, match=r"\[2\]|2"):
            await producer.send(topic, b"k", b"v", partition=2)
        await producer.flush()


async def test_a_failed_delivery_fails_every_later_flush(env: Env) -> None:
    """Sticky: a commit after *any* later flush must not pass the lost record."""
    async with env.doomed() as (t, break_delivery):
        topic = name("doomed")
        await t.ensure_topics([TopicSpec(topic, 1)])
        producer = t.producer(request_timeout_ms=1500, retry_backoff_ms=50)
        async with started(producer):
            await producer.send(topic, b"k", b"ok")
            await producer.flush()  # healthy delivery: no error
            await break_delivery()
            lost = await producer.send(topic, b"k", b"lost")
            async with asyncio.timeout(30):
                with pytest.raises(ProducerError, match=rf"{topic}\[0\]"):
                    await producer.flush()
            assert lost.done() and (lost.cancelled() or lost.exception() is not None)
            for _ in range(2):
                with pytest.raises(ProducerError, match=rf"{topic}\[0\]"):
                    await producer.flush()


# -- reading without a group -------------------------------------------------------------------------


async def test_pause_resume_seek_position_and_the_high_watermark(env: Env) -> None:
    topic = await topic_with(env, 2)
    producer = env.transport.producer()
    consumer = env.transport.consumer(group_id=None, **GROUP)
    p0, p1 = TP(topic, 0), TP(topic, 1)
    async with started(producer, consumer):
        for i in range(5):
            await producer.send(topic, None, b"a%d" % i, partition=0)
        for i in range(4):
            await producer.send(topic, b"k", b"b%d" % i, partition=1)
        await producer.flush()

        consumer.assign([p0, p1])
        assert consumer.highwater(p0) is None  # known from a fetch, not before
        for call in (consumer.pause, consumer.resume):
            with pytest.raises(TransportError):
                call(TP(topic, 2))  # not assigned
        consumer.pause(p1)
        got = await drain(consumer, 5)
        assert [(r.partition, r.value) for r in got] == [(0, b"a%d" % i) for i in range(5)]
        assert consumer.highwater(p0) == 5 and await consumer.position(p0) == 5
        assert await consumer.getmany(timeout_ms=300) == {}  # p1 paused, p0 at its end

        consumer.resume(p1)
        assert [r.value for r in await drain(consumer, 4)] == [b"b%d" % i for i in range(4)]
        assert consumer.highwater(p1) == 4

        consumer.seek(p0, 3)
        assert await consumer.position(p0) == 3
        assert [r.offset for r in await drain(consumer, 2)] == [3, 4]
        await consumer.seek_to_beginning(p1)
        assert [r.offset for r in await drain(consumer, 4)] == [0, 1, 2, 3]
        assert await consumer.position(p1) == 4

        await producer.send(topic, None, b"a5", partition=0)  # the end moves on as records arrive
        await producer.flush()
        assert [r.value for r in await drain(consumer, 1)] == [b"a5"]
        assert consumer.highwater(p0) == 6
        with pytest.raises(TransportError, match="group"):  # offsets belong to a group
            await consumer.commit({p0: 6})
        with pytest.raises(TransportError, match="group"):
            await consumer.committed(p0)
        with pytest.raises(TransportError, match="group"):
            consumer.subscribe([topic], RecordingListener())
    with pytest.raises(TransportError):
        await consumer.getmany(timeout_ms=0)  # stopped


# -- consumer groups ---------------------------------------------------------------------------------


async def test_committed_offsets_are_where_the_group_resumes(env: Env) -> None:
    topic, group = await topic_with(env, 1), name("g")
    tp = TP(topic, 0)
    producer = env.transport.producer()
    async with started(producer):
        for i in range(5):
            await producer.send(topic, b"k", b"v%d" % i, partition=0)
        await producer.flush()

    first = env.transport.consumer(group_id=group, **GROUP)
    first.subscribe([topic], RecordingListener())
    async with started(first):
        assert [r.offset for r in await drain(first, 5)] == [0, 1, 2, 3, 4]  # fetching takes part in the join
        assert first.assignment() == {tp} and await first.committed(tp) is None
        await first.commit({})  # nothing to commit: a no-op
        await first.commit({tp: 2})
        assert await first.committed(tp) == 2

    again = env.transport.consumer(group_id=group, **GROUP)
    again.subscribe([topic], RecordingListener())
    other = env.transport.consumer(group_id=name("other"), **GROUP)
    other.subscribe([topic], RecordingListener())
    async with started(again, other):
        assert [r.offset for r in await drain(again, 3)] == [2, 3, 4]  # from the committed offset
        assert await again.committed(tp) == 2
        assert [r.offset for r in await drain(other, 5)] == [0, 1, 2, 3, 4]  # another group: from the start
        assert await other.committed(tp) is None


async def test_two_members_split_the_partitions_with_revoke_and_assign_callbacks(env: Env) -> None:
    topic, group = await topic_with(env, 4), name("g")
    everything = {TP(topic, p) for p in range(4)}
    la, lb = RecordingListener(), RecordingListener()
    a = env.transport.consumer(group_id=group, **GROUP)
    b = env.transport.consumer(group_id=group, **GROUP)
    a.subscribe([topic], la)
    b.subscribe([topic], lb)
    async with started(a):
        await poll_until(a, lambda: a.assignment() == everything)
        assert la.events[-1] == ("assigned", everything)
        assert all(tps == set() for kind, tps in la.events if kind == "revoked")
        async with started(b):
            # a keeps polling like a worker, so it takes part in the rebalance b's join starts.
            await asyncio.gather(
                poll_until(a, lambda: len(a.assignment()) == 2), poll_until(b, lambda: len(b.assignment()) == 2)
            )
            assert a.assignment() | b.assignment() == everything and not a.assignment() & b.assignment()
            assert ("revoked", everything) in la.events  # eager protocol: everything revoked first ...
            assert la.events[-1] == ("assigned", a.assignment())  # ... then the new share assigned
            assert lb.events[-1] == ("assigned", b.assignment())
            with pytest.raises(TransportError):  # a member may not commit what it does not own
                await a.commit({tp: 1 for tp in b.assignment()})
        # b left: a gets everything back.
        await poll_until(a, lambda: a.assignment() == everything)
        assert la.events[-1] == ("assigned", everything)


async def test_group_members_lists_the_running_members_only(env: Env) -> None:
    topic, group = await topic_with(env, 1), name("g")
    assert await env.transport.group_members(group) == []
    consumer = env.transport.consumer(group_id=group, **GROUP)
    consumer.subscribe([topic], RecordingListener())
    async with started(consumer):
        await poll_until(consumer, lambda: consumer.assignment() == {TP(topic, 0)})
        assert len(await env.transport.group_members(group)) == 1
    assert await env.transport.group_members(group) == []  # a stopped member leaves its group


async def test_a_custom_assignor_runs_on_the_leader_with_each_member_s_user_data(env: Env) -> None:
    topic, group = await topic_with(env, 3), name("g")
    everything = {TP(topic, p) for p in range(3)}
    assignor = AllToOneAssignor(b"member-a")
    consumer = env.transport.consumer(group_id=group, assignor=assignor, **GROUP)
    consumer.subscribe([topic], RecordingListener())
    async with started(consumer):
        await poll_until(consumer, lambda: consumer.assignment() == everything)
        assert [(m.topics, m.user_data) for m in assignor.seen_members] == [(frozenset({topic}), b"member-a")]
        assert assignor.assigned[-1] == (sorted(everything), b"hello member-a")
