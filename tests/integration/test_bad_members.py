"""Issue 45, on the real broker with worker processes: one bad group member or one bad record never
stops the app. A rogue consumer joins the workers' group with the ``agentstream`` protocol and
malformed user data (as leader, and as a member the worker leads); the workers keep counting,
exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstream.devbroker import DevBroker

from .cluster import Worker, feed, sentences, stop_all, true_counts, wait_counts
from .rogue import RogueMember

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def test_a_rogue_member_with_malformed_user_data_never_stops_the_workers(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    texts = sentences(1500, seed=45)
    logs = ARTIFACTS / request.node.name
    w1 = Worker("w1", fresh_broker.url, tmp_path / "w1", logs)
    workers = [w1]
    rogue = RogueMember(fresh_broker.bootstrap, "wordcount", ["sentences"])
    try:
        w1.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        feed(fresh_broker.bootstrap, texts[:500])
        # the worker leads: it decodes the rogue's subscription data
        rogue.start()
        w1.wait_log(r"group member \S+ sent malformed subscription data")
        feed(fresh_broker.bootstrap, texts[500:1000])
        # caught up on every partition, w1 keeps them all while the rogue (planned as holding no
        # state) is in the group: nothing waits for the rogue
        assert wait_counts(fresh_broker.bootstrap, true_counts(texts[:1000])) == true_counts(texts[:1000])
        # w1 leaves: the rogue leads, and hands the next worker malformed assignment data
        assert w1.terminate() == 0
        w2 = Worker("w2", fresh_broker.url, tmp_path / "w2", logs)
        workers.append(w2)
        w2.wait_log(r"the group leader's assignment data is malformed")
        w2.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        assert rogue.assignor.led.is_set()
        feed(fresh_broker.bootstrap, texts[1000:])
        expected = true_counts(texts)
        assert wait_counts(fresh_broker.bootstrap, expected) == expected
        assert w2.proc.poll() is None
        rogue.leave()
        assert w2.terminate() == 0
    finally:
        stop_all(workers)
        if rogue.is_alive():
            rogue.leave()
