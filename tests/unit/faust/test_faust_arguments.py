"""Every Faust argument agentstream accepts but does not act on is logged once per process (logger
``agentstream.faust``), and an argument left at its default is not logged at all."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import agentstream as faust
from agentstream import faust_args


async def _tick() -> None: ...


async def _view(web: Any, request: Any) -> Any: ...


def _cmd() -> None: ...


def _declare(app: faust.App, **faust_only: Any) -> None:
    """The declarations with Faust-only arguments (``faust_only`` true) or without them."""
    on = bool(faust_only)
    app.timer(1.0, **({"traced": True, "max_drift_correction": 0.5} if on else {}))(_tick)
    app.crontab("* * * * *", **({"traced": False} if on else {}))(_tick)
    app.task(**({"traced": True} if on else {}))(_tick)
    app.page("/p", **({"base": object, "name": "p"} if on else {}))(_view)  # cors_options: honoured (web_deploy)
    app.command(**({"base": object, "aliases": ["c"]} if on else {}))(_cmd)
    app.channel(**({"loop": object()} if on else {}))

    @app.agent(app.topic("src"), **({"supervisor_strategy": object(), "help": "h"} if on else {}))
    async def agent(stream: faust.Stream) -> None:
        async for _ in stream:
            pass

    @app.agent(app.topic("typed"), **({"value_type": int} if on else {}))  # the topic's types count, not these
    async def typed(stream: faust.Stream) -> None:
        async for _ in stream:
            pass

    app.topic("other", **({"replicas": 3, "acks": True} if on else {}))
    app.Table("totals", default=int, **({"use_partitioner": True, "recovery_buffer_size": 10} if on else {}))
    faust.Service(**({"loop": object(), "beacon": object()} if on else {}))
    faust.Worker(app, **({"blocking_timeout": 5.0} if on else {}))
    faust.SSLCredentials(**({"purpose": object()} if on else {}))


EXPECTED = [
    "app.timer(traced=",
    "app.timer(max_drift_correction=",
    "app.crontab(traced=",
    "app.task(traced=",
    "app.page(base=",
    "app.page(name=",
    "app.command(base=",
    "app.command(aliases=",
    "app.channel(loop=",
    "app.agent(supervisor_strategy=",
    "app.agent(help=",
    "app.agent(value_type=",
    "app.topic(acks=",
    "app.Table(recovery_buffer_size=",
    "Service(loop=",
    "Service(beacon=",
    "Worker(blocking_timeout=",
    "SSLCredentials(purpose=",
]


@pytest.fixture
def fresh_log_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each notice is once per process: start this test as a fresh process would."""
    monkeypatch.setattr(faust_args, "_logged", set())


@pytest.mark.usefixtures("fresh_log_once")
def test_each_ignored_faust_argument_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        for n in range(2):  # two apps declaring the same: each argument is still logged once
            _declare(faust.App(f"f-ignored-{n}", broker="memory://"), faust_only=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "agentstream.faust"]
    counts = {prefix: sum(line.startswith(prefix) for line in lines) for prefix in EXPECTED}
    assert counts == dict.fromkeys(EXPECTED, 1), lines
    assert all("ignored" in line for line in lines)


@pytest.mark.usefixtures("fresh_log_once")
def test_arguments_left_at_their_defaults_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        _declare(faust.App("f-defaults", broker="memory://"))
    assert [r.getMessage() for r in caplog.records if r.name == "agentstream.faust"] == []


@pytest.mark.usefixtures("fresh_log_once")
def test_notices_wait_for_the_worker_to_set_up_logging(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before logging is configured (the CLI imports the app first) a notice is kept; the worker
    command writes it once logging is set up, other commands drop it."""
    monkeypatch.setattr(faust_args, "_deferred", [])
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    faust.App("f-deferred", broker="memory://").timer(1.0, traced=True)(_tick)
    assert len(faust_args._deferred) == 1
    monkeypatch.setattr(root, "handlers", [caplog.handler])
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        faust_args.flush_deferred_logs()
    assert [r.getMessage()[:16] for r in caplog.records] == ["app.timer(traced"]
    assert faust_args._deferred == []
