"""The worker's published status snapshot (``await worker.status()``), and that the web layer shows
what the worker publishes and nothing else."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import aiohttp
import pytest

import agentstream
from agentstream.testing import AppHarness
from agentstream.transport.base import TP
from agentstream.worker.status import (
    AssignmentStatus,
    ErrorCounts,
    PartitionStatus,
    RestoreStatus,
    TablePartitionStatus,
    TableStatus,
    TaskStatus,
    WorkerStatus,
)
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio


def counting_app(app_id: str, broker: str, **settings: Any) -> agentstream.App:
    # max_warmup_replicas=0: a worker that joins takes its partitions at once (the tests are about the move)
    app = agentstream.App(
        app_id, broker=broker, topic_partitions=2, store="memory://", max_warmup_replicas=0, **settings
    )
    ticks = app.topic("ticks", key_type=str, value_type=int)
    totals = app.Table("totals", default=int)

    @app.agent(ticks)
    async def tally(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            totals[event.key] += event.value

    return app


async def test_a_snapshot_is_immutable_and_tells_positions_tables_and_totals() -> None:
    app = counting_app(f"st-{uuid.uuid4().hex[:6]}", "memory://")
    async with AppHarness(app, web_enabled=False) as h:
        for i in range(10):
            await h.send("ticks", 1, key=f"k{i % 3}", partition=i % 2)
        await h.wait_idle()
        st = await h.worker.status()
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.commits = 0  # type: ignore[misc]
    assert st.state == "running" and st.running and st.ready and st.crashed is None
    assert dict(st.agents)["tally"] == 10
    assert sum(t.processed for t in st.tasks) == 10
    assert {tp for t in st.tasks for tp in t.partitions} == {TP("ticks", 0), TP("ticks", 1)}
    for p in st.partitions:  # everything handled and committed: positions at the end, no lag
        assert p.highwater is not None and p.position == p.highwater == p.committed and p.lag == 0
    (table,) = st.tables
    assert table.name == "totals" and table.local_keys == 3
    assert [(p.partition, p.state, p.ready) for p in table.parts] == [(0, "active", True), (1, "active", True)]
    assert st.restore.ready_pct == 100.0 and st.restore.not_ready == ()


async def test_agent_totals_survive_a_rebalance() -> None:
    """Tasks are rebuilt at every rebalance; the worker keeps what the discarded ones handled."""
    broker, app_id = f"memory://reb-{uuid.uuid4().hex[:8]}", f"reb-{uuid.uuid4().hex[:6]}"
    app_a = counting_app(app_id, broker, commit_interval=0.05, web_enabled=False)
    wa = Worker(app_a)
    await wa.start()
    wb: Worker | None = None
    try:
        await asyncio.wait_for(wa.assigned.wait(), 30)
        producer = app_a.transport.producer()
        await producer.start()
        for p in (0, 1):
            for _ in range(5):
                await producer.send("ticks", b"k", b"1", partition=p)
        await producer.flush()
        for _ in range(500):
            if dict((await wa.status()).agents)["tally"] == 10:
                break
            await asyncio.sleep(0.02)
        assert dict((await wa.status()).agents)["tally"] == 10
        generation = (await wa.status()).assignment.generation
        wb = Worker(counting_app(app_id, broker, commit_interval=0.05, web_enabled=False))
        await wb.start()
        await app_a.transport.settle()
        for _ in range(500):
            st = await wa.status()
            if st.assignment.generation > generation and st.running:
                break
            await asyncio.sleep(0.02)
        assert st.assignment.generation > generation and len(st.assignment.active) == 1
        assert dict(st.agents)["tally"] == 10  # not reset with the tasks
        assert sum(t.processed for t in st.tasks) == 0  # the new tasks start from zero
        await producer.stop()
    finally:
        if wb is not None:
            await wb.stop()
        await wa.stop()


def _published() -> WorkerStatus:
    tp = TP("ticks", 1)
    return WorkerStatus(
        app="published",
        state="running",
        started=True,
        running=True,
        crashed=None,
        commits=41,
        seconds_since_commit=0.5,
        assignment=AssignmentStatus(7, (1,), (0,), True, ((0, "elsewhere:1"), (1, "here:2"))),
        agents=(("tally", 1234),),
        tasks=(TaskStatus("0_1", "tally", 34, (tp,)),),
        partitions=(PartitionStatus(tp, 500, 480, 470),),
        tables=(
            TableStatus(
                "totals",
                2,
                "x-totals-changelog",
                False,
                (
                    TablePartitionStatus(0, "standby", False, False, 3, 11),
                    TablePartitionStatus(1, "restoring", True, False, 9, 22),
                ),
            ),
        ),
        restore=RestoreStatus(True, 99, 1, 0, ("totals[1]",)),
        errors=ErrorCounts(5, 6, 7),
    )


async def test_the_web_shows_what_the_worker_publishes() -> None:
    """/status, /metrics, /readyz and /metadata render the snapshot: whatever the worker's internals
    hold, these pages show the published numbers."""
    app = counting_app(f"pub-{uuid.uuid4().hex[:6]}", "memory://", web_port=0)
    async with AppHarness(app) as h:
        published = _published()

        async def status(*, lag: bool = True, keys: bool = True) -> WorkerStatus:
            return published if lag else dataclasses.replace(published, partitions=())

        h.worker.status = status
        base = h.web.url
        async with aiohttp.ClientSession() as s:
            async with s.get(base + "/status.json") as r:
                body = await r.json()
            async with s.get(base + "/metrics") as r:
                metrics = await r.text()
            async with s.get(base + "/readyz") as r:
                ready_status, ready = r.status, await r.json()
            async with s.get(base + "/metadata") as r:
                metadata = await r.json()
    assert body["worker"]["commits"] == 41 and body["worker"]["state"] == "running"
    assert body["agents"] == {"tally": {"processed": 1234, "records_per_s": body["agents"]["tally"]["records_per_s"]}}
    assert body["lag"] == {"ticks[1]": {"highwater": 500, "position": 480, "lag": 20}}
    assert body["tables"]["totals"]["local_keys"] == 22 and body["restore"]["not_ready"] == ["totals[1]"]
    assert body["errors"] == {"decode": 5, "agent": 6, "dead_lettered": 7}
    assert body["assignment"]["owners"] == {"0": "elsewhere:1", "1": "here:2"}
    assert 'agentstream_records_processed_total{agent="tally"} 1234' in metrics
    assert 'agentstream_consumer_lag{topic="ticks",partition="1"} 20' in metrics
    assert 'agentstream_table_keys{table="totals",partition="0",role="standby"} 11' in metrics
    assert "agentstream_commits_total 41" in metrics
    assert ready_status == 503 and ready["restoring"] == ["totals[1]"]
    assert metadata["generation"] == 7 and metadata["leader"] is True and metadata["active"] == [1]
    assert metadata["workers"] == {"elsewhere:1": [0], "here:2": [1]}


async def test_a_server_is_attached_before_the_worker_starts_only() -> None:
    app = counting_app(f"late-{uuid.uuid4().hex[:6]}", "memory://")
    async with AppHarness(app, web_enabled=False) as h:
        with pytest.raises(RuntimeError, match="before starting"):
            h.worker.serve(object())  # a running worker's group already knows its address
