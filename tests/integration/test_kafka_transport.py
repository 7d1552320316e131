"""What only the ``kafka://`` transport has: URL parsing, tansu's quirks, the batching producer's order
and failures behind a slow or frozen broker. What both transports promise is in
tests/integration/test_transport_contract.py, run against memory:// and the broker."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from aiokafka.structs import TopicPartition as TP  # type: ignore[import-untyped,unused-ignore]

from agentstream.devbroker import DevBroker
from agentstream.exceptions import ConfigError, ProducerError, TransportError
from agentstream.tables.manager import RESTORE_FETCH_MAX_WAIT_MS
from agentstream.transport import get_transport
from agentstream.transport.base import Message, TopicSpec
from agentstream.transport.kafka import KafkaConsumer, KafkaTransport, parse_kafka_url
from tests.support.fault_proxy import proxied_dev_broker

_ids = itertools.count()


def name(prefix: str) -> str:
    """Unique topic/group names: the broker is shared by the whole session."""
    return f"{prefix}-{next(_ids)}-{id(object()):x}"


async def drain(consumer: KafkaConsumer, count: int, timeout: float = 20.0) -> list[Message]:
    """Fetch until ``count`` records arrived (bounded)."""
    got: list[Message] = []
    async with asyncio.timeout(timeout):
        while len(got) < count:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(records)
    return got


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
async def test_two_workers_creating_one_topic_at_once_both_succeed(broker: DevBroker) -> None:
    """The loser of the race sees "already exists" and is fine (the contract suite covers the rest)."""
    t, t2 = KafkaTransport(broker.url), KafkaTransport(broker.url)
    race = name("race")
    try:
        r1, r2 = await asyncio.gather(t.ensure_topics([TopicSpec(race, 2)]), t2.ensure_topics([TopicSpec(race, 2)]))
        assert r1 == r2 == {race: 2}
    finally:
        await t.close()
        await t2.close()


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


async def test_fetched_records_are_messages_and_other_aiokafka_consumers_keep_theirs(broker: DevBroker) -> None:
    """Our consumer reads compiled Messages (transport/kafka/fetch.py); a plain AIOKafkaConsumer in
    the same process, fetching the same records, still gets aiokafka's ConsumerRecords."""
    from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped,unused-ignore]
    from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped,unused-ignore]

    from agentstream.transport.message import Message as CompiledMessage

    t = KafkaTransport(broker.url)
    topic = name("messages")
    await t.ensure_topics([TopicSpec(topic, 1)])
    producer = t.producer()
    await producer.start()
    ours = t.consumer(group_id=None, auto_offset_reset="earliest")
    theirs = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        for i in range(3):
            await producer.send(topic, b"k%d" % i, b"v%d" % i, partition=0, headers=[("h", b"%d" % i)])
        await producer.flush()
        await ours.start()
        ours.assign([TP(topic, 0)])
        await theirs.start()
        theirs.assign([TP(topic, 0)])
        got = await drain(ours, 3)
        plain: list[Any] = []
        async with asyncio.timeout(20):
            while len(plain) < 3:
                for records in (await theirs.getmany(timeout_ms=200)).values():
                    plain.extend(records)
        assert all(type(m) is CompiledMessage for m in got)
        assert all(type(r) is ConsumerRecord for r in plain)
        assert [(m.topic, m.partition, m.offset, m.timestamp_ms, m.key, m.value, m.headers) for m in got] == [
            (r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, r.headers) for r in plain
        ]
        assert [m.tp for m in got] == [TP(topic, 0)] * 3
    finally:
        await theirs.stop()
        await ours.stop()
        await producer.stop()
        await t.close()


class _Assigned:
    """A rebalance listener that only notes its assignments."""

    def __init__(self) -> None:
        self.assigned: set[TP] = set()

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self.assigned = set()

    async def on_partitions_assigned(self, assigned: set[TP]) -> None:
        self.assigned = set(assigned)


async def test_a_joining_follower_sends_its_sync_group_after_the_leaders(
    broker: DevBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The member that starts a rebalance joins first and, as a follower, would send SyncGroup before
    the leader; tansu answers such a request only at its next one-second poll. Our follower waits for
    the leader's plan (transport/kafka/follower_sync.py): every request that reaches the wire is
    recorded, and the follower's SyncGroup goes out only after the leader's was answered."""
    from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped,unused-ignore]
    from aiokafka.protocol.group import SyncGroupRequest  # type: ignore[import-untyped,unused-ignore]

    wire: list[tuple[str, int, str]] = []  # (event, client id, request)
    send = AIOKafkaClient.send

    async def recorded(self: Any, node_id: Any, request: Any, **kw: Any) -> Any:
        what = type(request).__name__
        if isinstance(request, SyncGroupRequest):
            what += " (leader)" if request._group_assignment else " (follower)"
        wire.append(("sent", id(self), what))
        answer = await send(self, node_id, request, **kw)
        wire.append(("answered", id(self), what))
        return answer

    monkeypatch.setattr(AIOKafkaClient, "send", recorded)
    t = KafkaTransport(broker.url)
    topic, group = name("follower-sync"), name("follower-sync-group")
    await t.ensure_topics([TopicSpec(topic, 2)])
    settings = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 500}
    leader, follower = (t.consumer(group_id=group, **settings) for _ in range(2))
    noted = _Assigned(), _Assigned()
    try:
        leader.subscribe([topic], noted[0])
        await leader.start()  # alone in the group: its leader
        follower.subscribe([topic], noted[1])
        await follower.start()  # returns once its first assignment came
        clients = {who: id(c._consumer._client) for who, c in (("leader", leader), ("follower", follower))}
        events = [(event, who, what) for event, cid, what in wire for who in clients if clients[who] == cid]
        synced = events.index(
            ("answered", "leader", "SyncGroupRequest (leader)"), events.index(("sent", "follower", "JoinGroupRequest"))
        )
        assert ("sent", "follower", "SyncGroupRequest (follower)") in events[synced:]
        assert ("sent", "follower", "SyncGroupRequest (follower)") not in events[:synced]
        assert len(noted[1].assigned) == 1
    finally:
        await follower.stop()
        await leader.stop()
        await t.close()


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
        consumer = t.consumer(
            group_id=None,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=8192,
            fetch_max_wait_ms=RESTORE_FETCH_MAX_WAIT_MS,  # the restore reader's (TableManager's)
        )
        await consumer.start()
        part = _table_partition(tmp_path)
        try:
            async with asyncio.timeout(120):
                n = await Restorer(consumer, "slow broker", timeout=60).run({TP(topic, 0): part})
        finally:
            await consumer.stop()
            await t.close()
        assert n == 1000 and part.changelog_offset == 1000 and len(part.store) == 1000


async def test_an_empty_changelog_restores_without_waiting_out_the_workers_fetch_wait(
    broker: DevBroker, tmp_path: Any
) -> None:
    """A restore knows an empty changelog's end only from an empty fetch, which the broker holds
    for the fetch wait; the counting tasks wait for the restore. With the worker's fetch wait at
    10 s, the restore reader (built as TableManager builds it) still finishes well within it."""
    from agentstream.settings import Settings
    from agentstream.tables.manager import RESTORE_MAX_POLL_RECORDS, restore_fetch_max_wait_ms
    from agentstream.tables.restore import Restorer

    settings = Settings(id="empty-restore", consumer_fetch_max_wait=10.0)
    t = KafkaTransport(broker.url)
    topic = name("empty-changelog")
    await t.ensure_topics([TopicSpec(topic, 2, compacted=True)])
    consumer = t.consumer(
        group_id=None,
        auto_offset_reset="earliest",
        max_poll_records=RESTORE_MAX_POLL_RECORDS,
        fetch_max_wait_ms=restore_fetch_max_wait_ms(settings),
    )
    await consumer.start()
    parts = {TP(topic, p): _table_partition(tmp_path / str(p)) for p in range(2)}
    try:
        # The unchanged reader would wait 10 s for the first answer; this reader's first answer
        # comes after 20 ms. The bound sits just under 10 s: a loaded machine must not fail it.
        async with asyncio.timeout(9):
            n = await Restorer(consumer, "empty").run(parts)
    finally:
        await consumer.stop()
        await t.close()
    assert n == 0 and all((part.changelog_offset or 0) == 0 for part in parts.values())


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
        consumer = t.consumer(group_id=None, auto_offset_reset="earliest", fetch_max_wait_ms=RESTORE_FETCH_MAX_WAIT_MS)
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
