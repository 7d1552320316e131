"""Faults on the real broker: kill -9 under load, broker connection loss, damaged local state,
an unwritable data dir, and exactly_once refused by a broker without transactions.

Every test prints what it measured (duplicates under at_least_once); docs/guarantees.md records
the figures.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from agentstream.devbroker import DevBroker, free_port, tansu_binary
from agentstream.testing_faults import TcpProxy

from .cluster import Feeder, Worker, changelog_state, sentences, stop_all, true_counts, wait_counts

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
KILL_SENTENCES = int(os.environ.get("AGENTSTREAM_FAULT_SENTENCES", "30000"))


@pytest.fixture
def fresh_broker(request: pytest.FixtureRequest) -> Iterator[DevBroker]:
    log_dir = ARTIFACTS / request.node.name
    log_dir.mkdir(parents=True, exist_ok=True)
    with DevBroker(log_path=log_dir / "broker.log") as b:
        yield b


def report(name: str, expected: dict[str, int], got: dict[str, int]) -> int:
    """Print and return the duplicated effects (sum of count - truth); asserts nothing was lost."""
    low = {w: (got.get(w), c) for w, c in expected.items() if got.get(w, 0) < c}
    assert not low, f"{name}: {len(low)} words below the truth (lost updates), e.g. {list(low.items())[:5]}"
    assert set(got) == set(expected), f"{name}: unexpected words {set(got) - set(expected)}"
    duplicates = sum(got[w] - c for w, c in expected.items())
    print(f"\n{name}: {sum(expected.values())} word records, {duplicates} duplicated effects "
          f"({100.0 * duplicates / max(1, sum(expected.values())):.2f}%)")
    return duplicates


def test_exactly_once_is_refused_by_a_broker_without_transactions(fresh_broker: DevBroker, tmp_path: Path,
                                                                   request: pytest.FixtureRequest) -> None:
    w = Worker("eos", fresh_broker.url, tmp_path / "w", ARTIFACTS / request.node.name,
               env={"AGENTSTREAM_PROCESSING_GUARANTEE": "exactly_once"})
    try:
        code = w.proc.wait(60)
        log = w.log()
        assert code != 0, log
        assert "processing_guarantee" in log and "at_least_once" in log and "InitProducerId" in log, log[-2000:]
        assert "assigned:" not in log, "the worker joined the group before refusing"
    finally:
        w.stop_quietly()


def test_kill9_one_of_three_workers_every_few_seconds(fresh_broker: DevBroker, tmp_path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    texts = sentences(KILL_SENTENCES, seed=21)
    logs = ARTIFACTS / request.node.name
    workers = {n: Worker(n, fresh_broker.url, tmp_path / n, logs) for n in ("w1", "w2", "w3")}
    everyone = list(workers.values())
    rnd = random.Random(21)
    kills = 0
    try:
        for w in everyone:
            w.wait_log(r"assigned: .*sentences\[")
        began = time.monotonic()
        feeder = Feeder(fresh_broker.bootstrap, texts, chunk=1000, pause=0.05)
        feeder.start()
        while feeder.is_alive() or kills < 3:
            time.sleep(rnd.uniform(3.0, 5.0))
            name = rnd.choice(sorted(workers))
            workers[name].kill()
            kills += 1
            workers[name] = Worker(f"{name}-{kills}", fresh_broker.url, tmp_path / name, logs)
            everyone.append(workers[name])
        feeder.finish()
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected, at_least=True, timeout=180)
        elapsed = time.monotonic() - began
        duplicates = report(f"kill -9 x{kills}, 3 workers, {len(texts)} sentences in {elapsed:.0f}s", expected, got)
        assert kills >= 3
        for w in workers.values():
            assert w.terminate() == 0
        assert duplicates >= 0
    finally:
        stop_all(everyone)
