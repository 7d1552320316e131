"""Faust's switches for the web server's endpoints (``web_tables_enabled``, ``web_router_enabled``,
``web_stats_enabled``), ``web_application_options``, and the ones refused (``web_metrics_enabled``,
``web_graph_enabled``, another ``web`` driver)."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.settings import Settings
from agentstream.testing import AppHarness


def make_app(**settings: Any) -> agentstream.App:
    app = agentstream.App(f"sw-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, **settings)
    app.Table("counts", default=int)
    app.topic("src")

    @app.page("/echo")
    async def echo(web_: Any, request: web.Request) -> web.Response:
        return web.json_response({"size": len(await request.read())})

    return app


async def statuses(base: str, paths: list[str], method: str = "GET", **kwargs: Any) -> dict[str, int]:
    out = {}
    async with aiohttp.ClientSession() as s:
        for path in paths:
            async with s.request(method, base + path, **kwargs) as r:
                out[path] = r.status
    return out


PATHS = ["/tables", "/tables/counts", "/table/", "/metadata", "/status", "/status.json", "/metrics", "/livez"]


async def test_every_endpoint_is_served_by_default() -> None:
    async with AppHarness(make_app()) as h:
        assert set((await statuses(f"http://127.0.0.1:{h.web.port}", PATHS)).values()) == {200}


@pytest.mark.parametrize(
    ("setting", "gone"),
    [
        ("web_tables_enabled", ["/tables", "/tables/counts", "/table/"]),
        ("web_router_enabled", ["/metadata"]),
        ("web_stats_enabled", ["/status", "/status.json"]),
    ],
)
async def test_a_disabled_endpoint_group_is_not_served(setting: str, gone: list[str]) -> None:
    async with AppHarness(make_app(**{setting: False})) as h:
        base = f"http://127.0.0.1:{h.web.port}"
        got = await statuses(base, PATHS)
        assert {p for p, status in got.items() if status == 404} == set(gone)
        assert {status for p, status in got.items() if p not in gone} == {200}
        async with aiohttp.ClientSession() as s, s.get(base + "/") as r:
            listed = " ".join((await r.json())["endpoints"])
        assert not any(p in listed.split() for p in gone)


async def test_web_application_options_reach_aiohttp_inside_the_guard() -> None:
    @web.middleware
    async def tag(request: web.Request, handler: Any) -> web.StreamResponse:
        response = await handler(request)
        response.headers["X-App-Middleware"] = "yes"
        return response

    app = make_app(web_token="tok", web_application_options={"client_max_size": 1000, "middlewares": [tag]})
    async with AppHarness(app) as h:
        base = f"http://127.0.0.1:{h.web.port}"
        auth = {"Authorization": "Bearer tok"}
        async with aiohttp.ClientSession(headers=auth) as s:
            async with s.post(base + "/echo", data=b"x" * 900) as r:
                assert r.status == 200 and (await r.json())["size"] == 900
                assert r.headers["X-App-Middleware"] == "yes"
            async with s.post(base + "/echo", data=b"x" * 2000) as r:
                assert r.status == 413  # the app's client_max_size, not the default 1 MiB
        async with aiohttp.ClientSession() as s, s.get(base + "/status") as r:
            assert r.status == 401  # the app's middleware runs inside the token check


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("web_graph_enabled", "yes"),
        ("web", "custom://"),
        ("web_application_options", ["client_max_size"]),
    ],
)
def test_refused_web_settings_name_themselves(setting: str, value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        agentstream.App("sw", broker="memory://", **{setting: value})
    assert info.value.setting == setting


def test_fausts_defaults_for_the_refused_ones_are_accepted() -> None:
    s = agentstream.App("sw", broker="memory://", web_metrics_enabled=False, web_graph_enabled=False, web="aiohttp://")
    assert (s.conf.web_metrics_enabled, s.conf.web_graph_enabled) == (False, False)


def test_the_switches_come_from_fausts_variables() -> None:
    env = {"APP_WEB_TABLES_ENABLED": "false", "APP_WEB_ROUTER_ENABLED": "0", "APP_WEB_STATS_ENABLED": "no"}
    s = Settings.build("x", {}, environ=env)
    assert (s.web_tables_enabled, s.web_router_enabled, s.web_stats_enabled) == (False, False, False)
    s = Settings.build("x", {}, environ={"APP_WEB_METRICS_ENABLED": "true", "APP_WEB_GRAPH_ENABLED": "1"})
    assert (s.web_metrics_enabled, s.web_graph_enabled) == (True, True)  # Faust's /performance/ and /graph/
