"""A two-stage agent (a filter, a ``group_by``, then the body) on the dev broker (issue 40, item 8).

The agent's first instance is started before the worker joins the group and runs its preamble
once; the stage before the ``group_by`` runs only the filter (a closure over a local of that
preamble) and forwards to the repartition topic; the body after it handles every record that
passed, re-keyed, once. The preamble runs once per instance (``concurrency=2``: twice), as in
Faust, never for discovery nor for the forwarding stage."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

import agentstream
from agentstream.devbroker import DevBroker
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio

RECORDS = 40


async def test_a_two_stage_agent_runs_its_preamble_once_per_instance_and_handles_every_record(
    broker: DevBroker, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    app = agentstream.App(
        f"first-{suffix}",
        broker=broker.url,
        store="memory://",
        data_dir=tmp_path,
        topic_partitions=4,
        commit_interval=0.2,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        web_enabled=False,
    )
    src = app.topic(f"src-{suffix}", value_type=dict)
    out = app.topic(f"out-{suffix}", key_type=str, value_type=dict)
    preambles: list[str] = []

    @app.agent(src, concurrency=2)
    async def by_user(stream: agentstream.Stream) -> None:
        preambles.append("ran")  # e.g. opening a connection
        keep_from = 5  # a local the forwarding stage's filter reads
        async for user, value in (
            stream.filter(lambda v: v["n"] >= keep_from).group_by(lambda v: v["user"], name="by_user").items()
        ):
            await out.send(key=user, value={"n": value["n"], "user": value["user"]})

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    worker = Worker(app)
    await producer.start()
    try:
        await app.transport.ensure_topics([src.spec(), out.spec()])
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 60)
        for n in range(RECORDS):  # spread over every partition by their own keys
            await producer.send(src.name, orjson.dumps({"n": n, "user": f"u{n % 3}"}), key=str(n).encode())
        await producer.flush()
        got = await _read(broker.bootstrap, out.name, RECORDS - 5, timeout=60)
    finally:
        await worker.stop()
        await producer.stop()
    assert sorted(v["n"] for _, v in got) == list(range(5, RECORDS))  # each record that passed, once
    assert all(k == v["user"].encode() for k, v in got)  # re-keyed by the group_by
    assert len(preambles) == 2  # once per instance: none for discovery, none in the forwarding stage


async def _read(bootstrap: str, topic: str, n: int, timeout: float) -> list[tuple[bytes, dict[str, object]]]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None
    )
    await consumer.start()
    out: list[tuple[bytes, dict[str, object]]] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(out) < n and loop.time() < deadline:
            for messages in (await consumer.getmany(timeout_ms=300)).values():
                out += [(m.key, orjson.loads(m.value)) for m in messages]
        await asyncio.sleep(0.5)  # nothing more comes (no record twice)
        for messages in (await consumer.getmany(timeout_ms=300)).values():
            out += [(m.key, orjson.loads(m.value)) for m in messages]
    finally:
        await consumer.stop()
    return out
