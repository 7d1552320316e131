"""Session windows on the dev broker: a worker counts Kafka Streams' session example into RocksDB,
stops; a new worker on an empty data dir restores the sessions and stream time from the changelog
topic and carries on (issue 42)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.devbroker import DevBroker
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio

T0 = 1_700_000_000.0
M = 60.0


def make_app(broker: DevBroker, app_id: str, data_dir: Path) -> tuple[Any, Any]:
    app = agentstream.App(
        app_id,
        broker=broker.url,
        store="rocksdb://",
        data_dir=data_dir,
        topic_partitions=2,
        commit_interval=0.1,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        max_warmup_replicas=0,
        web_enabled=False,
    )
    topic = app.topic(f"{app_id}-clicks", key_type=str, value_type=dict)
    visits = app.Table("visits", default=int, key_type=str).session(5 * M, grace=10 * M)

    @app.agent(topic)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            visits[event.key] += 1

    return app, visits


async def send(app: Any, records: list[tuple[str, float]]) -> None:
    topic = next(t for t in app.topics.values() if t.name.endswith("-clicks"))
    deliveries = [await topic.send(key=key, value={}, timestamp=T0 + minute * M) for key, minute in records]
    await asyncio.gather(*deliveries)


async def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_sessions_restore_from_the_changelog_after_a_restart(broker: DevBroker, tmp_path: Path) -> None:
    app_id = f"sessions-{uuid.uuid4().hex[:6]}"
    app, visits = make_app(broker, app_id, tmp_path / "w1")
    worker = Worker(app)
    await worker.start()
    try:
        await asyncio.wait_for(worker.assigned.wait(), 30)
        await send(app, [("green", 0), ("green", 6), ("blue", 2), ("green", 4)])
        want = {("green", (T0, T0 + 6 * M)): 3, ("blue", (T0 + 2 * M, T0 + 2 * M)): 1}
        await wait_for(lambda: visits.as_dict() == want)
        await worker.commit()
    finally:
        await worker.stop()

    app2, visits2 = make_app(broker, app_id, tmp_path / "w2")  # an empty data dir: all from the changelog
    worker2 = Worker(app2)
    await worker2.start()
    try:
        await asyncio.wait_for(worker2.assigned.wait(), 30)
        await wait_for(lambda: visits2.as_dict() == want)
        await send(app2, [("blue", 5), ("blue", 11), ("green", -20)])  # the last is late: 6 + 5 + 10 < 11
        after = {
            ("green", (T0, T0 + 6 * M)): 3,
            ("blue", (T0 + 2 * M, T0 + 5 * M)): 2,
            ("blue", (T0 + 11 * M, T0 + 11 * M)): 1,
        }
        await wait_for(lambda: visits2.as_dict() == after and visits2.late_dropped == 1)
    finally:
        await worker2.stop()
