"""Shutdown on the real broker: SIGTERM in the middle of a group join stops the worker without
waiting for the join to finish (issue 13)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from agentstream.devbroker import DevBroker

from .cluster import Worker

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
SESSION = 60  # a new group's join takes about half of it on the dev broker


def test_sigterm_during_the_first_join_stops_without_finishing_it(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    w = Worker(
        "w1",
        fresh_broker.url,
        tmp_path / "w1",
        ARTIFACTS / request.node.name,
        env={
            "AGENTSTREAM_SESSION_TIMEOUT": str(SESSION),
            "AGENTSTREAM_REBALANCE_TIMEOUT": str(SESSION),
            "AGENTSTREAM_SHUTDOWN_TIMEOUT": "3",
        },
    )
    try:
        w.wait_log(r"topology of ")  # the consumer starts (and joins the group) right after
        time.sleep(2.0)  # in the join now: the group waits for members before it answers
        assert "assigned:" not in w.log()
        w.proc.send_signal(signal.SIGTERM)
        # The join would answer after ~SESSION/2 s; the stop must not wait for it. The bound is a
        # third of that, generous for a loaded machine (the stop itself takes ~2 s at most).
        code = w.proc.wait(SESSION / 3)
        assert code == 0, w.log()[-3000:]
        assert "assigned:" not in w.log(), "the worker finished the join before stopping"
        assert "worker for wordcount stopped" in w.log()
    finally:
        w.stop_quietly()
