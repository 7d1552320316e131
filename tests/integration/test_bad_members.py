"""Issue 45, on the real broker with worker processes: one bad group member or one bad record never
stops the app. A rogue consumer joins the workers' group with the ``agentstream`` protocol and
malformed user data (as leader, and as a member the worker leads): the workers keep counting,
exactly. A payment stamped ten years ahead reaches apps/enrich.py's stream-stream join: later
orders and payments still join, also after a restart on the same data dir."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest

from agentstream.devbroker import DevBroker
from agentstream.transport.partitioner import default_partition

from .cluster import Worker, feed, read_topic, sentences, stop_all, true_counts, wait_counts
from .rogue import RogueMember
from .test_enrich import BASE, PARTITIONS, Send, _create_topics, produce

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
        assert rogue.assignor.led.wait(60), "the rogue, alone in the group, did not lead it"
        w2 = Worker("w2", fresh_broker.url, tmp_path / "w2", logs)
        workers.append(w2)
        w2.wait_log(r"the group leader's assignment data is malformed")
        w2.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
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


def _pairs(start: int, n: int, base: float) -> list[Send]:
    out: list[Send] = []
    for i in range(start, start + n):
        oid, ts = f"o{i}", base + i
        out.append(("orders", oid, {"order_id": oid, "customer_id": "c", "amount": 1, "ts": ts}, ts))
        out.append(("payments", oid, {"order_id": oid, "paid": i, "ts": ts + 1}, ts + 1))
    return out


def _paid(bootstrap: str) -> set[str]:
    return {orjson.loads(v)["order_id"] for _, v in read_topic(bootstrap, "paid-orders") if v is not None}


def _wait_paid(bootstrap: str, expected: set[str], timeout: float = 90.0) -> set[str]:
    deadline = time.monotonic() + timeout
    got: set[str] = set()
    while time.monotonic() < deadline:
        got = _paid(bootstrap)
        if got >= expected:
            break
        time.sleep(0.5)
    return got


def test_a_record_stamped_years_ahead_never_stops_the_stream_stream_join(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    logs = ARTIFACTS / request.node.name
    asyncio.run(_create_topics(fresh_broker.url))
    w1 = Worker("w1", fresh_broker.url, tmp_path / "w", logs, app="apps.enrich")
    workers = [w1]
    try:
        w1.wait_log(r"assigned: .*orders\[0, 1, 2, 3\]")
        produce(fresh_broker.bootstrap, _pairs(0, 12, BASE))
        assert _wait_paid(fresh_broker.bootstrap, {f"o{i}" for i in range(12)}) == {f"o{i}" for i in range(12)}
        # one payment ten years ahead on every partition (anyone who can produce can stamp it)
        keys = {default_partition(f"x{i}".encode(), PARTITIONS): f"x{i}" for i in range(64)}
        assert len(keys) == PARTITIONS
        future = time.time() + 10 * 365 * 86400
        produce(
            fresh_broker.bootstrap,
            [("payments", k, {"order_id": k, "paid": 0, "ts": future}, future) for k in keys.values()],
        )
        produce(fresh_broker.bootstrap, _pairs(100, 12, BASE))
        batch2 = {f"o{i}" for i in range(100, 112)}
        assert _wait_paid(fresh_broker.bootstrap, batch2) >= batch2
        w1.wait_log(r"join \S+: dropped record payments\[\d\]@\d+ at \d+\.\d+: more than max_message_time_difference")
        # the stored stream time was never moved: after a restart on the same data dir it still joins
        assert w1.terminate() == 0
        w2 = Worker("w2", fresh_broker.url, tmp_path / "w", logs, app="apps.enrich")
        workers.append(w2)
        w2.wait_log(r"assigned: .*orders\[0, 1, 2, 3\]")
        produce(fresh_broker.bootstrap, _pairs(200, 12, BASE))
        batch3 = {f"o{i}" for i in range(200, 212)}
        assert _wait_paid(fresh_broker.bootstrap, batch3) >= batch3
        assert w2.terminate() == 0
    finally:
        stop_all(workers)
