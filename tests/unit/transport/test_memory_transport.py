"""The memory transport must behave like Kafka, or tests written against it prove nothing.

What it promises exactly as ``kafka://`` does is pinned by tests/integration/test_transport_contract.py
(run against both); here: what only the twin has (injected faults, settle(), brokers by URL, its
round-robin for keyless records) and Kafka's rules checked in more detail than a broker allows
(limits, mid-rebalance departures)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
import pytest_asyncio
from aiokafka.partitioner import DefaultPartitioner, murmur2

from agentstream.exceptions import PartitionCountMismatch, TransportError
from agentstream.transport.base import TP, MemberInfo, TopicSpec
from agentstream.transport.memory import MemoryConsumer, MemoryTransport
from agentstream.transport.partitioner import default_partition

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _fresh_brokers() -> Any:
    MemoryTransport.reset_all()
    yield
    MemoryTransport.reset_all()


@pytest_asyncio.fixture
async def transport() -> AsyncIterator[MemoryTransport]:
    t = MemoryTransport("memory://")
    await t.ensure_topics([TopicSpec("orders", 4)])
    yield t
    await t.close()


async def produce(t: MemoryTransport, topic: str, n: int, partition: int | None = None) -> None:
    p = t.producer()
    await p.start()
    for i in range(n):
        await p.send(topic, f"k{i}".encode(), f"v{i}".encode(), partition=partition)
    await p.stop()


class Listener:
    """Records rebalance callbacks in order as ("revoked"|"assigned", partitions)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, set[TP]]] = []

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        self.events.append(("revoked", set(revoked)))

    async def on_partitions_assigned(self, assigned: set[TP]) -> None:
        self.events.append(("assigned", set(assigned)))


async def member(t: MemoryTransport, group: str = "g", listener: Any = None, **kw: Any) -> MemoryConsumer:
    c = t.consumer(group_id=group, **kw)
    c.subscribe(["orders"], listener or Listener())
    await c.start()
    return c


# -- producing ---------------------------------------------------------------------------------


async def test_java_murmur2_values() -> None:
    # Values from Kafka's UtilsTest.testMurmur2 (signed Java ints).
    for data, java in [(b"21", -973932308), (b"foobar", -790332482), (b"abc", 479470107)]:
        assert murmur2(data) & 0xFFFFFFFF == java & 0xFFFFFFFF
    assert default_partition(b"foobar", 12) == (-790332482 & 0x7FFFFFFF) % 12 == 6


@pytest.mark.parametrize("n", [3, 7, 12])
async def test_key_partitioning_matches_default_partitioner(n: int) -> None:
    t = MemoryTransport("memory://")
    await t.ensure_topics([TopicSpec("t", n)])
    p = t.producer()
    await p.start()
    known = {3: [0, 0, 0, 1], 7: [0, 3, 4, 1], 12: [6, 0, 3, 4]}[n]  # computed with aiokafka
    for key, expected in zip([b"foobar", b"21", b"abc", b"user-42"], known):
        meta = (await p.send("t", key, b"x")).result()
        assert meta.partition == expected == DefaultPartitioner()(key, list(range(n)), list(range(n)))


async def test_send_metadata_offsets_and_record_fields(transport: MemoryTransport) -> None:
    p = transport.producer()
    await p.start()
    metas = [(await p.send("orders", None, b"v", partition=2, timestamp_ms=1000 + i)).result() for i in range(3)]
    assert [m.offset for m in metas] == [0, 1, 2]
    assert metas[1].topic_partition == TP("orders", 2) and metas[1].timestamp == 1001
    assert metas[1].log_start_offset == 0 and metas[1].timestamp_type == 0
    before = int(time.time() * 1000)
    fut = await p.send("orders", b"key", None, partition=1, headers=[("h", b"1")])
    assert fut.done()
    await p.flush()
    rec = [r for r in transport.read_topic("orders") if r.partition == 1][0]
    assert (rec.key, rec.value, rec.offset, rec.headers) == (b"key", None, 0, (("h", b"1"),))
    assert (rec.serialized_key_size, rec.serialized_value_size, rec.checksum) == (3, -1, None)
    assert rec.timestamp_ms >= before
    assert transport.end_offsets([TP("orders", 2), TP("orders", 0)]) == {TP("orders", 2): 3, TP("orders", 0): 0}
    assert await p.partitions_for("orders") == 4


async def test_keyless_records_spread_and_unknown_topic_is_an_error(transport: MemoryTransport) -> None:
    p = transport.producer()
    await p.start()
    parts = {(await p.send("orders", None, b"v")).result().partition for _ in range(4)}
    assert parts == {0, 1, 2, 3}
    with pytest.raises(TransportError, match="declare"):
        await p.send("nope", b"k", b"v")
    with pytest.raises(TransportError):
        await p.send("orders", b"k", b"v", partition=4)


async def test_a_partition_count_mismatch_creates_none_of_the_topics(transport: MemoryTransport) -> None:
    with pytest.raises(PartitionCountMismatch):
        await transport.ensure_topics([TopicSpec("new", 1), TopicSpec("orders", 8)])
    assert await transport.partition_count("new") is None  # checked before anything is created


async def test_brokers_are_keyed_by_url() -> None:
    a, a2, b = MemoryTransport("memory://"), MemoryTransport("memory://"), MemoryTransport("memory://x")
    await a.ensure_topics([TopicSpec("t", 1)])
    assert await a2.partition_count("t") == 1
    assert await b.partition_count("t") is None


# -- fetching ----------------------------------------------------------------------------------


async def reader(t: MemoryTransport, *tps: TP, **kw: Any) -> MemoryConsumer:
    c = t.consumer(group_id=kw.pop("group_id", None), **kw)
    c.assign(list(tps))
    await c.start()
    return c


async def test_getmany_limits_and_positions(transport: MemoryTransport) -> None:
    await produce(transport, "orders", 10, partition=0)
    await produce(transport, "orders", 10, partition=1)
    c = await reader(transport, TP("orders", 0), TP("orders", 1))
    batch = await c.getmany(max_records=15)
    assert sum(len(v) for v in batch.values()) == 15
    rest = await c.getmany()
    assert sum(len(v) for v in rest.values()) == 5
    for tp in (TP("orders", 0), TP("orders", 1)):
        offsets = [r.offset for r in batch.get(tp, []) + rest.get(tp, [])]
        assert offsets == list(range(10))
        assert await c.position(tp) == 10 and c.highwater(tp) == 10
    assert await c.getmany() == {}


async def test_getmany_default_limit_is_500(transport: MemoryTransport) -> None:
    await produce(transport, "orders", 600, partition=3)
    c = await reader(transport, TP("orders", 3))
    assert len((await c.getmany())[TP("orders", 3)]) == 500


async def test_getmany_waits_for_data_and_times_out(transport: MemoryTransport) -> None:
    c = await reader(transport, TP("orders", 0))
    start = time.monotonic()
    assert await c.getmany(timeout_ms=100) == {}
    assert time.monotonic() - start >= 0.09

    async def later() -> None:
        await asyncio.sleep(0.05)
        await produce(transport, "orders", 1, partition=0)

    task = asyncio.create_task(later())
    # A getmany that waited out its whole poll timeout instead of waking on the record would take
    # a minute; the bound fails that long before, yet is no speed test for a loaded machine.
    batch = await asyncio.wait_for(c.getmany(timeout_ms=60_000), 30)
    assert len(batch[TP("orders", 0)]) == 1
    await task


async def test_auto_offset_reset_latest(transport: MemoryTransport) -> None:
    await produce(transport, "orders", 3, partition=0)
    c = await reader(transport, TP("orders", 0), auto_offset_reset="latest", session_timeout_ms=1)
    assert await c.position(TP("orders", 0)) == 3
    await produce(transport, "orders", 1, partition=0)
    assert [r.offset for r in (await c.getmany())[TP("orders", 0)]] == [3]


# -- groups ------------------------------------------------------------------------------------


async def test_member_cannot_fetch_during_revoke_but_can_commit(transport: MemoryTransport) -> None:
    await produce(transport, "orders", 4)
    seen: list[Any] = []

    class Committing(Listener):
        async def on_partitions_revoked(self, revoked: set[TP]) -> None:
            if revoked:
                seen.append(await c1.getmany())
                await c1.commit({tp: 1 for tp in revoked})
            await super().on_partitions_revoked(revoked)

    c1 = await member(transport, listener=Committing())
    await transport.settle()
    await member(transport)
    await transport.settle()
    assert seen == [{}]
    assert await c1.committed(TP("orders", 0)) == 1


class StickyAssignor:
    """Gives every partition to the member whose user data is b'winner'; echoes data back."""

    name = "sticky-test"

    def __init__(self, tag: bytes) -> None:
        self.tag = tag
        self.received: list[tuple[list[TP], bytes]] = []
        self.calls = 0

    def member_user_data(self) -> bytes:
        return self.tag

    def assign(
        self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberInfo]
    ) -> dict[str, tuple[list[TP], bytes]]:
        self.calls += 1
        tps = [TP(t, p) for t, n in partitions_per_topic.items() for p in range(n)]
        return {
            m.member_id: (
                tps if m.user_data == b"winner" else [],
                b"echo:" + m.user_data + b":" + ",".join(sorted(m.topics)).encode(),
            )
            for m in members
        }

    def on_assignment(self, partitions: list[TP], user_data: bytes) -> None:
        self.received.append((list(partitions), user_data))


async def test_custom_assignor_user_data_round_trip(transport: MemoryTransport) -> None:
    a1, a2 = StickyAssignor(b"loser"), StickyAssignor(b"winner")
    c1 = await member(transport, assignor=a1)
    await transport.settle()
    c2 = await member(transport, assignor=a2)
    await transport.settle()
    assert a2.calls == 0 and a1.calls == 2  # the leader (first member) assigns
    assert a1.received[-1] == ([], b"echo:loser:orders")
    assert sorted(a2.received[-1][0]) == [TP("orders", p) for p in range(4)]
    assert a2.received[-1][1] == b"echo:winner:orders"
    assert c1.assignment() == set() and len(c2.assignment()) == 4


async def test_broken_assignor_surfaces_in_getmany(transport: MemoryTransport) -> None:
    class Greedy(StickyAssignor):
        def assign(
            self, partitions_per_topic: Mapping[str, int], members: Sequence[MemberInfo]
        ) -> dict[str, tuple[list[TP], bytes]]:
            return {m.member_id: ([TP("orders", 0)], b"") for m in members}

    c1 = await member(transport, assignor=Greedy(b""))
    await member(transport, assignor=Greedy(b""))
    await transport.settle()
    with pytest.raises(TransportError, match="both"):
        await c1.getmany()


async def test_topic_created_after_subscribe_triggers_rebalance() -> None:
    t = MemoryTransport("memory://late")
    c = await member(t)
    await t.settle()
    assert c.assignment() == set()
    await t.ensure_topics([TopicSpec("orders", 2)])
    await t.settle()
    assert c.assignment() == {TP("orders", 0), TP("orders", 1)}


@pytest.mark.parametrize("phase", ["revoked", "assigned"])
async def test_member_leaving_mid_rebalance_gets_nothing(transport: MemoryTransport, phase: str) -> None:
    """The group is stuck in the first member's callback when the second member stops."""
    release, armed = asyncio.Event(), asyncio.Event()

    class Slow(Listener):
        async def on_partitions_revoked(self, revoked: set[TP]) -> None:
            await super().on_partitions_revoked(revoked)
            if phase == "revoked" and armed.is_set():
                await release.wait()

        async def on_partitions_assigned(self, assigned: set[TP]) -> None:
            await super().on_partitions_assigned(assigned)
            if phase == "assigned" and armed.is_set():
                await release.wait()

    l1 = Slow()
    c1 = await member(transport, listener=l1)
    await transport.settle()
    armed.set()
    l2 = Listener()
    c2 = await member(transport, listener=l2)
    await asyncio.sleep(0.01)
    await c2.stop()
    release.set()
    await transport.settle()
    assert c2.assignment() == set() and not [e for e in l2.events if e[0] == "assigned"]
    everything = {TP("orders", p) for p in range(4)}
    assert c1.assignment() == everything
    if phase == "revoked":  # c2 left before the plan was made, so c1 never gets half
        assert all(tps == everything for kind, tps in l1.events if kind == "assigned")
    with pytest.raises(TransportError, match="not running"):
        await c2.getmany()


# -- injected faults (MemoryFaults): each the way Kafka shows it to a client --------------------


def values(t: MemoryTransport, topic: str, *, committed: bool = False) -> list[bytes | None]:
    return [r.value for r in t.read_topic(topic, committed=committed)]


@pytest.mark.parametrize("kind", ["send_fail", "send_cancel"])
async def test_a_failed_or_cancelled_send_fails_every_later_flush_until_stop(
    transport: MemoryTransport, kind: str
) -> None:
    from agentstream.exceptions import ProducerError

    p = transport.producer()
    await p.start()
    await p.send("orders", b"k", b"before", partition=0)
    await p.flush()
    transport.faults.arm(kind)
    fut = await p.send("orders", b"k", b"lost", partition=0)
    assert fut.done() and (fut.cancelled() if kind == "send_cancel" else isinstance(fut.exception(), ProducerError))
    await p.send("orders", b"k", b"after", partition=0)  # later sends still go out ...
    for _ in range(3):  # ... but no flush passes the lost record, not just the first one
        with pytest.raises(ProducerError, match=r"orders\[0\]"):
            await p.flush()
    assert values(transport, "orders") == [b"before", b"after"]
    assert transport.faults.fired[kind] == 1
    await p.stop()
    p2 = transport.producer()  # a restarted producer starts clean
    await p2.start()
    await p2.flush()


async def test_injected_commit_failure_stores_nothing(transport: MemoryTransport) -> None:
    from agentstream.exceptions import CommitFailed

    c = transport.consumer(group_id="g")
    await c.start()
    transport.faults.arm("commit_fail")
    with pytest.raises(CommitFailed, match="injected"):
        await c.commit({TP("orders", 0): 3})
    assert await c.committed(TP("orders", 0)) is None
    await c.commit({TP("orders", 0): 3})  # transient: the next commit works
    assert await c.committed(TP("orders", 0)) == 3


@pytest.mark.parametrize("kind", ["txn_commit_fail", "txn_abort", "send_fail", "send_cancel"])
async def test_a_failed_transaction_can_only_be_aborted_and_shows_nothing(
    transport: MemoryTransport, kind: str
) -> None:
    from agentstream.exceptions import ProducerError

    p = transport.producer(transactional_id="app-0_0")
    await p.start()
    await p.begin_transaction()
    await p.send("orders", b"k", b"a", partition=0)
    await p.send_offsets_to_transaction({TP("orders", 1): 7}, "g")
    transport.faults.arm(kind)
    if kind.startswith("send"):
        await p.send("orders", b"k", b"b", partition=0)
        with pytest.raises(ProducerError):
            await p.flush()
    with pytest.raises(ProducerError):
        await p.commit_transaction()
    with pytest.raises(ProducerError):  # still not: the transaction can only be aborted now
        await p.commit_transaction()
    with pytest.raises(ProducerError):
        await p.send("orders", b"k", b"c", partition=0)
    await p.abort_transaction()
    assert values(transport, "orders", committed=True) == []
    assert transport.consumer(group_id="g")._group().committed == {}  # type: ignore[union-attr]
    await p.flush()  # the failure went with the aborted transaction
    await p.begin_transaction()
    await p.send("orders", b"k", b"d", partition=0)
    await p.commit_transaction()
    assert values(transport, "orders", committed=True) == [b"d"]


async def test_random_faults_are_seeded_and_validated(transport: MemoryTransport) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        transport.faults.arm("disk_full")
    with pytest.raises(ValueError, match="probability"):
        transport.faults.randomly(1, send_fail=2.0)

    async def run() -> list[bool]:
        transport.faults.randomly(42, send_fail=0.3)
        p = transport.producer()
        await p.start()
        return [(await p.send("orders", None, b"x", partition=0)).exception() is not None for _ in range(50)]

    first, second = await run(), await run()
    assert first == second and 5 < sum(first) < 30
    transport.faults.clear()
    assert not transport.faults.take("send_fail")
