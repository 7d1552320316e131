"""Integration tests run against a real Kafka-protocol broker: one tansu dev broker per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.devbroker import DevBroker, free_port

_HERE = Path(__file__).resolve().parent
ARTIFACTS = Path(os.environ.get("AGENTSTREAM_ARTIFACTS", _HERE.parent.parent / "artifacts"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs a real broker (the tansu dev broker is started for it)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def broker() -> Iterator[DevBroker]:
    """A tansu broker on a free port for the whole session (memory storage; log in artifacts/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    port = free_port()  # per-session log name: parallel sessions must not share one file
    dev = DevBroker(port, log_path=ARTIFACTS / f"tansu-integration-{port}.log")
    dev.start()
    try:
        yield dev
    finally:
        dev.stop()


@pytest.fixture
def fresh_broker(request: pytest.FixtureRequest) -> Iterator[DevBroker]:
    """A broker of the test's own, for tests whose apps use fixed topic names (log in artifacts/<test>/)."""
    log_dir = ARTIFACTS / request.node.name
    log_dir.mkdir(parents=True, exist_ok=True)
    with DevBroker(log_path=log_dir / "broker.log") as b:
        yield b
