"""Dead letters on the real broker (issue 42): KIP-1034's headers read back by a plain aiokafka
consumer, then ``agentstream -A app dead-letters`` lists them and ``dead-letters replay`` sends
the chosen ones back, which the fixed agent handles once each."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

import agentstream
from agentstream.cli import main
from agentstream.devbroker import DevBroker
from agentstream.worker.worker import Worker

pytestmark = pytest.mark.asyncio


def _app(name: str, broker: DevBroker, tmp_path: Path) -> agentstream.App:
    return agentstream.App(
        name,
        broker=broker.url,
        store="memory://",
        data_dir=tmp_path,
        topic_partitions=1,
        commit_interval=0.2,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        web_enabled=False,
        on_agent_error="dead-letter",
    )


async def _read(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None
    )
    await consumer.start()
    out: list[Any] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while len(out) < n and asyncio.get_running_loop().time() < deadline:
            for messages in (await consumer.getmany(timeout_ms=300)).values():
                out += messages
    finally:
        await consumer.stop()
    return out


async def test_dead_letter_headers_read_by_aiokafka_then_listed_and_replayed_once(
    broker: DevBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"dl-{uuid.uuid4().hex[:6]}"
    app = _app(name, broker, tmp_path)
    src = app.topic(f"{name}-src", value_type=int)
    bug = {"on": True}
    handled: list[int] = []

    @app.agent(src)
    async def picky(stream: agentstream.Stream) -> None:
        async for value in stream:
            if bug["on"] and value % 2:
                raise ValueError(f"odd {value}")
            handled.append(value)

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    worker = Worker(app)
    await producer.start()
    try:
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 60)
        for i in range(4):
            await producer.send(src.name, str(i).encode(), key=f"k{i}".encode(), headers=[("trace", f"t{i}".encode())])
        await producer.flush()
        dead = await _read(broker.bootstrap, f"{name}-dead-letters", 2)
        assert [(m.key, m.value) for m in dead] == [(b"k1", b"1"), (b"k3", b"3")]  # the bytes as sent
        headers = dict(dead[0].headers)
        assert headers["trace"] == b"t1"
        assert headers["__streams.errors.exception"] == b"builtins.ValueError"
        assert headers["__streams.errors.message"] == b"odd 1"
        assert b"ValueError: odd 1" in headers["__streams.errors.stacktrace"]
        assert headers["__streams.errors.topic"] == src.name.encode()
        assert (headers["__streams.errors.partition"], headers["__streams.errors.offset"]) == (b"0", b"1")

        # the CLI, as an operator runs it: an App of its own (its own clients), in its own event loop
        cli_app = _app(name, broker, tmp_path)
        cli_app.topic(src.name, value_type=int)
        assert await asyncio.to_thread(main, ["dead-letters", "--json"], cli_app) == 0
        listed = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(d["offset"], d["source"], d["message"]) for d in listed] == [
            (0, f"{src.name}[0]@1", "odd 1"),
            (1, f"{src.name}[0]@3", "odd 3"),
        ]
        assert handled == [0, 2]
        bug["on"] = False  # the fix is deployed
        assert await asyncio.to_thread(main, ["dead-letters", "replay", "--all", "--yes"], cli_app) == 0
        assert "replayed 2 dead letter(s)" in capsys.readouterr().out
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(handled) < 4 and loop.time() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # a duplicate would show up by now
        replayed = (await _read(broker.bootstrap, src.name, 6))[4:]
    finally:
        await worker.stop()
        await producer.stop()
    assert handled == [0, 2, 1, 3]  # each fixed record once
    assert [dict(m.headers) for m in replayed] == [{"trace": b"t1"}, {"trace": b"t3"}]  # error headers gone


async def test_a_record_too_large_to_send_goes_where_the_production_handler_says(
    broker: DevBroker, tmp_path: Path
) -> None:
    name = f"dlp-{uuid.uuid4().hex[:6]}"
    seen: list[str] = []

    def handler(ctx: Any) -> str:
        seen.append(f"{type(ctx.exception).__name__} {ctx.sink_topic} {ctx.source}")
        return "dead-letter"

    app = agentstream.App(
        name,
        broker=broker.url,
        store="memory://",
        data_dir=tmp_path,
        topic_partitions=1,
        commit_interval=0.2,
        session_timeout=6.0,
        heartbeat_interval=0.5,
        rebalance_timeout=6.0,
        web_enabled=False,
        producer_max_request_size=20_000,
        production_exception_handler=handler,
    )
    src = app.topic(f"{name}-src", value_type=int)
    out = app.topic(f"{name}-out", value_type=str)

    @app.agent(src)
    async def blow_up(stream: agentstream.Stream) -> None:
        async for value in stream:
            await out.send(value="x" * (30_000 if value == 1 else 10))

    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    worker = Worker(app)
    await producer.start()
    try:
        await worker.start()
        await asyncio.wait_for(worker.assigned.wait(), 60)
        for i in range(3):
            await producer.send(src.name, str(i).encode(), key=b"k")
        await producer.flush()
        dead = await _read(broker.bootstrap, f"{name}-dead-letters", 1)
        sent = await _read(broker.bootstrap, out.name, 2)
    finally:
        await worker.stop()
        await producer.stop()
    assert seen == [f"RecordRejected {out.name} {src.name}[0]@1"]
    assert [(m.key, m.value) for m in dead] == [(b"k", b"1")]
    assert dict(dead[0].headers)["__streams.errors.exception"] == b"agentstream.exceptions.RecordRejected"
    assert len(sent) == 2
