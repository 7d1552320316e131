"""``agentstream.Worker``: the one worker class, run in async code (``await Worker(app).run()``) or
from a script as Faust's ``Worker(app, ...).execute_from_commandline()``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentstream as faust

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.asyncio
async def test_worker_runs_in_async_code_with_its_services(tmp_path: Path) -> None:
    events: list[str] = []

    class Svc(faust.Service):
        async def on_start(self) -> None:
            events.append("start")

        async def on_stop(self) -> None:
            events.append("stop")

    app = faust.App("f-worker-async", broker="memory://", web_enabled=False, data_dir=str(tmp_path))
    worker = faust.Worker(app, Svc, web_port=6123, install_signal_handlers=False)
    assert app.settings.web_port == 6123
    running = asyncio.ensure_future(worker.run())
    for _ in range(1000):
        if events:
            break
        await asyncio.sleep(0.01)
    assert events == ["start"] and app.worker is worker
    worker.request_stop()
    assert await asyncio.wait_for(running, 60) == 0
    assert events == ["start", "stop"]


SCRIPT = """
import asyncio, os, signal, sys

import agentstream as faust

app = faust.App("f-worker-script", broker="memory://", web_enabled=False, data_dir=sys.argv[1])


class Greeter(faust.Service):
    async def on_start(self):
        print("service started", flush=True)

    async def on_stop(self):
        print("service stopped", flush=True)


@app.task
async def stop_soon():
    print("worker running", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    faust.Worker(app, Greeter(), loglevel="info", logfile=sys.argv[2]).execute_from_commandline()
"""


def test_execute_from_commandline_runs_the_cli_worker_and_exits_with_its_code(tmp_path: Path) -> None:
    script = tmp_path / "faust_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    logfile = tmp_path / "worker.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "data"), str(logfile)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()  # the service and the task start side by side
    assert sorted(lines[:2]) == ["service started", "worker running"] and lines[2:] == ["service stopped"], lines
    assert "INFO" in logfile.read_text()  # loglevel= and logfile= reached the CLI's logging set-up
