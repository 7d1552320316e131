"""Faust's web API: the built-in table views and ``table_route`` answering the owner's value,
``web.Blueprint``, ``takes_model``/``gives_model``. Faust's answers were checked against a
faust-streaming 0.11 worker: ``GET /table/`` -> ``[{"name": "counts", "help": ""}, ...]``,
``/table/counts/`` -> ``{"name": "counts", "help": ""}``, ``/table/nope/`` -> 404
``{"error": "unknown table", "name": "nope"}``, ``/table/counts/a/`` -> ``2``,
``/table/counts/zz/`` -> ``0`` (the default), ``/table`` without the slash -> 404."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream.faust import web as faust_web
from agentstream.tables import query
from agentstream.testing import AppHarness

from ..web.test_web import hand_partition_to

FORWARDED = "X-Agentstream-Forwarded-By"


class Order(agentstream.Record):
    id: str
    amount: float


async def get(url: str, **kwargs: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.get(url, allow_redirects=False, **kwargs) as r:
        return r.status, await r.json() if r.content_type == "application/json" else await r.text()


def build() -> tuple[agentstream.App, Any]:
    app = agentstream.App(f"g3w-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=4, store="memory://")
    counts = app.Table("counts", default=int, help="word counts")
    tags = app.SetTable("tags")
    words = app.topic("words", key_type=str, value_type=str)

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            counts[word] += 1
            tags["k"].add(word)

    @app.page("/count/{word}/")
    @app.table_route(table=counts, match_info="word")
    async def get_count(web_: Any, request: web.Request, word: str) -> Any:
        return web_.json({word: counts[word]})

    return app, counts


@pytest.fixture
async def harness() -> AsyncIterator[tuple[AppHarness, Any]]:
    app, counts = build()
    async with AppHarness(app) as h:
        for word in ["a", "b", "a"]:
            await h.send("words", word, key=word)
        await h.wait_idle()
        yield h, counts


async def test_fausts_table_views_answer_as_faust_does(harness: tuple[AppHarness, Any]) -> None:
    h, _ = harness
    base = h.web.url  # type: ignore[union-attr]
    assert await get(f"{base}/table/") == (
        200,
        [{"name": "counts", "help": "word counts"}, {"name": "tags", "help": ""}],
    )
    assert await get(f"{base}/table/counts/") == (200, {"name": "counts", "help": "word counts"})
    assert await get(f"{base}/table/nope/") == (404, {"error": "unknown table", "name": "nope"})
    assert await get(f"{base}/table/counts/a/") == (200, 2)
    assert await get(f"{base}/table/counts/zz/") == (200, 0)  # the table's default, as Faust's table[key]
    status, members = await get(f"{base}/table/tags/k/")  # Faust 500s here (a set is not JSON)
    assert status == 200 and sorted(members) == ["a", "b"]


class Owner:
    """A stand-in owner worker answering agentstream's native table lookup."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.paths: list[str] = []
        self.runner: web.AppRunner | None = None
        self.address = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.paths.append(str(request.rel_url))
        return web.json_response({"table": "counts", "key": "pear", "value": self.value})

    async def __aenter__(self) -> Owner:
        application = web.Application()
        application.router.add_get("/{tail:.*}", self.handle)
        self.runner = web.AppRunner(application)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.address = f"127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_a_key_owned_elsewhere_answers_the_owners_value_never_the_local_default(
    harness: tuple[AppHarness, Any],
) -> None:
    h, counts = harness
    p = query.key_partition(counts, query.encode_key(counts, "pear"))
    async with Owner(41) as owner:
        hand_partition_to(h, p, owner.address)
        assert await get(f"{h.web.url}/table/counts/pear/") == (200, 41)  # type: ignore[union-attr]
        assert owner.paths and owner.paths[0].startswith("/tables/counts/%22pear%22?partition=")
        # a table_route page asked by a worker that believes we own the key: retry, not our default 0
        status, _ = await get(f"{h.web.url}/count/pear/", headers={FORWARDED: "127.0.0.1:1"})  # type: ignore[union-attr]
        assert status == 503


async def test_a_blueprint_registered_with_a_prefix_serves_takes_model_and_gives_model_views(tmp_path: Any) -> None:
    """Faust: ``takes_model`` passes the body decoded as the model after the request;
    ``gives_model`` answers the returned Record as JSON with its ``__faust`` tag
    (``{"id":"1","amount":2.0,"__faust":{"ns":...}}``)."""
    blueprint = faust_web.Blueprint("orders")
    (tmp_path / "hello.txt").write_text("hi")
    blueprint.static("/static/", tmp_path)

    @blueprint.route("/", name="list")
    class OrderList(faust_web.View):
        async def get(self, request: web.Request) -> Any:
            return self.json(["o1"])

    @blueprint.route("/{order_id}/", name="detail")
    class OrderDetail(faust_web.View):
        @faust_web.gives_model(Order)
        async def get(self, request: web.Request, order_id: str) -> Any:
            return Order(id=order_id, amount=2.0)

        @faust_web.takes_model(Order)
        async def post(self, request: web.Request, order: Order, order_id: str) -> Any:
            return self.json({"got": [order.id, order.amount], "path": order_id})

    app, _ = build()
    blueprint.register(app, url_prefix="/orders/")
    async with AppHarness(app) as h:
        base = f"{h.web.url}/orders"  # type: ignore[union-attr]
        assert await get(f"{base}/") == (200, ["o1"])
        status, body = await get(f"{base}/7/")
        assert status == 200 and {k: v for k, v in body.items() if k != "__faust"} == {"id": "7", "amount": 2.0}
        assert body["__faust"]["ns"].endswith("Order")
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base}/7/", data=b'{"id": "x", "amount": 3}') as r:
                assert r.status == 200 and await r.json() == {"got": ["x", 3.0], "path": "7"}
            async with s.get(f"{base}/static/hello.txt") as r:
                assert r.status == 200 and await r.text() == "hi"
            async with s.get(f"{base}/static/..%2F..%2Fetc%2Fpasswd") as r:
                assert r.status == 404
