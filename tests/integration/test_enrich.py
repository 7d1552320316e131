"""apps/enrich.py on the real broker: two workers, then kill -9 and restart of one mid-stream.

The reference is a plain nested-loop join over the same input. The input's whole time span is
below ``within + grace`` of the stream-stream join, so no record can be late in any processing
order and the expected output is exactly the reference, whichever worker handles what. After
the kill, at-least-once may duplicate results: outputs are compared as sets, and every
reference result must be there (none lost), nothing else.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from agentstream.devbroker import DevBroker
from agentstream.transport import get_transport
from agentstream.transport.base import TopicSpec

from .cluster import Worker, read_topic, stop_all

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
BASE = 1_700_000_000.0  # event time of the first order (seconds)
WITHIN = 300.0
PARTITIONS = 4

Send = tuple[str, str, dict[str, Any], float]  # topic, key, value, timestamp (s)


def make_input(seed: int = 5, orders: int = 1200, customers: int = 40) -> tuple[list[Send], list[Send]]:
    """Customers, then orders and payments sorted by time (payments up to 60 s early, 420 s late)."""
    rnd = random.Random(seed)
    custs: list[Send] = [
        (
            "customers",
            f"c{i}",
            {"customer_id": f"c{i}", "name": f"name{i}", "country": rnd.choice(["FR", "DE", "US"])},
            BASE - 10,
        )
        for i in range(customers)
    ]
    flow: list[Send] = []
    for i in range(orders):
        ts = BASE + i
        oid = f"o{i}"
        flow.append(
            (
                "orders",
                oid,
                {
                    "order_id": oid,
                    "customer_id": f"c{rnd.randrange(customers + 5)}",
                    "amount": rnd.randint(1, 500),
                    "ts": ts,
                },
                ts,
            )
        )
        for _ in range(rnd.choice([0, 1, 1, 1, 2])):
            pts = ts + rnd.randint(-60, 420)
            flow.append(("payments", oid, {"order_id": oid, "paid": rnd.randint(1, 500), "ts": pts}, pts))
    flow.sort(key=lambda s: s[3])
    return custs, flow


def reference(custs: list[Send], flow: list[Send]) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    by_id = {v["customer_id"]: v for _, _, v, _ in custs}
    orders = [v for t, _, v, _ in flow if t == "orders"]
    payments = [v for t, _, v, _ in flow if t == "payments"]
    enriched = {
        (
            o["order_id"],
            (by_id.get(o["customer_id"]) or {}).get("name"),
            (by_id.get(o["customer_id"]) or {}).get("country"),
        )
        for o in orders
    }
    paid = {
        (o["order_id"], o["ts"], p["ts"], p["paid"])
        for o in orders
        for p in payments
        if o["order_id"] == p["order_id"] and abs(o["ts"] - p["ts"]) <= WITHIN
    }
    return enriched, paid


def outputs(bootstrap: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    enriched = [orjson.loads(v) for _, v in read_topic(bootstrap, "enriched-orders") if v is not None]
    paid = [orjson.loads(v) for _, v in read_topic(bootstrap, "paid-orders") if v is not None]
    return (
        [(e["order_id"], e["name"], e["country"]) for e in enriched],
        [(p["order_id"], p["order_ts"], p["paid_ts"], p["paid"]) for p in paid],
    )


async def _produce(bootstrap: str, sends: list[Send]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for topic, key, value, ts in sends:
            await producer.send(topic, orjson.dumps(value), key=key.encode(), timestamp_ms=int(ts * 1000))
        await producer.flush()
    finally:
        await producer.stop()


def produce(bootstrap: str, sends: list[Send]) -> None:
    asyncio.run(_produce(bootstrap, sends))


async def _create_topics(url: str) -> None:
    transport = get_transport(url)
    try:
        await transport.ensure_topics([TopicSpec(name, PARTITIONS) for name in ("orders", "payments", "customers")])
    finally:
        await transport.close()


def wait_outputs(
    bootstrap: str, enriched: set[tuple[Any, ...]], paid: set[tuple[Any, ...]], timeout: float = 120.0
) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """Poll the output topics until they hold every expected result (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    got_e: set[tuple[Any, ...]] = set()
    got_p: set[tuple[Any, ...]] = set()
    while time.monotonic() < deadline:
        e, p = outputs(bootstrap)
        got_e, got_p = set(e), set(p)
        if got_e >= enriched and got_p >= paid:
            break
        time.sleep(0.5)
    return got_e, got_p


class Feeder(threading.Thread):
    def __init__(self, bootstrap: str, sends: list[Send], chunk: int = 100, pause: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.sends, self.chunk, self.pause = bootstrap, sends, chunk, pause
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for i in range(0, len(self.sends), self.chunk):
                produce(self.bootstrap, self.sends[i : i + self.chunk])
                self.sent = min(len(self.sends), i + self.chunk)
                time.sleep(self.pause)
        except BaseException as exc:  # surfaced by finish()
            self.error = exc

    def finish(self, timeout: float = 120.0) -> None:
        self.join(timeout)
        assert not self.is_alive(), "feeder did not finish"
        if self.error is not None:
            raise self.error


def test_enrich_two_workers_then_kill9_and_restart(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    logs = ARTIFACTS / request.node.name
    custs, flow = make_input()
    half = len(flow) // 2
    asyncio.run(_create_topics(fresh_broker.url))
    produce(fresh_broker.bootstrap, custs)  # before the workers: restored in full at their start
    w1 = Worker("w1", fresh_broker.url, tmp_path / "w1", logs, app="apps.enrich")
    w2 = Worker("w2", fresh_broker.url, tmp_path / "w2", logs, app="apps.enrich")
    workers = [w1, w2]
    try:
        deadline = time.monotonic() + 120
        while not (
            w1.log().count("assigned: ")
            and w2.log().count("assigned: ")
            and w1.last_assignment("orders")
            and w2.last_assignment("orders")
        ):
            assert time.monotonic() < deadline, (
                f"workers were not both assigned:\n{w1.log()[-2000:]}\n{w2.log()[-2000:]}"
            )
            for w in workers:
                assert w.proc.poll() is None, w.log()[-3000:]
            time.sleep(0.2)
        assert w1.last_assignment("orders") | w2.last_assignment("orders") == set(range(PARTITIONS))

        # Phase 1: two workers, the first half of the input: exactly the reference.
        produce(fresh_broker.bootstrap, flow[:half])
        enriched, paid = reference(custs, flow[:half])
        got_e, got_p = wait_outputs(fresh_broker.bootstrap, enriched, paid)
        assert got_e == enriched
        assert got_p == paid, f"missing {sorted(paid - got_p)[:5]}, unexpected {sorted(got_p - paid)[:5]}"
        assert any(name is None for _, name, _ in enriched) and len(paid) > 300

        # Phase 2: kill -9 one worker while the rest flows, restart it with the same data dir.
        feeder = Feeder(fresh_broker.bootstrap, flow[half:])
        feeder.start()
        while feeder.sent < (len(flow) - half) // 3:
            time.sleep(0.05)
        w2.kill()
        assert feeder.is_alive(), "the feed ended before the kill: not mid-stream"
        w2b = Worker("w2-restarted", fresh_broker.url, tmp_path / "w2", logs, app="apps.enrich")
        workers.append(w2b)
        feeder.finish()
        enriched, paid = reference(custs, flow)
        got_e, got_p = wait_outputs(fresh_broker.bootstrap, enriched, paid, timeout=150)
        assert got_p >= paid, f"lost {len(paid - got_p)} paid-orders results, e.g. {sorted(paid - got_p)[:5]}"
        assert got_e >= enriched, f"lost {len(enriched - got_e)} enriched orders"
        assert got_p == paid and got_e == enriched  # and nothing that is not a join result
        assert w2b.log().count("assigned: "), "the restarted worker never got partitions"
        assert w1.terminate() == 0
        assert w2b.terminate() == 0
    finally:
        stop_all(workers)
