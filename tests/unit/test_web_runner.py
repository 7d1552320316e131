"""The web server runs beside the worker: the CLI's ``worker`` command and ``faust.Worker`` attach it
through :func:`agentstream.web.run_worker` (the worker itself never constructs it)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from agentstream import App
from agentstream.cli import main
from agentstream.web import Web
from agentstream.worker.worker import Worker


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[Any]]]:
    """The servers attached to each worker that was run (the run itself returns at once)."""
    seen: list[list[Any]] = []

    async def run(self: Worker) -> int:
        seen.append(list(self.servers))
        return 0

    monkeypatch.setattr(Worker, "run", run)
    monkeypatch.setattr("gc.freeze", lambda: None)
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        yield seen
    finally:
        root.handlers[:], root.level = saved


def test_the_cli_worker_runs_the_web_server_beside_the_worker(runs: list[list[Any]]) -> None:
    app = App("cli-web", broker="memory://")
    assert main(["worker", "--web-port", "7002", "--web-host", "127.0.0.7"], app=app) == 0
    (web,) = runs[0]
    assert isinstance(web, Web) and (web.host, web.port) == ("127.0.0.7", 7002)
    assert main(["worker", "--without-web"], app=app) == 0
    assert runs[1] == []


def test_faust_worker_runs_the_web_server_beside_the_worker(runs: list[list[Any]]) -> None:
    from agentstream.faust.worker import Worker as FaustWorker

    app = App("shim-web", broker="memory://")
    with pytest.raises(SystemExit) as exit_:
        FaustWorker(app, web_port=7003, loglevel="warning").execute_from_commandline()
    assert exit_.value.code == 0
    (web,) = runs[0]
    assert isinstance(web, Web) and web.port == 7003
