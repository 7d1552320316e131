"""Tables on the real broker: crash recovery from the local store + changelog tail, full restore,
standby failover, and scaling under load."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest
from rocksdict import Options, Rdict

from agentstream.devbroker import DevBroker

from .cluster import (
    Feeder,
    Worker,
    assert_counts_after_rebalances,
    changelog_state,
    sentences,
    stop_all,
    true_counts,
    wait_counts,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
RESTORED = re.compile(r"tables for partitions \[([0-9, ]*)\]: restored (\d+) records")


def store_state(data_dir: Path) -> dict[bytes, bytes]:
    """Every key of the worker's word_counts RocksDB partitions (read after the worker stopped)."""
    state: dict[bytes, bytes] = {}
    root = data_dir / "wordcount" / "tables" / "word_counts"
    for part in sorted(p for p in root.iterdir() if p.is_dir() and p.name.isdigit()):
        db = Rdict(str(part), options=Options(raw_mode=True))
        try:
            state.update(db.items())
        finally:
            db.close()
    return state


def restores(worker: Worker) -> list[tuple[list[int], int]]:
    return [
        ([int(x) for x in m.group(1).split(",") if x.strip()], int(m.group(2))) for m in RESTORED.finditer(worker.log())
    ]


def wait_until(predicate, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("wipe_data_dir", [False, True], ids=["same-data-dir", "data-dir-deleted"])
def test_kill9_and_restart(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest, wipe_data_dir: bool
) -> None:
    texts = sentences(12000, seed=11)
    logs = ARTIFACTS / request.node.name
    data = tmp_path / "w1"
    w1 = Worker("w1-first", fresh_broker.url, data, logs)
    workers = [w1]
    try:
        w1.wait_log(r"assigned: .*sentences\[")
        feeder = Feeder(fresh_broker.bootstrap, texts, chunk=500, pause=0.2, hold_at=9000)  # the rest after the kill
        feeder.start()
        feeder.wait_sent(5000)
        checkpoints = data / "wordcount" / "tables" / "word_counts"
        wait_until(lambda: len(list(checkpoints.glob("*/agentstream.checkpoint"))) == 4)
        w1.kill()  # kill -9 mid-stream
        assert feeder.is_alive(), "the feed ended before the kill: not mid-stream"
        # nobody writes the changelog until the restart; read until two readings agree, so a produce
        # request the killed worker had already sent is counted even if a loaded broker is slow with it
        at_kill, previous = len(fresh_broker_records(fresh_broker)), -1
        while at_kill != previous:
            at_kill, previous = len(fresh_broker_records(fresh_broker)), at_kill
        if wipe_data_dir:
            shutil.rmtree(data)
        w2 = Worker("w1-restarted", fresh_broker.url, data, logs)
        workers.append(w2)
        feeder.finish()
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected, at_least=True)
        low = {w: (got.get(w), c) for w, c in expected.items() if got.get(w, 0) < c}
        assert not low, f"counts below the truth after kill -9: {list(low.items())[:5]}"
        assert set(got) == set(expected)
        assert w2.terminate() == 0
        changelog = changelog_state(fresh_broker.bootstrap)
        assert store_state(data) == changelog
        (partitions, restored), *_ = restores(w2)
        assert partitions == [0, 1, 2, 3]
        if wipe_data_dir:
            assert restored == at_kill, "a deleted data dir must be restored from the whole changelog"
        else:
            assert restored < at_kill, "restart with the data dir replayed the whole changelog, not its tail"
    finally:
        stop_all(workers)


def fresh_broker_records(broker: DevBroker) -> list[tuple[bytes | None, bytes | None]]:
    from .cluster import read_topic

    return read_topic(broker.bootstrap, "wordcount-word_counts-changelog")


def test_standby_takes_over_after_kill9(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    texts = sentences(10000, seed=12)
    logs = ARTIFACTS / request.node.name
    env = {"AGENTSTREAM_TABLE_STANDBY_REPLICAS": "1"}
    w1 = Worker("w1", fresh_broker.url, tmp_path / "w1", logs, env=env)
    w2 = Worker("w2", fresh_broker.url, tmp_path / "w2", logs, env=env)
    workers = [w1, w2]
    try:
        for w in workers:
            w.wait_log(r"assigned: .*sentences\[")
        wait_until(lambda: bool(w1.last_assignment("sentences")) and bool(w2.last_assignment("sentences")))
        feeder = Feeder(fresh_broker.bootstrap, texts, chunk=500, pause=0.15)
        feeder.start()
        feeder.wait_sent(6000)
        before = len(restores(w1))
        w2.kill()
        feeder.finish()
        wait_until(lambda: any(p == [0, 1, 2, 3] for p, _ in restores(w1)[before:]), timeout=60)
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected, at_least=True)
        assert set(got) == set(expected) and all(got[w] >= c for w, c in expected.items())
        takeover = next(n for p, n in restores(w1)[before:] if p == [0, 1, 2, 3])
        held = len(fresh_broker_records(fresh_broker))
        assert takeover < held / 4, (
            f"failover restored {takeover} of {held} changelog records: the standby was not warm"
        )
        assert w1.terminate() == 0
    finally:
        stop_all(workers)


def test_scale_1_3_1_under_load_exact(fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    texts = sentences(20000, seed=13)
    logs = ARTIFACTS / request.node.name
    w1 = Worker("w1", fresh_broker.url, tmp_path / "w1", logs)
    workers = [w1]
    try:
        w1.wait_log(r"assigned: .*sentences\[")
        # the last fifth waits until both extra workers have left (scaling in and out under load)
        feeder = Feeder(fresh_broker.bootstrap, texts, chunk=200, pause=0.2, hold_at=16000)
        feeder.start()
        feeder.wait_sent(2000)
        w2 = Worker("w2", fresh_broker.url, tmp_path / "w2", logs)
        w3 = Worker("w3", fresh_broker.url, tmp_path / "w3", logs)
        workers += [w2, w3]
        for w in (w2, w3):
            w.wait_log(r"assigned: .*sentences\[\d")
        assert feeder.is_alive(), "the feed ended before scaling out: not under load"
        assert w2.terminate() == 0
        assert w3.terminate() == 0
        assert feeder.is_alive(), "the feed ended before scaling in: not under load"
        feeder.finish()
        expected = true_counts(texts)
        got = wait_counts(fresh_broker.bootstrap, expected)
        assert_counts_after_rebalances(got, expected, workers)
        assert w1.terminate() == 0
    finally:
        stop_all(workers)
