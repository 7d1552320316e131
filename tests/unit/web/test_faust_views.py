"""Faust's view API (issue 40 item 9): raised web errors, HEAD/OPTIONS, the helpers' keyword arguments
and the web cache, over real HTTP against an AppHarness worker. Side by side with faust-streaming:
the ``web_views`` worker scenario (tests/faust_compat/worker_app.py)."""

from __future__ import annotations

import importlib.util
import uuid
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream import cache as cache_module
from agentstream.cache import MemoryCacheBackend, backend_for
from agentstream.exceptions import ConfigError
from agentstream.faust.web import exceptions as faust_exceptions
from agentstream.testing import AppHarness
from agentstream.web import Blueprint, View
from agentstream.web.cache import Cache


async def call(h: AppHarness, method: str, path: str) -> tuple[int, Any, Any]:
    async with aiohttp.ClientSession() as s:
        async with s.request(method, h.web.url + path, allow_redirects=False) as r:
            raw = await r.read()
            body: Any = raw.decode() if r.content_type != "application/json" or not raw else await r.json()
            return r.status, body, r.headers


def _app() -> tuple[agentstream.App, list[str]]:
    app = agentstream.App(f"views-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    src = app.topic("src", value_type=int)
    calls: list[str] = []

    @app.agent(src)
    async def noop(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    @app.page("/thing/{name}")
    class Thing(View):
        async def get(self, request: web.Request, name: str) -> web.Response:
            if name == "missing":
                raise self.NotFound("no such thing", thing=name)
            if name == "bad":
                raise self.ValidationError()
            if name == "denied":
                raise faust_exceptions.PermissionDenied(code=451)
            return self.json({"name": name}, status=201, reason="Made", headers={"X-Thing": name})

        async def options(self, request: web.Request, name: str) -> web.Response:
            return self.text("GET, OPTIONS", content_type="text/csv", headers={"Allow": "GET, OPTIONS"})

    @app.page("/helpers/{kind}")
    async def helpers(view: View, request: web.Request, kind: str) -> Any:
        if kind == "error":
            return view.error(418, "a teapot", brewing=True)
        if kind == "old-error":
            return view.error(409, "taken", "pick another name")  # agentstream's older (status, error, hint)
        return view.notfound()

    blueprint = Blueprint("bp")
    page_cache = blueprint.cache(timeout=60.0)

    @blueprint.route("/counted", name="counted")
    class Counted(View):
        @page_cache.view()
        async def get(self, request: web.Request) -> Any:
            calls.append(request.query.get("q", ""))
            if request.query.get("q") == "fail":
                return self.error(500, "not cached")
            return {"calls": len(calls)}

    blueprint.register(app, url_prefix="/bp")
    return app, calls


async def test_raised_web_errors_head_options_and_helper_keywords() -> None:
    app, _ = _app()
    async with AppHarness(app) as h:
        assert (await call(h, "GET", "/thing/missing"))[:2] == (404, {"error": "no such thing", "thing": "missing"})
        assert (await call(h, "GET", "/thing/bad"))[:2] == (400, {"error": "Invalid input."})
        status, body, _ = await call(h, "GET", "/thing/denied")
        assert (status, body) == (451, {"error": "You do not have permission to perform this action."})
        status, body, headers = await call(h, "GET", "/thing/ok")
        assert (status, body, headers["X-Thing"]) == (201, {"name": "ok"}, "ok")
        status, body, headers = await call(h, "HEAD", "/thing/ok")  # get's answer without its body
        assert (status, body, headers["X-Thing"]) == (201, "", "ok")
        status, body, headers = await call(h, "OPTIONS", "/thing/ok")
        assert (status, body, headers["Content-Type"]) == (200, "GET, OPTIONS", "text/csv; charset=utf-8")
        assert (await call(h, "GET", "/helpers/error"))[:2] == (418, {"error": "a teapot", "brewing": True})
        assert (await call(h, "GET", "/helpers/old-error"))[:2] == (
            409,
            {"error": "taken", "hint": "pick another name"},
        )
        assert (await call(h, "GET", "/helpers/nf"))[:2] == (404, {"error": "Not Found"})
        assert h.worker.crashed is None


async def test_cache_view_answers_from_the_cache_per_url_and_keeps_only_200s() -> None:
    app, calls = _app()
    async with AppHarness(app) as h:
        first = await call(h, "GET", "/bp/counted")
        again = await call(h, "GET", "/bp/counted")
        assert first[:2] == again[:2] == (200, {"calls": 1}) and calls == [""]
        assert (await call(h, "GET", "/bp/counted?q=x"))[:2] == (200, {"calls": 2})  # another URL: its own entry
        assert (await call(h, "GET", "/bp/counted?q=fail"))[0] == 500
        assert (await call(h, "GET", "/bp/counted?q=fail"))[0] == 500
        assert calls == ["", "x", "fail", "fail"]  # a 500 is not kept
        assert isinstance(app.cache, MemoryCacheBackend) and len(app.cache) == 2


async def test_memory_backend_expires_entries_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(cache_module.time, "monotonic", lambda: now[0])
    backend = MemoryCacheBackend(max_entries=2)
    await backend.set("a", b"1", timeout=10)
    await backend.set("b", b"2")
    assert await backend.get("a") == b"1"
    now[0] += 10
    assert await backend.get("a") is None and await backend.get("b") == b"2"  # expired; no timeout: kept
    for key in ("c", "d", "e"):
        await backend.set(key, key.encode())
    assert len(backend) == 2 and await backend.get("c") is None and await backend.get("e") == b"e"


def test_cache_backends_by_url() -> None:
    assert isinstance(backend_for("memory://"), MemoryCacheBackend)
    assert isinstance(Cache(backend="memory://").backend, MemoryCacheBackend)
    with pytest.raises(ConfigError, match="unknown cache backend 'memcached://x'"):
        backend_for("memcached://x")


@pytest.mark.skipif(importlib.util.find_spec("redis") is not None, reason="the redis package is installed")
def test_redis_without_the_redis_package_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"'redis://localhost:6379/0' needs the redis package.*pip install redis"):
        backend_for("redis://localhost:6379/0")
    with pytest.raises(ConfigError, match="pip install redis"):
        Blueprint("x").cache(backend="redis://localhost")
