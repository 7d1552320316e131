"""KafkaTransport against the tansu dev broker: topics, produce/consume, groups, assignor adapter."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Mapping, Sequence

import pytest
from aiokafka.structs import TopicPartition as TP  # type: ignore[import-untyped,unused-ignore]

from agentstream.devbroker import DevBroker
from agentstream.exceptions import ConfigError, PartitionCountMismatch, ProducerError, TransportError
from agentstream.transport import get_transport
from agentstream.transport.base import MemberInfo, Message, TopicSpec
from agentstream.transport.kafka import KafkaConsumer, KafkaTransport, parse_kafka_url
from tests.support.fault_proxy import proxied_dev_broker

# Short group timeouts: a new group's first join on tansu takes about half the session timeout.
GROUP: dict[str, Any] = dict(session_timeout_ms=6000, heartbeat_interval_ms=500, rebalance_timeout_ms=6000, fetch_max_wait_ms=100)
_ids = itertools.count()


def name(prefix: str) -> str:
    """Unique topic/group names: the broker is shared by the whole session."""
    return f"{prefix}-{next(_ids)}-{id(object()):x}"


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
        return {
            m.member_id: (everything if m.member_id == first else [], b"hello " + m.user_data) for m in members
        }

    def on_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        self.assigned.append((list(partitions), user_data))


async def group_members(broker: DevBroker, group: str) -> list[str]:
    from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped,unused-ignore]

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group])
        return [m[0] for g in response.groups for m in g[5]]
    finally:
        await admin.close()


async def drain(consumer: KafkaConsumer, count: int, timeout: float = 20.0) -> list[Message]:
    """Fetch until ``count`` records arrived (bounded)."""
    got: list[Message] = []
    async with asyncio.timeout(timeout):
        while len(got) < count:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(records)
    return got


async def poll_until(consumer: KafkaConsumer, predicate: Any, timeout: float = 30.0) -> None:
    """Keep a member polling (as a worker would) until ``predicate()`` holds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await consumer.getmany(timeout_ms=100)


# -- no broker needed --------------------------------------------------------------------------


def test_parse_url() -> None:
    assert parse_kafka_url("kafka://a:1;b:2") == ["a:1", "b:2"]
    assert parse_kafka_url("kafka://a:1,b") == ["a:1", "b:9092"]
    assert parse_kafka_url("KAFKA://127.0.0.1:9092/") == ["127.0.0.1:9092"]
    for bad in ("a:1", "kafka://", "kafka://a:x", "kafka://a:1/topic", "redis://a:1"):
        with pytest.raises(ConfigError) as err:
            parse_kafka_url(bad)
        assert err.value.setting == "broker"


def test_get_transport_schemes() -> None:
    assert isinstance(get_transport("kafka://127.0.0.1:9092"), KafkaTransport)
    with pytest.raises(ConfigError, match="kafka://") as err:
        get_transport("amqp://localhost")
    assert err.value.setting == "broker"


# -- against the broker -------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_ensure_topics_create_and_mismatch(broker: DevBroker) -> None:
    t = KafkaTransport(broker.url)
    a, c = name("a"), name("c")
    try:
        assert await t.partition_count(a) is None
        assert await t.partition_count(a) is None  # asking must not auto-create it
        assert await t.ensure_topics([TopicSpec(a, 3), TopicSpec(c, 2, compacted=True)]) == {a: 3, c: 2}
        assert await t.ensure_topics([TopicSpec(a, 3)]) == {a: 3}
        assert await t.partition_count(c) == 2
        with pytest.raises(PartitionCountMismatch) as err:
            await t.ensure_topics([TopicSpec(a, 5)])
        assert (err.value.topic, err.value.existing, err.value.wanted) == (a, 3, 5)

        # Two workers creating the same topic at once: the loser sees "already exists" and is fine.
        t2 = KafkaTransport(broker.url)
        race = name("race")
        try:
            r1, r2 = await asyncio.gather(t.ensure_topics([TopicSpec(race, 2)]), t2.ensure_topics([TopicSpec(race, 2)]))
            assert r1 == r2 == {race: 2}
        finally:
            await t2.close()
    finally:
        await t.close()


@pytest.mark.asyncio
async def test_produce_consume_with_custom_assignor_and_commit(broker: DevBroker) -> None:
    t = KafkaTransport(broker.url)
    topic, group = name("orders"), name("g")
    await t.ensure_topics([TopicSpec(topic, 3)])
    producer = t.producer(linger_ms=2, session_timeout_ms=1)  # consumer keys are ignored
    await producer.start()
    assignor = AllToOneAssignor(b"member-a")
    listener = RecordingListener()
    consumer = t.consumer(group_id=group, assignor=assignor, **GROUP)
    try:
        assert await producer.partitions_for(topic) == 3
        futs = [
            await producer.send(topic, f"k{i % 6}".encode(), f"v{i}".encode(), headers=[("h", b"x")])
            for i in range(30)
        ]
        await producer.flush()
        metas = [f.result() for f in futs]
        by_key: dict[str, set[int]] = {}
        for i, m in enumerate(metas):
            by_key.setdefault(f"k{i % 6}", set()).add(m.partition)
        assert all(len(parts) == 1 for parts in by_key.values())  # keyed records stay on one partition

        consumer.subscribe([topic], listener)
        await consumer.start()  # returns once the first assignment arrived
        all_tps = {TP(topic, p) for p in range(3)}
        assert consumer.assignment() == all_tps
        assert [m.user_data for m in assignor.seen_members] == [b"member-a"]
        assert assignor.seen_members[0].topics == frozenset({topic})
        assert assignor.assigned[-1] == (sorted(all_tps), b"hello member-a")
        assert ("assigned", all_tps) in listener.events

        records = await drain(consumer, 30)
        assert sorted(r.value or b"" for r in records) == sorted(f"v{i}".encode() for i in range(30))
        for r in records:
            assert r.key is not None and r.partition in by_key[r.key.decode()]
            assert r.headers == (("h", b"x"),) or list(r.headers) == [("h", b"x")]
        ends: dict[TP, int] = {}
        for r in records:
            tp = TP(r.topic, r.partition)
            ends[tp] = max(ends.get(tp, 0), r.offset + 1)
        for tp, end in ends.items():
            assert consumer.highwater(tp) == end  # right, unlike ListOffsets(latest) on tansu
            assert await consumer.position(tp) == end

        assert await consumer.committed(TP(topic, 0)) is None
        await consumer.commit(ends)
        for tp, end in ends.items():
            assert await consumer.committed(tp) == end
        await consumer.commit({})  # no-op
    finally:
        await consumer.stop()
        await producer.stop()
        await t.close()
    # tansu's first generation is 0, where aiokafka skips LeaveGroup; the adapter makes it leave.
    assert await group_members(broker, group) == []

    # A new member of the same group resumes from the committed offsets: nothing left to read.
    again = t.consumer(group_id=group, assignor=AllToOneAssignor(b"member-b"), **GROUP)
    again.subscribe([topic], RecordingListener())
    await again.start()
    try:
        for tp, end in ends.items():
            assert await again.position(tp) == end
        assert await again.getmany(timeout_ms=300) == {}
    finally:
        await again.stop()


@pytest.mark.asyncio
async def test_manual_assign_highwater_pause_resume_seek(broker: DevBroker) -> None:
    t = KafkaTransport(broker.url)
    topic = name("manual")
    await t.ensure_topics([TopicSpec(topic, 2)])
    producer = t.producer()
    await producer.start()
    p0, p1 = TP(topic, 0), TP(topic, 1)
    consumer = t.consumer(group_id=None, fetch_max_wait_ms=100)
    try:
        for i in range(5):
            await producer.send(topic, None, f"a{i}".encode(), partition=0)
        for i in range(4):
            await producer.send(topic, b"k", f"b{i}".encode(), partition=1, timestamp_ms=1_000 + i)
        await producer.flush()

        with pytest.raises(ProducerError, match=r"\[7\]"):
            await producer.send(topic, None, b"nowhere", partition=7)

        consumer.assign([p0, p1])
        assert consumer.assignment() == {p0, p1}
        assert consumer.highwater(p0) is None  # nothing fetched yet
        await consumer.start()
        consumer.pause(p1)
        got = await drain(consumer, 5)
        assert {r.partition for r in got} == {0}
        assert [r.value for r in got] == [f"a{i}".encode() for i in range(5)]
        assert consumer.highwater(p0) == 5
        assert await consumer.getmany(timeout_ms=300) == {}  # p1 still paused

        consumer.resume(p1)
        got = await drain(consumer, 4)
        assert [(r.partition, r.value, r.timestamp) for r in got] == [
            (1, f"b{i}".encode(), 1_000 + i) for i in range(4)
        ]
        assert consumer.highwater(p1) == 4

        consumer.seek(p0, 3)
        assert [r.offset for r in await drain(consumer, 2)] == [3, 4]
        await consumer.seek_to_beginning(p1)
        assert len(await drain(consumer, 4)) == 4
        assert await consumer.position(p1) == 4
    finally:
        await consumer.stop()
        await producer.stop()
        await t.close()


@pytest.mark.asyncio
async def test_two_members_split_partitions(broker: DevBroker) -> None:
    t = KafkaTransport(broker.url)
    topic, group = name("split"), name("g")
    await t.ensure_topics([TopicSpec(topic, 4)])
    all_tps = {TP(topic, p) for p in range(4)}
    la, lb = RecordingListener(), RecordingListener()
    a = t.consumer(group_id=group, **GROUP)
    b = t.consumer(group_id=group, **GROUP)
    a.subscribe([topic], la)
    b.subscribe([topic], lb)
    try:
        await a.start()
        assert a.assignment() == all_tps
        # b joins; a keeps polling like a worker so it rejoins when the group rebalances.
        await asyncio.gather(b.start(), poll_until(a, lambda: len(a.assignment()) == 2))
        await poll_until(b, lambda: len(b.assignment()) == 2)
        assert a.assignment() | b.assignment() == all_tps
        assert not a.assignment() & b.assignment()
        assert ("revoked", all_tps) in la.events  # eager protocol: everything revoked first
        assert la.events[-1] == ("assigned", a.assignment())
        assert lb.events[-1] == ("assigned", b.assignment())

        # b leaves: a gets everything back.
        await b.stop()
        await poll_until(a, lambda: a.assignment() == all_tps)
        assert la.events[-1] == ("assigned", all_tps)
    finally:
        await a.stop()
        await b.stop()
        await t.close()


@pytest.mark.asyncio
async def test_flush_raises_producer_error_when_delivery_fails(tmp_path: Any) -> None:
    """A private broker is stopped under a producer: the failed delivery surfaces from flush()."""
    own = DevBroker(log_path=tmp_path / "tansu.log")
    await own.astart()
    try:
        t = KafkaTransport(own.url)
        topic = name("doomed")
        await t.ensure_topics([TopicSpec(topic, 1)])
        await t.close()
        producer = t.producer(request_timeout_ms=1500, retry_backoff_ms=50)
        await producer.start()
        try:
            await producer.send(topic, b"k", b"ok")
            await producer.flush()  # healthy delivery: no error
            await own.astop()
            fut = await producer.send(topic, b"k", b"lost")
            async with asyncio.timeout(30):
                with pytest.raises(ProducerError, match=rf"{topic}\[0\]"):
                    await producer.flush()
            assert fut.done() and fut.exception() is not None
            with pytest.raises(ProducerError, match=rf"{topic}\[0\]"):
                await producer.flush()  # reported again: a later commit must not pass it either
        finally:
            async with asyncio.timeout(30):
                await producer.stop()
    finally:
        own.stop()


async def test_concurrent_senders_keep_partition_order_and_offsets(broker: DevBroker) -> None:
    """Several tasks sending to one partition through the batching producer: every sender's records
    land in the order it sent them, and each record's delivery names its own offset."""
    t = KafkaTransport(broker.url)
    topic = name("order")
    await t.ensure_topics([TopicSpec(topic, 2)])
    producer = t.producer(linger_ms=5, max_batch_size=2000)  # small batches: many hand-overs
    await producer.start()
    per_sender = 3000
    deliveries: dict[bytes, Any] = {}

    async def sender(i: int) -> None:
        for n in range(per_sender):
            value = b"%d:%d" % (i, n)
            deliveries[value] = await producer.send(topic, b"k%d" % i, value, partition=0)
            if n % 97 == 0:
                await asyncio.sleep(0)  # let the other senders and aiokafka's sender interleave

    consumer = t.consumer(group_id=None, auto_offset_reset="earliest")
    try:
        await asyncio.gather(*(sender(i) for i in range(4)))
        await producer.flush()
        await consumer.start()
        consumer.assign([TP(topic, 0)])
        records = await drain(consumer, 4 * per_sender)
        last: dict[int, int] = {}
        for r in records:
            i, n = map(int, (r.value or b"").split(b":"))
            assert n == last.get(i, -1) + 1, f"sender {i}: record {n} at offset {r.offset} after {last.get(i)}"
            last[i] = n
            md = deliveries[r.value or b""].result()
            assert (md.topic, md.partition, md.offset) == (topic, 0, r.offset)
        assert last == {i: per_sender - 1 for i in range(4)}
    finally:
        await consumer.stop()
        await producer.stop()
        await t.close()
    with pytest.raises(TransportError, match="not started"):  # a known topic, but the producer is stopped
        await producer.send(topic, b"k0", b"late", partition=0)


# -- behind the fault proxy ----------------------------------------------------------------------


async def test_a_send_cancelled_while_waiting_in_send_batch_fails_every_flush(tmp_path: Any) -> None:
    """Issue 13 defect 3: a send cancelled while its batch waits to be queued (an agent cancelled
    after shutdown_timeout) must not leave a dead batch that later records go into, and every flush
    must report the lost record."""
    with proxied_dev_broker(tmp_path / "tansu.log") as (own, proxy):
        t = KafkaTransport(own.url)
        topic = name("cancelled")
        await t.ensure_topics([TopicSpec(topic, 1)])
        producer = t.producer(linger_ms=0, max_batch_size=1024)
        await producer.start()
        try:
            await producer.send(topic, b"k", b"r0", partition=0)
            await producer.flush()
            proxy.pause()  # the broker stops answering: batch A stays in flight ...
            await producer.send(topic, b"k", b"r1", partition=0)
            await asyncio.sleep(0.5)
            await producer.send(topic, b"k", b"B" * 1100, partition=0)  # ... batch B (full) queues behind it ...
            stuck = asyncio.ensure_future(producer.send(topic, b"k", b"r3", partition=0))  # ... C waits in send_batch
            await asyncio.sleep(0.5)
            assert not stuck.done()
            stuck.cancel()
            with pytest.raises(asyncio.CancelledError):
                await stuck

            async def later() -> None:
                for i in range(4, 10):
                    await producer.send(topic, b"k", b"r%d" % i, partition=0)

            sending = asyncio.ensure_future(later())
            await asyncio.sleep(0.2)
            proxy.resume()
            async with asyncio.timeout(60):
                await sending
                for _ in range(3):
                    with pytest.raises(ProducerError, match=rf"{topic}\[0\].*cancelled"):
                        await producer.flush()
        finally:
            proxy.resume()
            async with asyncio.timeout(30):
                await producer.stop()
        consumer = t.consumer(group_id=None, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TP(topic, 0)])
            got = [m.value for m in await drain(consumer, 9)]
        finally:
            await consumer.stop()
            await t.close()
        assert got == [b"r0", b"r1", b"B" * 1100] + [b"r%d" % i for i in range(4, 10)]


def _table_partition(tmp_path: Any) -> Any:
    import agentstream
    from agentstream.tables.partition import TablePartition
    from agentstream.tables.store import store_for

    app = agentstream.App("slow", broker="memory://slow", store="memory://", web_enabled=False)
    return TablePartition(app.Table("t", default=int), 0, store_for("memory://", tmp_path / "t0"), None, 100)


async def test_restore_behind_a_slow_broker_reads_the_whole_changelog(tmp_path: Any) -> None:
    """Issue 13 defect 4: every broker answer delayed 0.5-1 s; a 1,000-record changelog restores
    all 1,000 records (the old restorer stopped after three empty 300 ms polls, with 0)."""
    from agentstream.tables.restore import Restorer

    with proxied_dev_broker(tmp_path / "tansu.log", seed=4) as (own, proxy):
        t = KafkaTransport(own.url)
        topic = name("slow-changelog")
        await t.ensure_topics([TopicSpec(topic, 1, compacted=True)])
        producer = t.producer()
        await producer.start()
        for i in range(1000):
            await producer.send(topic, b"k%d" % i, b"%d" % i, partition=0)
        await producer.flush()
        await producer.stop()
        proxy.delay(downstream=(0.5, 1.0))
        consumer = t.consumer(group_id=None, auto_offset_reset="earliest", max_partition_fetch_bytes=8192)
        await consumer.start()
        part = _table_partition(tmp_path)
        try:
            async with asyncio.timeout(120):
                n = await Restorer(consumer, "slow broker", timeout=60).run({TP(topic, 0): part})
        finally:
            await consumer.stop()
            await t.close()
        assert n == 1000 and part.changelog_offset == 1000 and len(part.store) == 1000


async def test_restore_against_a_frozen_broker_fails_with_restore_timeout(tmp_path: Any) -> None:
    from agentstream.exceptions import RestoreTimeout
    from agentstream.tables.restore import Restorer

    with proxied_dev_broker(tmp_path / "tansu.log") as (own, proxy):
        t = KafkaTransport(own.url)
        topic = name("frozen-changelog")
        await t.ensure_topics([TopicSpec(topic, 1, compacted=True)])
        producer = t.producer()
        await producer.start()
        await producer.send(topic, b"k", b"1", partition=0)
        await producer.flush()
        await producer.stop()
        consumer = t.consumer(group_id=None, auto_offset_reset="earliest")
        await consumer.start()
        proxy.pause()
        try:
            async with asyncio.timeout(60):
                with pytest.raises(RestoreTimeout, match=rf"no progress for 3s .*{topic}\[0\] at offset 0"):
                    await Restorer(consumer, "frozen", timeout=3).run({TP(topic, 0): _table_partition(tmp_path)})
        finally:
            proxy.resume()
            await consumer.stop()
            await t.close()
