"""``faust.contrib.asgi`` / ``faust.contrib.fastapi`` (faust-streaming 0.15): an app beside an ASGI
application, started and stopped by the ASGI server's lifespan, on that server's loop."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest

import agentstream.faust as faust
from agentstream.exceptions import ConfigError
from agentstream.faust.contrib import asgi
from agentstream.faust.contrib import fastapi as faust_fastapi


def _app(**options: Any) -> Any:
    name = f"asgi-{uuid.uuid4().hex[:8]}"
    return faust.App(name, broker=f"memory://{name}", store="memory://", web_enabled=False, **options)


def _counting_app() -> tuple[Any, Any, Any]:
    app = _app()
    words = app.topic(f"{app.conf.id}-words", value_type=str)
    counts = app.Table("counts", default=int)

    @app.agent(words)
    async def count(stream: Any) -> Any:
        async for event in stream.events():
            counts[event.key] += 1
            yield f"{event.value}:{counts[event.key]}"

    return app, count, counts


def test_a_fastapi_app_runs_the_app_from_its_lifespan() -> None:
    pytest.importorskip("fastapi", reason="the test extra: pip install 'agentstream[test]'")
    pytest.importorskip("httpx", reason="fastapi's TestClient needs httpx")
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    app, count, counts = _counting_app()
    api = FastAPI(lifespan=faust_fastapi.faust_lifespan(app))

    @api.post("/count/{word}")
    async def add(word: str) -> dict[str, Any]:
        return {"reply": await count.ask(key=word, value=word)}  # an agent, asked from a request

    @api.get("/count/{word}")
    async def read(word: str) -> dict[str, Any]:
        return {"count": counts[word]}  # a table, read from a request

    assert app.worker is None
    with TestClient(api) as client:  # the lifespan: startup ... shutdown
        assert app.worker is not None and app.worker.started.is_set()
        assert client.post("/count/hi").json() == {"reply": "hi:1"}
        assert client.post("/count/hi").json() == {"reply": "hi:2"}
        assert client.get("/count/hi").json() == {"count": 2}
        assert client.get("/count/other").json() == {"count": 0}
        worker = app.worker
    assert app.worker is None and worker.state.value == "dead"  # stopped with the ASGI app


async def _lifespan_exchange(asgi_app: Any, during: Any = None) -> list[dict[str, Any]]:
    """Drive an ASGI lifespan as a server does; ``during()`` runs between startup and shutdown."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []
    answered = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        answered.set()

    task = asyncio.ensure_future(asgi_app({"type": "lifespan"}, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    await answered.wait()
    if sent[-1]["type"] == "lifespan.startup.complete" and during is not None:
        await during()
    await inbox.put({"type": "lifespan.shutdown"})
    await asyncio.wait_for(task, 10)
    return sent


async def test_the_middleware_starts_the_app_before_startup_completes_and_stops_it_at_shutdown() -> None:
    app, count, counts = _counting_app()
    seen: list[Any] = []

    async def plain_asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:  # no lifespan of its own
        assert scope["type"] == "http"
        seen.append(await count.ask(key="w", value="w"))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    wrapped = asgi.FaustLifespanMiddleware(plain_asgi, app)

    async def request() -> None:
        assert app.worker is not None and app.worker.started.is_set()
        out: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            out.append(message)

        await wrapped({"type": "http"}, None, send)  # passed through to the wrapped app
        assert out[0]["status"] == 200

    messages = await _lifespan_exchange(wrapped, request)
    assert [m["type"] for m in messages] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert seen == ["w:1"] and app.worker is None


async def test_a_start_that_fails_is_reported_as_lifespan_startup_failed(tmp_path: Any) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    app = _app(data_dir=str(not_a_dir))  # the worker checks it before joining: the start fails
    app.Table("t", default=int)

    async def plain_asgi(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the lifespan scope is the middleware's")

    messages = await _lifespan_exchange(asgi.FaustLifespanMiddleware(plain_asgi, app))
    assert messages[0]["type"] == "lifespan.startup.failed"
    assert "data_dir" in messages[0]["message"] and app.worker is None


async def test_faust_app_running_leaves_a_running_worker_alone() -> None:
    app, count, _ = _counting_app()
    async with asgi.faust_app_running(app) as running:
        worker = app.worker
        async with asgi.faust_app_running(running):  # a second lifespan: the app already runs
            assert app.worker is worker
        assert app.worker is worker and not worker.stopping  # not stopped by the one that did not start it
        assert await count.ask(key="k", value="x") == "x:1"
    assert app.worker is None


async def test_discover_false_with_autodiscover_is_refused() -> None:
    app = _app(autodiscover=["json"])
    with pytest.raises(ConfigError, match="discover=False") as err:
        async with asgi.faust_app_running(app, discover=False):
            pass
    assert err.value.setting == "autodiscover"


def test_an_app_running_on_one_loop_is_refused_on_another() -> None:
    app, _, _ = _counting_app()
    running, release = threading.Event(), threading.Event()

    async def serve_elsewhere() -> None:
        async with asgi.faust_app_running(app):
            running.set()
            await asyncio.get_running_loop().run_in_executor(None, release.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve_elsewhere(),))
    thread.start()
    try:
        assert running.wait(10)

        async def here() -> None:
            with pytest.raises(asgi.LoopMismatch):
                asgi.bind_to_running_loop(app)

        asyncio.run(here())
    finally:
        release.set()
        thread.join(10)

    async def after() -> None:  # stopped there: it may start here
        assert asgi.bind_to_running_loop(app) is asyncio.get_running_loop()

    asyncio.run(after())


def test_opentelemetry_true_without_the_instrumentation_says_what_to_install(caplog: Any) -> None:
    try:
        import opentelemetry.instrumentation.fastapi  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("opentelemetry-instrumentation-fastapi is installed")
    assert asgi.instrument_asgi_app(object(), force=True) is False
    assert "opentelemetry-instrumentation-fastapi" in caplog.text
    caplog.clear()
    assert asgi.instrument_asgi_app(object()) is False  # auto-detection: no SDK configured, nothing said
    assert caplog.text == ""


def _uvicorn() -> None:
    pytest.importorskip("uvicorn", reason="the asgi extra: pip install 'agentstream[asgi]'")


async def _get(url: str) -> tuple[int, str]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_serve_asgi_serves_the_asgi_app_in_place_of_the_web_server() -> None:
    _uvicorn()
    from agentstream.devbroker import free_port

    port = free_port()
    app, count, counts = _counting_app()
    app.settings = app.settings.replace(web_enabled=True, web_port=port, web_host="127.0.0.1")
    lifespan: list[str] = []

    async def api(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # uvicorn runs the ASGI app's own lifespan too
            while (message := await receive())["type"] != "lifespan.shutdown":
                lifespan.append(message["type"])
                await send({"type": "lifespan.startup.complete"})
            lifespan.append(message["type"])
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = f"{counts[scope['path'].strip('/')]}".encode()  # a table, read by the worker's own server
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    service = asgi.serve_asgi(app, api)
    assert app.web_server_service is service and issubclass(service, asgi.AsgiService)
    async with asgi.faust_app_running(app):
        assert await count.ask(key="w", value="w") == "w:1"
        assert await _get(f"http://127.0.0.1:{port}/w") == (200, "1")
        assert (await _get(f"http://127.0.0.1:{port}/status"))[1] == "0"  # not agentstream's server: the ASGI app
        assert app.worker is not None and app.worker.assignor.host == f"127.0.0.1:{port}"
    assert lifespan == ["lifespan.startup", "lifespan.shutdown"]
    import aiohttp

    with pytest.raises(aiohttp.ClientConnectionError):  # stopped with the worker
        await _get(f"http://127.0.0.1:{port}/w")


async def test_serve_asgi_obeys_web_enabled_and_a_busy_port_fails_the_start() -> None:
    _uvicorn()
    import socket

    async def api(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not served")

    app, _, _ = _counting_app()  # web_enabled=False: no server at all
    asgi.serve_asgi(app, api)
    async with asgi.faust_app_running(app):
        assert app.worker is not None and app.worker.servers == []

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        app, _, _ = _counting_app()
        app.settings = app.settings.replace(web_enabled=True, web_port=busy.getsockname()[1], web_host="127.0.0.1")
        asgi.serve_asgi(app, api, lifespan="off")
        with pytest.raises(ConfigError) as err:
            async with asgi.faust_app_running(app):
                pass
        assert err.value.setting == "web_port" and app.worker is None
    finally:
        busy.close()


def test_one_web_server_per_app() -> None:
    app = _app()
    first = asgi.serve_asgi(app, object())
    assert app.web_server(first) is first  # the same one again: fine
    with pytest.raises(ConfigError, match="already has a web server"):
        asgi.serve_asgi(app, object())
