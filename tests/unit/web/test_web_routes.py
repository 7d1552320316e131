"""``@app.table_route`` / ``@app.topic_route``: a declaration on the handler, acted on by the web
server; a worker that does not own the key's partition forwards the request to the owner through
the same forwarder (and header) as the table endpoints."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream.exceptions import TopologyError
from agentstream.routes import route_of
from agentstream.tables import query
from agentstream.testing import AppHarness
from agentstream.web import View

from .test_web import hand_partition_to

pytestmark = pytest.mark.asyncio

FORWARDED = "X-Agentstream-Forwarded-By"


class AnyOwner:
    """A fake owner worker answering every method with text, recording what it got."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, bytes, dict[str, str]]] = []
        self.runner: web.AppRunner | None = None
        self.address = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, str(request.rel_url), await request.read(), dict(request.headers)))
        return web.Response(text="owner says hi", status=201)

    async def __aenter__(self) -> AnyOwner:
        application = web.Application()
        application.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(application)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.address = f"127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def build() -> tuple[agentstream.App, Any, list[str]]:
    app = agentstream.App(f"routes-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=4, store="memory://")
    counts = app.Table("counts", default=int)
    words = app.topic("words", key_type=str, value_type=int)
    ran: list[str] = []

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            counts[event.key] += event.value

    @app.page("/count/{word}")
    @app.table_route(table=counts, match_info="word")
    async def get_count(web_: Any, request: web.Request, word: str) -> Any:
        ran.append(f"get {word}")
        return {"word": word, "count": counts[word]}

    @app.table_route(table=counts, query_param="word")  # above @app.page: the mark is on the function
    @app.page("/by-query")
    async def by_query(web_: Any, request: web.Request) -> Any:
        ran.append("query")
        return {"word": request.query["word"]}

    @app.page("/set/{word}")
    class Set(View):
        @app.table_route(table=counts, match_info="word")
        async def post(self, request: web.Request, word: str) -> Any:
            ran.append(f"post {word}")
            counts[word] = int(await request.text())
            return {"set": word}

    return app, counts, ran


@pytest.fixture
async def routed() -> AsyncIterator[tuple[AppHarness, Any, list[str]]]:
    app, counts, ran = build()
    async with AppHarness(app) as h:
        yield h, counts, ran


def partition_of(table: Any, key: str) -> int:
    return query.key_partition(table, query.encode_key(table, key))


async def test_the_decorator_is_a_declaration_that_returns_the_handler() -> None:
    app = agentstream.App(f"decl-{uuid.uuid4().hex[:6]}", broker="memory://")
    table = app.Table("t")

    async def handler(web_: Any, request: Any) -> Any:
        return None

    assert app.table_route(table=table, match_info="k")(handler) is handler
    route = route_of(handler)
    assert route is not None and route.source is table and route.match_info == "k"
    with pytest.raises(TopologyError, match="match_info="):
        app.table_route(table=table)


async def test_a_key_owned_here_runs_here(routed: tuple[AppHarness, Any, list[str]]) -> None:
    h, counts, ran = routed
    await h.send("words", 3, key="apple")
    await h.wait_idle()
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{h.web.url}/count/apple") as r:
            assert r.status == 200 and await r.json() == {"word": "apple", "count": 3}
        async with s.get(f"{h.web.url}/by-query", params={"word": "apple"}) as r:
            assert r.status == 200
        async with s.get(f"{h.web.url}/by-query") as r:
            assert r.status == 400 and "word" in (await r.json())["error"]
    assert ran == ["get apple", "query"]


async def test_a_key_owned_elsewhere_is_forwarded_with_method_body_and_the_one_header(
    routed: tuple[AppHarness, Any, list[str]],
) -> None:
    h, counts, ran = routed
    p = partition_of(counts, "pear")
    async with AnyOwner() as owner:
        hand_partition_to(h, p, owner.address)
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{h.web.url}/set/pear?x=1", data=b"7", headers={"Content-Type": "text/plain"}) as r:
                assert r.status == 201 and await r.text() == "owner says hi"
                assert r.headers["X-Agentstream-Served-By"] == owner.address
                assert r.headers["Content-Type"].startswith("text/plain")
            async with s.get(f"{h.web.url}/count/pear") as r:
                assert r.status == 201
        (method, path, body, headers), (method2, path2, _, headers2) = owner.requests
        assert (method, path, body) == ("POST", "/set/pear?x=1", b"7")
        assert (method2, path2) == ("GET", "/count/pear")
        assert headers[FORWARDED] == headers2[FORWARDED] == h.web.address  # the table endpoints' header
        assert ran == []  # never run on the worker that does not own the key

        # a request forwarded to us (ownership is moving) is never forwarded twice, nor answered
        # from a partition this worker does not own (it would give the default): retry later
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{h.web.url}/count/pear", headers={FORWARDED: "127.0.0.1:1"}) as r:
                assert r.status == 503 and r.headers["Retry-After"] == "1"
        assert ran == [] and len(owner.requests) == 2


async def test_an_owner_address_that_is_not_host_port_is_never_fetched(
    routed: tuple[AppHarness, Any, list[str]],
) -> None:
    h, counts, ran = routed
    p = partition_of(counts, "plum")
    async with AnyOwner() as owner:
        hand_partition_to(h, p, owner.address + "/steal?x=")  # group metadata is another member's word
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{h.web.url}/count/plum") as r:
                assert r.status == 503 and r.headers["Retry-After"] == "1"
        assert owner.requests == [] and ran == []


async def test_an_unreachable_owner_is_a_503_naming_it(routed: tuple[AppHarness, Any, list[str]]) -> None:
    h, counts, _ = routed
    p = partition_of(counts, "fig")
    hand_partition_to(h, p, "127.0.0.1:1")
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{h.web.url}/count/fig") as r:
            body = await r.json()
            assert r.status == 503 and "not reachable" in body["error"] and body["owner"] == "127.0.0.1:1"
