"""Faust's ``concurrency=N``: N instances of the agent share the worker's partitions, so at most N
records are in the agent's hands at once (verified with faust-streaming 0.15.3: an agent with
concurrency=2 over a 4-partition topic peaks at 2 records in flight; concurrency=1 at 1)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

import agentstream
from agentstream.exceptions import TopologyError
from agentstream.testing import AppHarness
from agentstream.transport.base import TP


class InFlight:
    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.seen: list[Any] = []

    async def handle(self, value: Any) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        for _ in range(3):  # hand the loop to the other instances while this record is in hand
            await asyncio.sleep(0)
        await asyncio.sleep(0.001)
        self.now -= 1
        self.seen.append(value)


def make_app(**agent_args: Any) -> tuple[agentstream.App, InFlight]:
    app = agentstream.App(f"conc-{uuid.uuid4().hex[:6]}", topic_partitions=4, store="memory://", web_enabled=False)
    topic = app.topic("jobs", value_type=int)
    probe = InFlight()

    @app.agent(topic, **agent_args)
    async def work(stream: agentstream.Stream) -> None:
        async for value in stream:
            await probe.handle(value)

    return app, probe


async def run(app: agentstream.App, n: int) -> dict[TP, int | None]:
    async with AppHarness(app) as h:
        for i in range(n):
            await h.send("jobs", i, partition=i % 4)
        await h.wait_idle()
        consumer = h.worker.consumer
        return {tp: await consumer.committed(tp) for tp in sorted(consumer.assignment())}


@pytest.mark.parametrize("n", [1, 3])
async def test_concurrency_caps_records_in_flight_across_partitions(n: int) -> None:
    app, probe = make_app(concurrency=n)
    committed = await run(app, 40)
    assert probe.peak == n  # N instances shared by 4 partitions: never more than N in hand at once
    assert sorted(probe.seen) == list(range(40))  # every record handled once
    assert committed == {TP("jobs", p): 10 for p in range(4)}  # each offset committed, none past its record


async def test_isolated_partitions_runs_one_instance_per_partition() -> None:
    app, probe = make_app(isolated_partitions=True)
    await run(app, 40)
    assert probe.peak == 4  # one instance per partition, in parallel
    assert sorted(probe.seen) == list(range(40))


def test_isolated_partitions_needs_concurrency_one() -> None:
    app = agentstream.App(f"conc-{uuid.uuid4().hex[:6]}")
    with pytest.raises(TopologyError, match="concurrency=1"):
        app.agent(app.topic("t"), isolated_partitions=True, concurrency=2)


async def test_partitions_take_turns_for_the_slot_and_commits_wait_for_their_record() -> None:
    app = agentstream.App(
        f"conc-{uuid.uuid4().hex[:6]}", topic_partitions=2, store="memory://", web_enabled=False, shutdown_timeout=0.2
    )
    topic = app.topic("jobs", value_type=int)
    release = asyncio.Event()
    started: list[int] = []

    @app.agent(topic, concurrency=1)
    async def work(stream: agentstream.Stream) -> None:
        async for value in stream:
            started.append(value)
            await release.wait()

    h = AppHarness(app)
    await h.__aenter__()
    try:
        await h.send("jobs", 0, partition=0)
        await h.send("jobs", 1, partition=1)
        while not started:
            await asyncio.sleep(0.005)
        for _ in range(50):
            await asyncio.sleep(0)
        await h.worker.commit()
        consumer = h.worker.consumer
        assert len(started) == 1  # the other partition's record waits for the one slot
        assert {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()} == {0: None, 1: None}
        release.set()
        await h.wait_idle()
        assert sorted(started) == [0, 1]
        assert {tp.partition: await consumer.committed(tp) for tp in consumer.assignment()} == {0: 1, 1: 1}
    finally:
        await h.__aexit__(None, None, None)


async def test_stopping_while_a_record_waits_for_a_slot_commits_neither_record() -> None:
    app = agentstream.App(
        f"conc-{uuid.uuid4().hex[:6]}", topic_partitions=2, store="memory://", web_enabled=False, shutdown_timeout=0.2
    )
    topic = app.topic("jobs", value_type=int)
    started: list[int] = []

    @app.agent(topic, concurrency=1)
    async def work(stream: agentstream.Stream) -> None:
        async for value in stream:
            started.append(value)
            await asyncio.Event().wait()  # never finishes: cancelled at shutdown_timeout

    h = AppHarness(app)
    await h.__aenter__()
    try:
        await h.send("jobs", 0, partition=0)
        await h.send("jobs", 1, partition=1)
        while not started:
            await asyncio.sleep(0.005)
        consumer = h.worker.consumer
        tps = sorted(consumer.assignment())
        await h.worker.stop()
        assert len(started) == 1
        assert [await consumer.committed(tp) for tp in tps] == [None, None]
    finally:
        await h.__aexit__(None, None, None)


async def test_concurrency_n_runs_exactly_n_instances_sharing_the_partitions() -> None:
    """Faust's actors: the body runs N times in the worker (not N per partition), each instance
    is fed, and no record is lost or handled twice (issue 40 item 4)."""
    app = agentstream.App(f"conc-{uuid.uuid4().hex[:6]}", topic_partitions=4, store="memory://", web_enabled=False)
    topic = app.topic("jobs", value_type=int)
    instances: list[int] = []
    fed: dict[int, list[int]] = {}
    partitions: list[set[Any]] = []

    @app.agent(topic, concurrency=3)
    async def work(stream: agentstream.Stream) -> None:
        me = len(instances)
        instances.append(me)  # the preamble: per-actor state (a connection, a batch) is made here
        fed[me] = []
        async for value in stream:
            if not fed[me]:  # the partitions are assigned by now (the first instance's preamble ran before)
                partitions.append(stream.active_partitions)
            fed[me].append(value)
            await asyncio.sleep(0.001)  # in hand while the other instances take records

    committed = await run(app, 60)
    assert instances == [0, 1, 2]
    assert partitions == [{TP("jobs", p) for p in range(4)}] * 3  # each instance reads every partition
    assert all(fed[i] for i in instances), fed  # every instance was fed
    assert sorted(v for values in fed.values() for v in values) == list(range(60))
    assert {i % 4 for i in fed[0] + fed[1] + fed[2]} == {0, 1, 2, 3}
    assert committed == {TP("jobs", p): 15 for p in range(4)}


async def test_shared_instances_commit_nothing_past_a_record_still_in_hand() -> None:
    """Two instances over one partition: the second finishes the records after the one the first
    holds, and the commit stops at the held record until it is finished."""
    app = agentstream.App(f"conc-{uuid.uuid4().hex[:6]}", topic_partitions=1, store="memory://", web_enabled=False)
    topic = app.topic("jobs", value_type=int)
    release = asyncio.Event()
    done: list[int] = []

    @app.agent(topic, concurrency=2)
    async def work(stream: agentstream.Stream) -> None:
        async for value in stream:
            if value == 2:
                await release.wait()
            done.append(value)

    h = AppHarness(app)
    await h.__aenter__()
    try:
        for i in range(6):
            await h.send("jobs", i, partition=0)
        for _ in range(500):
            if sorted(done) == [0, 1, 3, 4, 5]:
                break
            await asyncio.sleep(0.005)
        assert sorted(done) == [0, 1, 3, 4, 5]  # handled past the held record, out of order
        await h.worker.commit()
        (tp,) = h.worker.consumer.assignment()
        assert await h.worker.consumer.committed(tp) == 2  # not past offset 2, still in hand
        release.set()
        await h.wait_idle()
        assert await h.worker.consumer.committed(tp) == 6
    finally:
        await h.__aexit__(None, None, None)


async def test_a_shared_instance_retries_a_record_from_its_own_partition() -> None:
    """agent_retries with shared instances: the record is handed out again from its own partition
    (the instance that failed may have been fed by another) and committed once handled."""
    app = agentstream.App(
        f"conc-{uuid.uuid4().hex[:6]}",
        topic_partitions=3,
        store="memory://",
        web_enabled=False,
        agent_retries=2,
        agent_retry_backoff=0.01,
    )
    topic = app.topic("jobs", value_type=int)
    attempts: dict[int, int] = {}

    @app.agent(topic, concurrency=2)
    async def work(stream: agentstream.Stream) -> None:
        async for value in stream:
            attempts[value] = attempts.get(value, 0) + 1
            if value in (4, 8) and attempts[value] == 1:
                raise RuntimeError(f"flaky {value}")

    committed = await run_on(app, 12, 3)
    assert attempts == {v: (2 if v in (4, 8) else 1) for v in range(12)}
    assert committed == {TP("jobs", p): 4 for p in range(3)}


async def run_on(app: agentstream.App, n: int, partitions: int) -> dict[TP, int | None]:
    async with AppHarness(app) as h:
        for i in range(n):
            await h.send("jobs", i, partition=i % partitions)
        await h.wait_idle()
        consumer = h.worker.consumer
        return {tp: await consumer.committed(tp) for tp in sorted(consumer.assignment())}


async def test_idle_shared_instances_sleep_until_a_record_comes_under_virtual_time() -> None:
    """The instances wait for a record (or a lagging input's wait), not on a timer: a day of the
    harness's virtual time passes at once (a polling wait would wake 20 times per virtual second)."""
    app = agentstream.App(f"conc-{uuid.uuid4().hex[:6]}", topic_partitions=4, store="memory://", web_enabled=False)
    seen: list[int] = []

    @app.agent(app.topic("jobs", value_type=int), concurrency=2)
    async def work(stream: agentstream.Stream) -> None:
        async for value in stream:
            seen.append(value)

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("jobs", 1, partition=0)
        await asyncio.wait_for(h.advance(86_400.0), 30)  # a guard: polling would take minutes
        await h.send("jobs", 2, partition=3)
        assert seen == [1, 2]
