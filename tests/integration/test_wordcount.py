"""Wordcount on the real broker: exact counts with one and two workers, and with a worker joining
and another leaving (SIGTERM) mid-stream. The join and leave run on the Kafka cluster (faster there than on
the dev broker, whose group coordinator polls once a second), or on the dev broker where no cluster can be had."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstream.devbroker import DevBroker

from .cluster import Feeder, Worker, assert_counts_after_rebalances, feed, sentences, stop_all, true_counts, wait_counts
from .targets import Target

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def _workers_dir(request: pytest.FixtureRequest) -> Path:
    return ARTIFACTS / request.node.name


def test_one_worker_exact_counts(fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    texts = sentences(3000, seed=1)
    w = Worker("w1", fresh_broker.url, tmp_path / "w1", _workers_dir(request))
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        feed(fresh_broker.bootstrap, texts)
        expected = true_counts(texts)
        assert wait_counts(fresh_broker.bootstrap, expected) == expected
        assert w.terminate() == 0
    finally:
        stop_all([w])


def test_two_workers_share_partitions_exact_counts(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    texts = sentences(4000, seed=2)
    logs = _workers_dir(request)
    w1 = Worker("w1", fresh_broker.url, tmp_path / "w1", logs)
    w2 = Worker("w2", fresh_broker.url, tmp_path / "w2", logs)
    workers = [w1, w2]
    try:
        for w in workers:
            w.wait_log(r"assigned: .*sentences\[")
        feed(fresh_broker.bootstrap, texts)
        expected = true_counts(texts)
        assert wait_counts(fresh_broker.bootstrap, expected) == expected
        a1, a2 = w1.last_assignment("sentences"), w2.last_assignment("sentences")
        assert a1 and a2, (a1, a2)
        assert a1.isdisjoint(a2) and a1 | a2 == {0, 1, 2, 3}
        for w in workers:
            assert w.terminate() == 0
    finally:
        stop_all(workers)


@pytest.mark.parametrize("target", ["kafka-else-dev"], indirect=True)
def test_worker_joins_and_another_leaves_mid_stream(
    target: Target, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    t = target
    texts = sentences(16000, seed=3)
    logs = _workers_dir(request)

    def worker(name: str) -> Worker:
        return Worker(name, t.url, tmp_path / name, logs, app=t.wordcount, env=t.env)

    w1, w2 = worker("w1"), worker("w2")
    workers = [w1, w2]
    try:
        for w in workers:
            w.wait_log(r"assigned: .*sentences\[")
        # the last quarter waits until w1 has left: on a loaded machine the join and the leave may
        # take longer than the rest of the feed would
        feeder = Feeder(t.bootstrap, texts, chunk=500, pause=0.25, hold_at=12000, topic=t.sentences)
        feeder.start()
        feeder.wait_sent(3000)
        w3 = worker("w3")  # joins mid-stream
        workers.append(w3)
        w3.wait_log(r"assigned: .*sentences\[")
        assert feeder.is_alive(), "the feed ended before the third worker joined: not mid-stream"
        assert w1.terminate() == 0  # leaves mid-stream (SIGTERM)
        assert feeder.is_alive(), "the feed ended before the first worker left: not mid-stream"
        feeder.finish()  # releases the held quarter
        expected = true_counts(texts)
        got = wait_counts(t.bootstrap, expected, topic=t.word_counts)
        assert_counts_after_rebalances(got, expected, workers)
        assert "revoked: " in w2.log()
        for w in (w2, w3):
            assert w.terminate() == 0
    finally:
        stop_all(workers)
