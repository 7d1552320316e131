"""``web_cors_options``: CORS headers for the origins the app names (aiohttp-cors' semantics, as
Faust's web server applies them), on every endpoint; preflights are answered before the bearer
token check (browsers send none with them)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.faust.web import ResourceOptions
from agentstream.testing import AppHarness

ALLOWED = "https://dashboard.example.com"
TOKEN = "s3cret-token"


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = agentstream.App(
        f"cors-{uuid.uuid4().hex[:6]}",
        broker="memory://",
        topic_partitions=1,
        web_token=TOKEN,
        web_cors_options={
            ALLOWED: ResourceOptions(
                allow_credentials=True,
                expose_headers=["X-Agentstream-Served-By"],
                allow_headers=["Authorization"],
                max_age=600,
                allow_methods=["GET"],
            ),
            "https://public.example.com": {"allow_methods": "*", "allow_headers": "*", "expose_headers": "*"},
        },
    )
    app.topic("src")
    async with AppHarness(app) as h:
        yield f"http://127.0.0.1:{h.web.port}"


async def request(method: str, url: str, **headers: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.request(method, url, headers=headers) as r:
        await r.read()
        return r.status, r.headers


async def test_a_preflight_from_an_allowed_origin_is_answered_without_the_token(server: str) -> None:
    status, h = await request(
        "OPTIONS",
        f"{server}/tables",
        Origin=ALLOWED,
        **{"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"},
    )
    assert status == 200
    assert h["Access-Control-Allow-Origin"] == ALLOWED
    assert h["Access-Control-Allow-Methods"] == "GET"
    assert h["Access-Control-Allow-Headers"] == "AUTHORIZATION"
    assert h["Access-Control-Allow-Credentials"] == "true"
    assert h["Access-Control-Max-Age"] == "600"


@pytest.mark.parametrize(
    ("origin", "method", "headers"),
    [
        ("https://evil.example.com", "GET", ""),  # not a configured origin
        (ALLOWED, "DELETE", ""),  # a method the origin may not use
        (ALLOWED, "GET", "x-custom"),  # a header the origin may not send
    ],
)
async def test_a_preflight_outside_the_options_is_refused(server: str, origin: str, method: str, headers: str) -> None:
    extra = {"Access-Control-Request-Headers": headers} if headers else {}
    status, h = await request(
        "OPTIONS", f"{server}/tables", Origin=origin, **{"Access-Control-Request-Method": method}, **extra
    )
    assert status == 403
    assert "Access-Control-Allow-Origin" not in h


async def test_answers_to_an_allowed_origin_carry_the_cors_headers(server: str) -> None:
    status, h = await request("GET", f"{server}/tables", Origin=ALLOWED, Authorization=f"Bearer {TOKEN}")
    assert status == 200
    assert h["Access-Control-Allow-Origin"] == ALLOWED
    assert h["Access-Control-Allow-Credentials"] == "true"
    assert h["Access-Control-Expose-Headers"] == "X-AGENTSTREAM-SERVED-BY"
    assert "Origin" in h.getall("Vary")
    # an error answer too, so the page can read why (the token is still required)
    status, h = await request("GET", f"{server}/tables", Origin=ALLOWED)
    assert status == 401 and h["Access-Control-Allow-Origin"] == ALLOWED


async def test_other_origins_and_plain_requests_get_no_cors_headers(server: str) -> None:
    auth = f"Bearer {TOKEN}"
    status, h = await request("GET", f"{server}/tables", Origin="https://evil.example.com", Authorization=auth)
    assert status == 200 and "Access-Control-Allow-Origin" not in h
    status, h = await request("GET", f"{server}/tables", Authorization=auth)
    assert status == 200 and "Access-Control-Allow-Origin" not in h


async def test_options_given_as_a_dict_with_stars(server: str) -> None:
    origin = "https://public.example.com"
    status, h = await request(
        "OPTIONS",
        f"{server}/status",
        Origin=origin,
        **{"Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-anything"},
    )
    assert status == 200 and h["Access-Control-Allow-Methods"] == "PUT"
    assert "Access-Control-Allow-Credentials" not in h
    status, h = await request("GET", f"{server}/livez", Origin=origin)
    exposed = h["Access-Control-Expose-Headers"].split(",")  # "*": every header of the answer but the simple ones
    assert status == 200 and "X-CONTENT-TYPE-OPTIONS" in exposed and "CONTENT-TYPE" not in exposed


@pytest.mark.parametrize(
    "options",
    [
        ["https://a.example"],  # not a mapping
        {"a.example": ResourceOptions()},  # an origin without a scheme
        {"https://a.example": object()},  # not ResourceOptions
        {"https://a.example": {"allow_origins": "*"}},  # an unknown option
        {"https://a.example": ResourceOptions(allow_methods="GET")},  # a string that is not "*"
        {"https://a.example": ResourceOptions(max_age=-1)},
    ],
)
def test_cors_options_that_cannot_apply_are_refused(options: Any) -> None:
    with pytest.raises(ConfigError) as info:
        agentstream.App("cors", broker="memory://", web_cors_options=options)
    assert info.value.setting == "web_cors_options"


@pytest.mark.parametrize("options", [ResourceOptions(allow_credentials=True), {"allow_credentials": True}])
def test_any_origin_with_credentials_is_refused(options: Any) -> None:
    """Issue 45 finding 9: '*' with credentials reflected every origin with
    Access-Control-Allow-Credentials, so any web page could read answers with its visitors' cookies."""
    with pytest.raises(ConfigError) as info:
        agentstream.App("cors", broker="memory://", web_cors_options={"*": options})
    assert info.value.setting == "web_cors_options" and "any web page" in str(info.value)
    app = agentstream.App("cors", broker="memory://")
    with pytest.raises(ConfigError):
        app.page("/p", cors_options={"*": options})
    agentstream.App("cors", broker="memory://", web_cors_options={"*": ResourceOptions(allow_methods="*")})
    agentstream.App("cors", broker="memory://", web_cors_options={ALLOWED: options})  # a named origin may


async def test_a_pages_own_cors_options_override_the_apps_origin_by_origin() -> None:
    from aiohttp import web

    from agentstream.web import Blueprint

    app = agentstream.App(
        f"pcors-{uuid.uuid4().hex[:6]}",
        broker="memory://",
        topic_partitions=1,
        web_cors_options={ALLOWED: ResourceOptions(allow_methods=["GET"])},
    )
    app.topic("src")

    @app.page("/api", cors_options={"https://page.example": ResourceOptions(allow_methods="*")})
    async def api(web_: Any, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    bp = Blueprint("bp")

    @bp.route("/thing", cors_options={ALLOWED: {"allow_methods": ["PUT"]}})
    async def thing(web_: Any, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    bp.register(app, url_prefix="/bp")

    def preflight(origin: str, method: str = "POST") -> dict[str, str]:
        return {"Origin": origin, "Access-Control-Request-Method": method}

    async with AppHarness(app) as h:
        base = f"http://127.0.0.1:{h.web.port}"
        assert (await request("OPTIONS", f"{base}/api", **preflight("https://page.example")))[0] == 200
        assert (await request("OPTIONS", f"{base}/status", **preflight("https://page.example")))[0] == 403
        assert (await request("OPTIONS", f"{base}/api", **preflight(ALLOWED, "GET")))[0] == 200  # the app's too
        assert (await request("OPTIONS", f"{base}/bp/thing", **preflight(ALLOWED, "PUT")))[0] == 200
        assert (await request("OPTIONS", f"{base}/tables", **preflight(ALLOWED, "PUT")))[0] == 403
        status, headers = await request("GET", f"{base}/api", Origin="https://page.example")
        assert status == 200 and headers["Access-Control-Allow-Origin"] == "https://page.example"


def test_a_pages_bad_cors_options_are_refused_naming_the_page() -> None:
    app = agentstream.App("pcors", broker="memory://")
    with pytest.raises(ConfigError, match="cors_options") as info:
        app.page("/x", cors_options={"no-scheme": ResourceOptions()})
    assert "/x" in info.value.setting
