"""DevBroker's start-up wait (one loop for ``start()`` and ``astart()``): a broker that dies or
never listens is reported with the reason, from sync code (where the wait runs on its own loop in
a thread), from sync code inside a running loop, and from async code; and nothing is left running.
A stand-in process replaces tansu, so these run without the broker binary."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from agentstream import devbroker
from agentstream.devbroker import DevBroker, DevBrokerError


def stand_in(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    """tansu replaced by ``python -c code`` (which never opens the broker's port)."""

    def command(port: int, **kwargs: Any) -> list[str]:
        return [sys.executable, "-c", code]

    monkeypatch.setattr(devbroker, "_broker_command", command)


def test_a_broker_that_exits_at_start_is_reported_with_its_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in(monkeypatch, "import sys; sys.exit(3)")
    broker = DevBroker(startup_timeout=60)
    with pytest.raises(DevBrokerError, match=f"port {broker.port}: tansu exited with code 3 during start-up"):
        broker.start()
    assert not broker.running


def test_a_broker_that_never_listens_times_out_and_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in(monkeypatch, "import time; time.sleep(60)")
    broker = DevBroker(startup_timeout=0.3)
    with pytest.raises(DevBrokerError, match="port did not accept connections within 0s"):
        broker.start()
    assert not broker.running  # stopped, not left sleeping


async def test_the_same_failure_from_sync_code_inside_a_loop_and_from_async_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stand_in(monkeypatch, "import sys; sys.exit(4)")
    with pytest.raises(DevBrokerError, match="tansu exited with code 4"):
        DevBroker(startup_timeout=60).start()  # a running loop here: the wait gets its own
    broker = DevBroker(startup_timeout=60)
    with pytest.raises(DevBrokerError, match="tansu exited with code 4"):
        await broker.astart()
    assert not broker.running
