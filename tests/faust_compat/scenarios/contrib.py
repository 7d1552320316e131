"""faust-streaming 0.15's ``faust.contrib``: the app run by an ASGI server's lifespan
(``faust.contrib.fastapi`` / ``asgi``), and its web driver registry. The ASGI application is a plain callable (no FastAPI needed), driven as a server does."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import faust

from .. import kit
from ..registry import scenario

# the short group timeouts the compat workers get on the test broker (tansu holds a first join for the
# rebalance timeout, and Faust's app start waits for its assignment); agentstream honours them too
GROUP = {"broker_session_timeout": 6, "broker_heartbeat_interval": 1, "broker_rebalance_timeout": 6}


@asynccontextmanager
async def _datadir() -> AsyncIterator[str]:
    """A started app writes its data dir (Faust's ``{name}-data`` in the working directory): a temporary one."""
    path = tempfile.mkdtemp(prefix="compat-asgi-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def _request(asgi_app: Any, path: str) -> list[Any]:
    """One HTTP request through ``asgi_app``: ``[status, body]``."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asgi_app({"type": "http", "method": "POST", "path": path, "headers": []}, receive, send)
    return [sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:]).decode()]


@scenario(
    "faust.contrib.fastapi: faust_lifespan starts the app for the ASGI app; a request sends; app.web_server's "
    "service starts and stops with the app",
    broker=True,
    timeout=15,
)
async def asgi_lifespan_runs_the_app() -> Any:

    name = f"compat-asgi-{kit.FRAMEWORK}-{uuid.uuid4().hex[:6]}"
    async with _datadir() as datadir:
        return await _lifespan_sends(name, datadir)


async def _lifespan_sends(name: str, datadir: str) -> Any:
    from faust.contrib.fastapi import faust_lifespan

    app = faust.App(name, broker=os.environ["COMPAT_BROKER"], datadir=datadir, **GROUP)
    topic = app.topic(name, value_type=str)

    async def api(scope: Any, receive: Any, send: Any) -> None:  # what a framework's route would do
        await topic.send(key="k", value=scope["path"])
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"sent"})

    seen: list[str] = []

    @app.web_server  # in place of the built-in web server (one app start serves both checks)
    class Web(faust.Service):
        async def on_start(self) -> None:
            seen.append("web server started")

        async def on_stop(self) -> None:
            seen.append("web server stopped")

    lifespan = faust_lifespan(app, opentelemetry=False)
    async with lifespan(api) as state:
        response = await _request(api, "/greet")
        for _ in range(500):  # Faust starts it once the tables are recovered
            if seen:
                break
            await asyncio.sleep(0.01)
        seen.append("running")
    return {"state": state, "response": response, "records": await kit.read_broker_topic(name), "web_server": seen}


@scenario(
    "faust.contrib.asgi: FaustLifespanMiddleware answers the lifespan, passes HTTP through", broker=True, timeout=15
)
async def asgi_middleware_lifespan() -> Any:

    name = f"compat-asgimw-{kit.FRAMEWORK}-{uuid.uuid4().hex[:6]}"
    async with _datadir() as datadir:
        return await _middleware_sends(name, datadir)


async def _middleware_sends(name: str, datadir: str) -> Any:
    from faust.contrib.asgi import FaustLifespanMiddleware

    app = faust.App(name, broker=os.environ["COMPAT_BROKER"], web_enabled=False, datadir=datadir, **GROUP)
    topic = app.topic(name, value_type=str)

    async def plain(scope: Any, receive: Any, send: Any) -> None:
        await topic.send(key="k", value="via middleware")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    wrapped = FaustLifespanMiddleware(plain, app)
    inbox = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    answers: list[str] = []
    responses: list[Any] = []

    async def receive() -> dict[str, Any]:
        if answers:  # started: one request while the app runs, then the server shuts down
            responses.append(await _request(wrapped, "/"))
        return inbox.pop(0)

    async def send(message: dict[str, Any]) -> None:
        answers.append(message["type"])

    await wrapped({"type": "lifespan"}, receive, send)
    return {"lifespan": answers, "responses": responses, "records": await kit.read_broker_topic(name)}


@scenario("faust.contrib.asgi: a lifespan message out of order fails the startup, naming both")
async def asgi_middleware_bad_message() -> Any:
    from faust.contrib.asgi import FaustLifespanMiddleware

    app = faust.App("compat-asgibad", broker="kafka://localhost:9092")
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "lifespan.shutdown"}  # before any startup: the app is not started

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def plain(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the lifespan is the middleware's")

    await FaustLifespanMiddleware(plain, app)({"type": "lifespan"}, receive, send)
    (failed,) = sent
    return [failed["type"], "'lifespan.startup'" in failed["message"], "'lifespan.shutdown'" in failed["message"]]


@scenario("faust.web.drivers: the web setting's scheme names the driver; aiohttp is the only one")
async def web_drivers_by_url() -> Any:
    from faust.web import drivers

    found = [drivers.by_url(url).__name__ for url in ("aiohttp://", "aiohttp://localhost")]
    try:
        drivers.by_url("uvicorn://")
    except ModuleNotFoundError as exc:
        missing = "Available choices: aiohttp" in str(exc)
    return {"found": found, "same": drivers.by_name("aiohttp") is drivers.by_url("aiohttp:"), "refused": missing}
