"""Two workers of one app: a table lookup sent to the worker that does not own the key is forwarded
to the address the owner advertised (its ``web_host`` / ``canonical_url``), not to where it listens."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import agentstream
from agentstream.transport.partitioner import default_partition
from agentstream.web import serve
from agentstream.worker.worker import Worker

KEYS = [f"k{i}" for i in range(8)]


def build(broker: str, app_id: str, **web: Any) -> agentstream.App:
    app = agentstream.App(
        app_id,
        broker=broker,
        store="memory://",
        topic_partitions=2,
        commit_interval=0.05,
        web_port=0,
        max_warmup_replicas=0,  # the second worker takes its partition at once: the tests are about the lookup
        **web,
    )
    counts = app.Table("counts", default=int)

    @app.agent(app.topic("words", key_type=str, value_type=str))
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1

    return app


async def lookup(port: int, key: str, **headers: str) -> tuple[int, Any, Any]:
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"http://127.0.0.1:{port}/tables/counts/{key}", headers=headers) as r,
    ):
        return r.status, await r.json(), r.headers


@pytest.fixture
async def pair(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Worker, Worker, str]]:
    """(owner-side worker a started with the given web settings, worker b, a key a owns)."""
    broker, app_id = f"memory://peers-{uuid.uuid4().hex[:8]}", f"peers-{uuid.uuid4().hex[:6]}"
    own = dict(request.param)
    both = own.pop("both", {})  # settings of both workers (e.g. the app's web_token)
    wa, wb = Worker(build(broker, app_id, **own, **both)), Worker(build(broker, app_id, **both))
    serve(wa), serve(wb)
    await wa.start()
    await asyncio.wait_for(wa.assigned.wait(), 30)
    wa.assigned.clear()
    await wb.start()
    try:
        await wa.app.transport.settle()
        await asyncio.wait_for(wa.assigned.wait(), 30)
        await asyncio.wait_for(wb.assigned.wait(), 30)
        producer = wa.app.transport.producer()
        await producer.start()
        for key in KEYS:
            await producer.send(
                "words", key.encode(), b'"' + key.encode() + b'"', partition=default_partition(key.encode(), 2)
            )
        await producer.flush()
        await producer.stop()
        owned = [k for k in KEYS if default_partition(k.encode(), 2) in wa.assignment.active]
        assert owned and len(owned) < len(KEYS)  # both workers own a partition
        yield wa, wb, owned[0]
    finally:
        await wb.stop()
        await wa.stop()


@pytest.mark.parametrize("pair", [{"web_bind": "127.0.0.1", "web_host": "localhost"}], indirect=True)
async def test_a_lookup_is_forwarded_to_the_owners_web_host(pair: tuple[Worker, Worker, str]) -> None:
    wa, wb, key = pair
    a_port = wa.servers[0].port  # type: ignore[attr-defined]
    b_port = wb.servers[0].port  # type: ignore[attr-defined]
    for _ in range(200):  # the owner has counted it
        status, body, headers = await lookup(b_port, key)
        if status == 200:
            break
        await asyncio.sleep(0.02)
    assert status == 200 and body["value"] == 1
    assert headers["X-Agentstream-Served-By"] == f"localhost:{a_port}"  # reached by the name it advertised


@pytest.mark.parametrize("pair", [{"canonical_url": "http://127.0.0.1:1"}], indirect=True)
async def test_a_lookup_goes_to_the_owners_canonical_url(pair: tuple[Worker, Worker, str]) -> None:
    """The owner advertises a URL where nothing listens: the other worker tries exactly there."""
    wa, wb, key = pair
    b_port = wb.servers[0].port  # type: ignore[attr-defined]
    status, body, _ = await lookup(b_port, key)
    assert status == 503 and body["owner"] == "127.0.0.1:1"


@pytest.mark.parametrize("pair", [{"both": {"web_token": "s3cret"}}], indirect=True)
async def test_with_a_web_token_a_forwarded_lookup_is_answered_on_the_signature(
    pair: tuple[Worker, Worker, str],
) -> None:
    """Issue 45 finding 4: the forwarder sends the owner a signature, not the token; the owner accepts it."""
    wa, wb, key = pair
    a_port = wa.servers[0].port  # type: ignore[attr-defined]
    b_port = wb.servers[0].port  # type: ignore[attr-defined]
    escaped = "".join(f"%{b:02X}" for b in key.encode())  # the path as the client escaped it
    for _ in range(200):  # the owner has counted it
        status, body, headers = await lookup(b_port, escaped, Authorization="Bearer s3cret")
        if status == 200:
            break
        await asyncio.sleep(0.02)
    assert status == 200 and body["value"] == 1, body
    assert headers["X-Agentstream-Served-By"] == f"127.0.0.1:{a_port}"
    status, _, _ = await lookup(b_port, key)  # the client itself still needs the token
    assert status == 401
