"""Scale-out and rolling-restart must-show (issue 30): ``make soak-scale``, not part of ``make test``.

On the tansu dev broker, a table app (``scaleout``: every input record increments its key's count
and sends one output record) holds ``SCALE_KEYS`` (1.6M) keys across 4 partitions, loaded straight
into the table's changelog so the first worker restores them. Under a steady ``SCALE_RATE`` (200)
records/s feed, with a per-partition sequence number in each record:

1. a second worker joins (it warms up, probes, then takes its share; KIP-441);
2. a third joins, then the three are restarted one at a time on their data dirs. ``SCALE_STATIC=1``
   restarts them with static membership (``consumer_group_instance_id`` per worker); the tansu dev
   broker holds a static member's JoinGroup and SyncGroup 3 s each, longer than the 2 s session, so
   the default restarts them as dynamic members.

For each phase it reports, per input partition, the longest gap between consecutive outputs (the
time the worker sent each, carried in the record) and when it began, records lost and duplicated,
and for phase 1 the time from the newcomer's start to its taking active partitions. Figures go to
stdout and ``artifacts/soak-scale/report.json`` (every output, as partition, sequence and send time,
to ``outputs.json``); each run starts with empty data dirs (the broker is new). Environment:
SCALE_KEYS, SCALE_RATE, SCALE_SESSION_TIMEOUT (2), SCALE_HEARTBEAT (a sixth of the session timeout),
SCALE_STATIC (0).

On a Kafka cluster (issue 39): ``SCALE_KAFKA=h1:p1,h2:p2,...`` runs it against that cluster, ``SCALE_KAFKA=start``
against a 3-broker cluster of its own (tests/kafka_cluster; Java and Maven). Each run's app id and topics then
carry a prefix of their own (``SCALE_PREFIX``, default a fresh one), so runs can share one cluster. The dev-broker
hooks can be left out to measure them there: ``SCALE_FOLLOWER_SYNC=0`` (the follower's wait for the leader's plan
before its SyncGroup, transport/kafka/follower_sync.py, which applies only on the dev broker since issue 39;
``SCALE_FOLLOWER_SYNC=1`` applies it on any broker, as before) and ``SCALE_LEAVE_PATCH=0`` (the LeaveGroup at generation
0, transport/kafka/consumer.py); both are applied in the workers (this module is their app). Kafka refuses a
session timeout below its ``group.min.session.timeout.ms`` (6 s), so there SCALE_SESSION_TIMEOUT defaults to 6; a
static rolling restart needs one longer than a worker's restart. The figures of issue 39 came from, per hook setting:
``SCALE_KAFKA=<bootstrap> SCALE_KEYS=200000 SCALE_SESSION_TIMEOUT=30 [SCALE_STATIC=1] [SCALE_FOLLOWER_SYNC=0]
[SCALE_LEAVE_PATCH=0] make soak-scale``.

The floor on the dev broker: its coordinator answers a JoinGroup after 1 s, and a follower's
SyncGroup sent before the leader's a further 1 s later; the newcomer asking for the probing
rebalance joins first, so our followers sync once the leader's plan is in
(``transport/kafka/follower_sync.py``) and the moved partitions are back about 1 s after the ask.
The old owner stops processing them when its next heartbeat tells it of the rebalance, a little
after that ask. A restarted worker's own partitions wait for its start (about 0.35 s to its
JoinGroup on an idle machine, from bytecode) and its 1 s JoinGroup. See docs/deployment.md, "Scaling
out without a restore stall". Its fetches poll as well: with the default ``consumer_fetch_max_wait``
(0.5 s) a partition's outputs come about 250 ms apart even in the steady state before phase 1
(``steady_gap_p99_s``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import agentstream

PREFIX = os.environ.get("SCALE_PREFIX", "")


def _without_hooks() -> None:
    """Leave out the dev-broker hooks the environment names (SCALE_FOLLOWER_SYNC=0, SCALE_LEAVE_PATCH=0), in this
    process: the workers import this module as their app before they build a consumer."""
    from agentstream.transport.kafka import consumer

    if os.environ.get("SCALE_FOLLOWER_SYNC") == "0":
        consumer.sync_after_leader = lambda *_args, **_kw: False  # type: ignore[assignment]
    elif os.environ.get("SCALE_FOLLOWER_SYNC") == "1":  # on any broker (by default only on the dev broker's)
        from agentstream.transport.kafka import follower_sync

        async def polling(*_args: object) -> bool:
            return True

        follower_sync.polling_coordinator = polling  # type: ignore[assignment]
    if os.environ.get("SCALE_LEAVE_PATCH") == "0":
        consumer._leave_group_at_generation_zero = lambda _consumer: None  # type: ignore[assignment]


_without_hooks()

app = agentstream.App(
    f"{PREFIX}scaleout", broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"), topic_partitions=4
)
feed = app.topic(f"{PREFIX}scale-feed", key_type=str, value_type=dict)
out = app.topic(f"{PREFIX}scale-out", key_type=str, value_type=dict)
state = app.Table("scale_state", default=int)


@app.agent(feed)
async def update(stream: agentstream.Stream) -> None:
    async for key, value in stream.items():
        state[key] += 1
        await out.send(key=key, value={**value, "t": time.time()})  # when the worker sent it


def main() -> int:
    import asyncio
    import compileall
    import json
    import shutil
    import subprocess
    import sys
    import threading
    from itertools import pairwise
    from pathlib import Path

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped,unused-ignore]

    from agentstream.devbroker import DevBroker
    from agentstream.transport.kafka import KafkaTransport
    from agentstream.transport.partitioner import default_partition
    from tests.integration.cluster import Worker

    kafka = os.environ.get("SCALE_KAFKA", "")
    if kafka and not PREFIX:  # a cluster may be shared by runs: this run's app and topics get names of their own
        os.environ["SCALE_PREFIX"] = f"s{int(time.time())}-"
        return subprocess.call([sys.executable, "-m", "tests.soak.scale_out"])
    keys_total = int(os.environ.get("SCALE_KEYS", "1600000"))
    rate = float(os.environ.get("SCALE_RATE", "200"))
    # tansu hands out a join after about half of it; Kafka refuses less than 6 s (group.min.session.timeout.ms)
    session = os.environ.get("SCALE_SESSION_TIMEOUT", "6" if kafka else "2")
    static_restarts = os.environ.get("SCALE_STATIC", "0") == "1"  # the rolling restart uses static membership
    partitions = 4
    root = Path(__file__).resolve().parents[2] / "artifacts" / "soak-scale"
    shutil.rmtree(root / "data", ignore_errors=True)  # a fresh broker: an earlier run's stores are of no use
    root.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        print(f"[soak-scale {time.strftime('%H:%M:%S')}] {message}", flush=True)

    # Workers start from bytecode, as an installed package does. Where PYTHONDONTWRITEBYTECODE is set
    # (as on these machines), every start of an editable install compiles agentstream's sources
    # again: about 0.2 s of each restart, before the worker joins.
    here = Path(__file__).resolve()
    for tree in (Path(agentstream.__file__).parent, here.parent):  # the package, and this app's
        compileall.compile_dir(tree, quiet=1)
    compileall.compile_file(here.parents[1] / "__init__.py", quiet=1)

    def key_bytes(i: int) -> bytes:
        raw = state.key_codec.dumps(f"k{i}")
        assert raw is not None
        return raw

    broker: Any
    if kafka == "start":
        from tests.kafka_cluster.cluster import KafkaCluster

        broker = KafkaCluster(work_dir=root / "kafka")
        shutil.rmtree(broker.work_dir, ignore_errors=True)
        broker.start()
        say(f"a Kafka cluster of its own at {broker.bootstrap}")
    elif kafka:
        broker = _Cluster(kafka)
    else:
        broker = DevBroker(log_path=root / "broker.log")
        broker.start()
    url = "kafka://" + ";".join(broker.bootstrap.split(","))
    workers: list[Worker] = []
    report: dict[str, object] = {
        "broker": "kafka" if kafka else "dev broker (tansu)",
        "follower_sync": {"0": "off", "1": "on"}.get(os.environ.get("SCALE_FOLLOWER_SYNC", ""), "dev broker only"),
        "leave_patch": os.environ.get("SCALE_LEAVE_PATCH") != "0",
        "keys": keys_total,
        "rate": rate,
        "session_timeout": float(session),
        "static": static_restarts,
    }
    try:

        async def load() -> None:
            transport = KafkaTransport(url)
            await transport.ensure_topics([state.changelog_topic.spec(), feed.spec(), out.spec()])
            await transport.close()
            producer = AIOKafkaProducer(
                bootstrap_servers=broker.bootstrap, linger_ms=20, max_batch_size=1 << 20, acks=1
            )
            await producer.start()
            try:
                value = state.value_codec.dumps(1)
                for start in range(0, keys_total, 20_000):
                    futures = []
                    for i in range(start, min(start + 20_000, keys_total)):
                        k = key_bytes(i)
                        p = default_partition(k, partitions)
                        futures.append(await producer.send(state.changelog_topic.name, value, key=k, partition=p))
                    await asyncio.gather(*futures)
            finally:
                await producer.stop()

        t0 = time.monotonic()
        asyncio.run(load())
        say(f"loaded {keys_total} keys into the changelog in {time.monotonic() - t0:.1f}s")

        sent: dict[int, list[int]] = {p: [] for p in range(partitions)}
        stop_feed = threading.Event()
        feed_keys = {p: [i for i in range(5000) if default_partition(key_bytes(i), partitions) == p] for p in sent}

        def feeder() -> None:
            async def run() -> None:
                producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
                await producer.start()
                seq, tick = 0, 0.05
                next_at = time.monotonic()
                try:
                    while not stop_feed.is_set():
                        futures = []
                        for _ in range(max(1, round(rate * tick))):
                            p = seq % partitions
                            k = f"k{feed_keys[p][seq // partitions % len(feed_keys[p])]}"
                            data = json.dumps({"p": p, "seq": seq}).encode()
                            futures.append(await producer.send(feed.name, data, key=k.encode(), partition=p))
                            sent[p].append(seq)
                            seq += 1
                        await asyncio.gather(*futures)
                        next_at += tick
                        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                finally:
                    await producer.stop()

            asyncio.run(run())

        def worker(name: str, instance: str, static: bool = False) -> Worker:
            env = {
                "AGENTSTREAM_SESSION_TIMEOUT": session,
                "AGENTSTREAM_HEARTBEAT_INTERVAL": os.environ.get("SCALE_HEARTBEAT", str(max(0.3, float(session) / 6))),
                "AGENTSTREAM_PROBING_REBALANCE_INTERVAL": "2",
            }
            if static:  # the dev broker answers a static member's probing rejoin without a rebalance
                env["AGENTSTREAM_CONSUMER_GROUP_INSTANCE_ID"] = instance
            w = Worker(name, url, root / "data" / instance, root / "logs", app="tests.soak.scale_out", env=env)
            workers.append(w)
            return w

        def taken(w: Worker) -> None:
            w.wait_log(r"assigned: .*scale-feed\[\d", timeout=900)

        w1 = worker("w1", "w1")
        t0 = time.monotonic()
        taken(w1)
        w1.wait_log(r"tables for partitions \[0, 1, 2, 3\]: restored", timeout=900)
        report["first_restore_s"] = round(time.monotonic() - t0, 1)
        say(f"w1 restored and running after {report['first_restore_s']}s")
        thread = threading.Thread(target=feeder, daemon=True)
        thread.start()
        time.sleep(5)
        phase1_start = time.time()
        w2 = worker("w2", "w2")
        t_join = time.monotonic()
        taken(w2)
        report["newcomer_takes_share_s"] = round(time.monotonic() - t_join, 1)
        say(f"w2 took its share {report['newcomer_takes_share_s']}s after it started")
        time.sleep(5)
        phase1_end = time.time()
        w3 = worker("w3", "w3")
        taken(w3)
        time.sleep(5)
        phase2_start = time.time()
        for i, old in enumerate([w1, w2, w3], 1):
            old.terminate()
            fresh = worker(f"w{i}-restarted", f"w{i}", static=static_restarts)
            fresh.wait_log(r"assigned: ", timeout=300)
            time.sleep(5)
        phase2_end = time.time()
        time.sleep(3)
        stop_feed.set()
        thread.join(30)
        time.sleep(5)

        async def outputs() -> list[tuple[int, int, float]]:
            consumer = AIOKafkaConsumer(
                out.name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
            )
            await consumer.start()
            got: list[tuple[int, int, float]] = []
            try:
                while True:
                    batch = await consumer.getmany(timeout_ms=3000, max_records=50_000)
                    if not batch:
                        return got
                    for messages in batch.values():
                        for m in messages:
                            v = json.loads(m.value)
                            got.append((v["p"], v["seq"], v["t"]))
            finally:
                await consumer.stop()

        got = asyncio.run(outputs())
        seen: dict[int, int] = {}
        for _p, s, _t in got:
            seen[s] = seen.get(s, 0) + 1
        all_sent = {s for ss in sent.values() for s in ss}
        report["sent"] = len(all_sent)
        report["lost"] = len(all_sent - set(seen))
        report["duplicates"] = sum(n - 1 for n in seen.values() if n > 1)

        def intervals(p: int, start: float, end: float) -> list[tuple[float, float]]:
            """Partition ``p``'s consecutive outputs sent between ``start`` and ``end``, as pairs."""
            return list(pairwise(sorted(t for q, _s, t in got if q == p and start <= t <= end)))

        def gaps(start: float, end: float, name: str) -> dict[int, float]:
            result, when = {}, {}
            for p in range(partitions):
                pairs = intervals(p, start - 1, end + 1)
                a, b = max(pairs, key=lambda ab: ab[1] - ab[0], default=(0.0, float("inf")))
                result[p] = round(b - a, 2)
                when[p] = time.strftime("%H:%M:%S", time.localtime(a)) + f"{a % 1:.3f}"[1:]  # to match the logs
            report[f"{name}_gap_from"] = when
            return result

        # the steady state before phase 1: the gaps a partition shows with nothing changing
        steady = sorted(b - a for p in range(partitions) for a, b in intervals(p, 0.0, phase1_start))
        report["steady_gap_p99_s"] = round(steady[int(len(steady) * 0.99)], 3) if steady else None
        report["steady_gap_max_s"] = round(steady[-1], 3) if steady else None
        (root / "outputs.json").write_text(json.dumps(got))  # (partition, seq, sent at) for a closer look
        report["scale_out_gap_s"] = gaps(phase1_start, phase1_end, "scale_out")
        report["rolling_restart_gap_s"] = gaps(phase2_start, phase2_end, "rolling_restart")
        say(json.dumps(report))
        (root / "report.json").write_text(json.dumps(report, indent=2))
        ok = report["lost"] == 0
        return 0 if ok else 1
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.kill()
        broker.stop()


class _Cluster:
    """A Kafka cluster someone else runs (SCALE_KAFKA=h1:p1,...): nothing to start or stop."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def stop(self) -> None:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
