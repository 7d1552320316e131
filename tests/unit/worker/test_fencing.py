"""Issue 30: a commit refused because the group moved on (GroupFenced) closes the tasks dirty.

Kafka Streams' TaskMigratedException: once this member's generation is fenced, its partitions may
belong to another member, so it must commit no offset and write no changelog or sink record for
them any more (a zombie's late writes would land after the new owner's), and rejoin.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import agentstream
from agentstream.exceptions import GroupFenced
from agentstream.testing_faults import FailingCall
from agentstream.transport.base import TP
from agentstream.transport.memory import MemoryConsumer, MemoryTransport
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
        await until(worker.assigned.is_set)
        await feed(app, 5)
        await until(lambda: handled[0] == 5)
        assert await worker.commit()
        await feed(app, 2)
        await until(lambda: handled[0] == 7)
        assert worker.consumer is not None
        assignment = set(worker.consumer.assignment())
        with FailingCall(MemoryConsumer, "commit", GroupFenced) as fence:
            await worker.on_partitions_revoked(assignment)
        assert fence.fired
        assert committed(app, tp) == 5
    finally:
        await worker.stop()
    assert committed(app, tp) == 5, "stop committed offsets of a task fenced at revoke"
