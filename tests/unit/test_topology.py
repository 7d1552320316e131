"""The topology on its own: sub-topologies from the agents' declarations, their source and sink
topics, and the partition-count checks that refuse a topology before a worker joins the group."""

from __future__ import annotations

import uuid

import pytest

import agentstream
from agentstream.exceptions import TopologyError
from agentstream.topology import Topology, adopt_partition_counts
from agentstream.transport.base import TopicSpec
from agentstream.transport.memory import MemoryTransport


def new_app(**settings: object) -> agentstream.App:
    return agentstream.App(
        f"topo{uuid.uuid4().hex[:6]}",
        broker=f"memory://topo-{uuid.uuid4().hex[:6]}",
        store="memory://",
        web_enabled=False,
        **settings,
    )


async def topology_of(app: agentstream.App) -> Topology:
    await app.discover()
    topology = app.topology()
    assert isinstance(topology, Topology)
    return topology


async def test_an_agent_over_one_topic_is_one_subtopology_without_sinks() -> None:
    app = new_app()

    @app.agent(app.topic("orders"))
    async def count(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    topology = await topology_of(app)
    [st] = topology.subtopologies
    assert (st.id, st.agent, st.stage) == (0, count, 0)
    assert st.source_topics == ["orders"] and st.sink_topics == []
    assert topology.source_topics == ["orders"]
    assert topology.by_topic == {"orders": [st]}
    assert topology.describe() == "sub-topology 0: orders -> agent count (stage 0)"


async def test_the_topics_of_one_agent_are_inputs_of_one_subtopology() -> None:
    """Co-partitioned inputs meet in one task (partition p of each)."""
    app = new_app()

    @app.agent([app.topic("clicks"), app.topic("views")])
    async def merge(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    [st] = (await topology_of(app)).subtopologies
    assert st.source_topics == ["clicks", "views"]


async def test_group_by_splits_the_agent_at_its_repartition_topic() -> None:
    app = new_app(topic_partitions=3)

    @app.agent(app.topic("orders"))
    async def by_user(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(lambda v: v["user"], name="user"):
            pass

    topology = await topology_of(app)
    first, second = topology.subtopologies
    repartition = f"{app.id}-user-repartition"
    assert (first.stage, first.source_topics, first.sink_topics) == (0, ["orders"], [repartition])
    assert (second.stage, second.source_topics, second.sink_topics) == (1, [repartition], [])
    assert first.agent is second.agent is by_user
    assert (first.id, second.id) == (0, 1)
    topic = app.topics[repartition]
    assert topic.internal and topic.partitions == 3  # the source's count unless group_by says otherwise
    assert topology.source_topics == sorted(["orders", repartition])


async def test_group_by_partitions_sets_the_repartition_topic_count() -> None:
    app = new_app(topic_partitions=3)

    @app.agent(app.topic("orders"))
    async def by_user(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(lambda v: v["user"], name="user", partitions=8):
            pass

    await topology_of(app)
    assert app.topics[f"{app.id}-user-repartition"].partitions == 8


async def test_each_split_point_starts_a_subtopology_and_sinks_end_the_last() -> None:
    app = new_app()
    out = app.topic("out")

    @app.agent(app.topic("orders"), sink=[out])
    async def pipeline(stream: agentstream.Stream):  # type: ignore[no-untyped-def]
        async for value in stream.group_by(lambda v: v["user"], name="user").through("enriched"):
            yield value

    stages = (await topology_of(app)).subtopologies
    repartition = f"{app.id}-user-repartition"
    assert [(st.stage, st.source_topics, st.sink_topics) for st in stages] == [
        (0, ["orders"], [repartition]),
        (1, [repartition], ["enriched"]),
        (2, ["enriched"], ["out"]),
    ]


async def test_agents_sharing_a_topic_get_a_subtopology_each() -> None:
    app = new_app()
    orders = app.topic("orders")

    @app.agent(orders)
    async def one(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    @app.agent([orders, app.topic("refunds")])
    async def two(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    topology = await topology_of(app)
    a, b = topology.subtopologies
    assert (a.id, a.agent, b.id, b.agent) == (0, one, 1, two)
    assert topology.by_topic["orders"] == [a, b]
    assert topology.by_topic["refunds"] == [b]
    assert topology.source_topics == ["orders", "refunds"]


# -- partition counts ------------------------------------------------------------------------------


async def test_inputs_of_one_subtopology_with_different_partition_counts_are_refused_with_the_fix() -> None:
    app = new_app()

    @app.agent([app.topic("clicks"), app.topic("views")])
    async def merge(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    topology = await topology_of(app)
    topology.check_copartitioning({"clicks": 4, "views": 4})  # equal: fine
    with pytest.raises(TopologyError) as info:
        topology.check_copartitioning({"clicks": 4, "views": 6})
    message = str(info.value)
    assert "'merge'" in message and "clicks has 4, views has 6" in message
    assert "Fix: give the topics the same partition count" in message and "group_by()" in message


async def test_different_counts_in_different_subtopologies_are_fine() -> None:
    app = new_app()

    @app.agent(app.topic("clicks"))
    async def one(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    @app.agent(app.topic("views"))
    async def two(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    (await topology_of(app)).check_copartitioning({"clicks": 4, "views": 6})


async def test_an_existing_source_topic_keeps_its_partition_count() -> None:
    app = new_app(topic_partitions=4)
    orders = app.topic("orders")

    @app.agent(orders)
    async def count(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    await transport.ensure_topics([TopicSpec("orders", 3)])
    await adopt_partition_counts(app, transport)
    assert orders.partitions == 3


async def test_an_existing_source_topic_not_copartitioned_with_the_tables_is_refused_naming_the_settings() -> None:
    app = new_app(topic_partitions=4)
    app.Table("totals", default=int)

    @app.agent(app.topic("orders"))
    async def count(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    transport = app.transport
    await transport.ensure_topics([TopicSpec("orders", 3)])
    with pytest.raises(TopologyError) as info:
        await adopt_partition_counts(app, transport)
    message = str(info.value)
    assert "'orders' exists with 3 partitions" in message and "'totals'" in message and "have 4" in message
    assert "Fix:" in message and "partitions=3" in message and "topic_partitions=3" in message


class Ride(agentstream.Record):
    vendor: str


async def test_a_table_written_after_group_by_is_copartitioned_with_the_repartition_topic_not_the_source() -> None:
    """Issue 44: a 2-partition source, group_by into a table of 4: the table is written from the
    repartition topic (the source's declared count, 4), so the source's count does not matter."""
    app = new_app(topic_partitions=4)
    fares = app.Table("fares", default=int)
    rides = app.topic("rides", value_type=Ride)

    @app.agent(rides)
    async def ride(stream: agentstream.Stream) -> None:
        async for r in stream.group_by(Ride.vendor):
            fares[r.vendor] += 1

    transport = app.transport
    await transport.ensure_topics([TopicSpec("rides", 2)])
    await app.discover()
    await adopt_partition_counts(app, transport)
    topology = app.topology()
    assert rides.partitions == 2
    repartition = app.topics[topology.subtopologies[1].source_topics[0]]
    assert repartition.internal and repartition.partitions == 4


async def test_an_existing_unpinned_repartition_topic_keeps_its_count_and_is_checked_against_the_tables() -> None:
    app = new_app(topic_partitions=4)
    app.Table("fares", default=int)

    @app.agent(app.topic("rides", value_type=Ride))
    async def ride(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(Ride.vendor, name="by_vendor"):
            pass

    transport = app.transport
    await transport.ensure_topics([TopicSpec(f"{app.id}-by_vendor-repartition", 2)])
    await app.discover()
    with pytest.raises(TopologyError) as info:
        await adopt_partition_counts(app, transport)
    message = str(info.value)
    assert f"repartition topic '{app.id}-by_vendor-repartition' exists with 2 partitions" in message
    assert "agent 'ride'" in message and "group_by(..., partitions=4)" in message


async def test_a_topic_read_before_and_after_a_split_point_is_checked_where_an_agent_body_reads_it() -> None:
    """One agent repartitions the topic (fine), another reads it in its body (refused)."""
    app = new_app(topic_partitions=4)
    app.Table("fares", default=int)
    rides = app.topic("rides", value_type=Ride)

    @app.agent(rides)
    async def ride(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(Ride.vendor):
            pass

    @app.agent(rides)
    async def audit(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    transport = app.transport
    await transport.ensure_topics([TopicSpec("rides", 2)])
    await app.discover()
    with pytest.raises(TopologyError, match="agent 'audit' reads the topic"):
        await adopt_partition_counts(app, transport)


@pytest.mark.parametrize("kind", ["GlobalTable", "SetGlobalTable"])
async def test_global_tables_do_not_ask_an_existing_source_topic_for_their_partition_count(kind: str) -> None:
    """Every worker holds all of a global table: it is not co-partitioned with anything."""
    app = new_app(topic_partitions=4)
    getattr(app, kind)("config")
    orders = app.topic("orders")

    @app.agent(orders)
    async def count(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    transport = app.transport
    await transport.ensure_topics([TopicSpec("orders", 3)])
    await adopt_partition_counts(app, transport)
    assert orders.partitions == 3


# -- discovery ---------------------------------------------------------------------------------------


async def test_group_by_a_callable_without_a_name_is_refused_at_discovery() -> None:
    app = new_app()

    @app.agent(app.topic("orders"))
    async def by_user(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(lambda v: v["user"]):
            pass

    with pytest.raises(TopologyError, match=r"group_by\(fn, name="):
        await app.discover()


async def test_an_agent_raising_in_its_preamble_does_not_fail_discovery() -> None:
    """Its error is the agent's (handled by the error policy when its task adopts the first
    instance: tests/unit/test_first_instance.py); discovery keeps the split points made before."""
    app = new_app(agent_restart_max=2)  # each run raises: two restarts, then the task's policy goes on

    @app.agent(app.topic("orders"))
    async def broken(stream: agentstream.Stream) -> None:
        stream = stream.group_by(lambda v: v, name="before")
        raise KeyError("config missing")

    await app.discover()
    assert [p.name for p in broken.splits] == ["before"]


async def test_discovery_restarts_a_failing_preamble_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker joins the group only after discovery: a preamble that keeps raising is restarted
    there only while the backoff fits DISCOVERY_RESTARTS_FOR (with the default backoff, 10 restarts
    took ~100 s); the task that adopts the last failed run goes on from its count."""
    from agentstream import topology

    monkeypatch.setattr(topology, "DISCOVERY_RESTARTS_FOR", 0.35)  # the 0.1 s and 0.2 s waits fit, 0.4 s not
    app = new_app(agent_restart_max=50, agent_restart_backoff=0.1)

    @app.agent(app.topic("orders"))
    async def broken(stream: agentstream.Stream) -> None:
        raise KeyError("config missing")

    first = await topology.discover_splits(app, broken)
    try:
        assert first.failed() is not None
        assert 1 <= first.restarts <= 3, first.restarts  # not agent_restart_max's 50
    finally:
        await first.close()
