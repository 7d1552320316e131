"""``run_worker(agentstream.Worker(app))``: the Faust-style worker and the runner both attach the web
server; the worker must still run exactly one, on the configured port."""

from __future__ import annotations

import asyncio
import socket
import uuid

import aiohttp
import pytest

import agentstream
from agentstream.web import Web, run_worker

pytestmark = pytest.mark.asyncio


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_run_worker_of_a_faust_worker_runs_one_web_server_on_the_fixed_port() -> None:
    port = free_port()
    app = agentstream.App(f"dbl-{uuid.uuid4().hex[:6]}", broker="memory://", web_port=port, web_host="127.0.0.1")
    src = app.topic("src")

    @app.agent(src)
    async def a(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    worker = agentstream.Worker(app, install_signal_handlers=False)
    run = asyncio.ensure_future(run_worker(worker))
    try:
        started = asyncio.ensure_future(worker.started.wait())
        await asyncio.wait({run, started}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert not run.done(), run.exception() if run.done() else None
        assert worker.crashed is None
        assert [type(s) for s in worker.servers] == [Web]
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/livez") as r:
            assert r.status == 200
    finally:
        if not run.done():
            worker.request_stop()
        await asyncio.gather(run, return_exceptions=True)
    assert run.result() == 0
