"""``@app.table_route`` across two workers when the app's keys are JSON (issue 40 item 5).

Faust's app ``key_serializer='json'``: its streams put a key in ``murmur2(JSON bytes)``'s partition,
its table writes the key in the partition of the record being handled, and its ``table_route``
routes by the key as the table serializes it (JSON: Faust's default for tables), so the page runs
where the count is. agentstream in Faust's format used to place every table key by its raw bytes
whatever the app's key serializer: the key's home was another partition than the stream's, and
with two workers the page ran on the worker that does not hold the count and answered 0.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream.routes import route_of
from agentstream.tables import query
from agentstream.transport.partitioner import default_partition
from agentstream.web import serve
from agentstream.web.routing import route_partition
from agentstream.worker.worker import Worker

PARTITIONS = 8
WORDS = ["pear", "apple", "kiwi", "plum", "fig", "lime"]  # JSON and raw partitions differ for most


def build(app_id: str, broker: str) -> tuple[agentstream.App, Any, Any, Any]:
    app = agentstream.App(
        app_id,
        broker=broker,
        store="memory://",
        topic_partitions=PARTITIONS,
        topic_naming="faust",
        key_serializer="json",
        commit_interval=0.05,
        max_warmup_replicas=0,  # the second worker takes its partitions at once
        table_standby_replicas=0,  # a key is read from its owner only
        web_port=0,
    )
    counts = app.Table("counts", default=int)
    words = app.topic("words", key_type=str, value_type=str)

    @app.agent(words)
    async def count(stream: Any) -> None:
        async for word in stream:
            counts[word] += 1

    @app.page("/count/{word}/")
    @app.table_route(table=counts, match_info="word")
    async def get_count(view: Any, request: web.Request, word: str) -> Any:
        return view.json({word: counts[word]})

    return app, counts, words, get_count


def test_a_json_keyed_faust_table_routes_a_url_key_to_the_streams_partition() -> None:
    """The partition the page is routed to is the one the stream (and so the table) writes the key to."""
    app, counts, words, page = build(f"route-json-{uuid.uuid4().hex[:6]}", "memory://")
    route = route_of(page)
    assert route is not None
    moved = 0
    for word in WORDS:
        stream_partition = query.key_partition(counts, query.encode_key(counts, word))
        written_by_stream = default_partition(words.key_codec.dumps(word), PARTITIONS)
        assert route_partition(route, word) == written_by_stream == stream_partition, word
        moved += written_by_stream != default_partition(word.encode(), PARTITIONS)
    assert moved  # the words tell JSON from raw partitioning apart


@pytest.fixture
async def two_workers() -> AsyncIterator[list[tuple[Worker, Any]]]:
    app_id, broker = f"route2-{uuid.uuid4().hex[:6]}", f"memory://route2-{uuid.uuid4().hex[:6]}"
    started: list[tuple[Worker, Any]] = []
    try:
        for _ in range(2):
            app, *_ = build(app_id, broker)
            worker = Worker(app)
            server = serve(worker)
            await worker.start()
            await asyncio.wait_for(worker.assigned.wait(), 20)  # joined before the next one joins
            started.append((worker, server))
        await started[0][0].app.transport.settle()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not all(len(s.assignment().active) == PARTITIONS // 2 for _, s in started):
            assert loop.time() < deadline, [s.assignment().active for _, s in started]
            await asyncio.sleep(0.02)
        yield started
    finally:
        for worker, _ in reversed(started):
            await worker.stop()


async def get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, await r.json()


@pytest.mark.asyncio
async def test_the_page_answers_the_stored_count_from_either_worker(two_workers: list[tuple[Worker, Any]]) -> None:
    (w1, s1), (w2, _) = two_workers
    producer = w1.app.transport.producer()
    await producer.start()
    for word in WORDS:
        for _ in range(len(word)):  # a count per word that cannot be the default
            await producer.send("words", orjson_str(word), orjson_str(word))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    expected = {w: len(w) for w in WORDS}
    got: dict[str, Any] = {}
    while got != expected:
        assert loop.time() < deadline, got
        await asyncio.sleep(0.05)
        for word in WORDS:
            for _, server in two_workers:
                status, body = await get(f"{server.url}/count/{word}/")
                got[word] = body.get(word) if status == 200 else (status, body)
                if got[word] != expected[word]:
                    break
    assert got == expected


def orjson_str(word: str) -> bytes:
    """What Faust's json serializer sends for a str key or value."""
    return f'"{word}"'.encode()
