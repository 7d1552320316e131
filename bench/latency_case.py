"""Latency case: end-to-end latency of the pass-through workload at half of its maximum rate.

Throughput cases drain a backlog, where batching hides the time one record takes; a stream
processor usually runs below its ceiling, where what users see is how long a record takes to come
out. So: feed records at a steady rate both sides sustain with room to spare, and measure each
record from the moment the feeder hands it to its producer to the moment a consumer of the
output topic has it.

Steps (all on the case's fresh broker):

Sides: the agentstream pass-through worker, the raw loop (``send()`` per record) and the
batch-API loop (:mod:`bench.raw_passthrough` ``--batch``). The rate is issue 17's 1,000 records/s
unless ``BENCH_LATENCY_RATE`` says otherwise; ``BENCH_LATENCY_RATE=half`` paces at half the
max rate, measured first (step 1).

1. (``half`` only) Max rate: a quick backlog drain of ``min(n, 100 000)`` pass-through records by each side
   (``bench.apps.passthrough`` worker and ``bench.raw_passthrough``, as in the passthrough case).
   The paced rate is **half of the lower of the two** (in practice agentstream's), so both sides
   get the *same* offered load and neither is near its ceiling. Measured in the case rather than
   taken from the passthrough case so the case stands alone and sees the machine's load of the
   moment.
2. Per side, on fresh topics: the worker starts on an empty input topic; once it announces its
   assignment, the probe (a consumer) starts, and after 2 s of idle time the feeder subprocess
   sends ``n`` records at the paced rate, each value stamped with ``time.monotonic_ns()``
   (system-wide on Linux, so comparable across processes) and a sequence number. The worker
   forwards them and exits after ``n``.
3. The probe reads partition 0 of the output topic: latency = time its ``getmany`` returned the
   record - send stamp, for the quarter of the records whose key hashes there (a uniform sample
   that keeps the instrument's CPU low; the machine has 2 cores for the broker, the worker, the
   feeder and the probe). It reads partition 0 of the *input* topic the same way ("hop":
   feeder -> broker -> consumer, no worker): the floor the broker and the instrument put under
   any worker. Afterwards the orchestrator reads the whole output topic to check every record.
   The broker's and the machine's CPU during the feed are sampled too: if the machine is
   saturated, latency grows through the run (``latency_by_second``) and means little.

Settings are each side's defaults: agentstream producer ``linger_ms=5`` (``producer_linger``),
``acks=all``, consumer ``fetch_max_wait_ms=500``/``fetch_min_bytes=1`` (aiokafka's defaults;
agentstream has no setting for either), ``max_poll_records=1000``, commit every 1 s; the raw
loop the same (``linger_ms=5``, ``acks=all``, aiokafka's fetch defaults). The same feeder and
probe code serve both sides. Feeder: ``linger_ms=0`` (aiokafka's default), ``acks=all``, one
hand-built batch per partition every 5 ms tick (records stamped when appended). Probe:
``fetch_max_wait_ms=10``, because the dev broker (tansu) does not answer a pending fetch when
records arrive: it holds it for about half of ``fetch_max_wait_ms`` (measured: the hop is
spread evenly over 0-250 ms at 500 ms, 0-30 ms at 50 ms), so at aiokafka's default the probe
alone would add 0-250 ms to every figure. The same hold sits in the worker's own fetch at its
default 500 ms, on both sides, and dominates the result.

Correct when every record came out at least once and the output holds exactly ``n`` records.

    python -m bench.latency_case feed --topic T --rate R --count N
    python -m bench.latency_case probe --in T --out T2 --timeout S   (until SIGUSR1)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from bench import brokers, common

if TYPE_CHECKING:
    from bench.run import Case

MAX_RATE_RECORDS = 100_000
IDLE_S = 2.0  # the worker sits idle (joined, long-polling an empty topic) before the feed starts
VALUE_SIZE = 100  # as the passthrough case's values
STAMP = 19 + 10  # send stamp (ns, 19 digits) + sequence number (10 digits)
PAD = b"x" * (VALUE_SIZE - STAMP)
SIDES = ("agentstream", "raw", "batch")
TARGET_RATE = 1000.0  # issue 17's target: p99 at 1,000 records/s within 20 ms of the raw loop's
TICK_S = 0.005  # feeder granularity: like a producer's linger of 5 ms, both sides' default
PROBE_FETCH_WAIT_MS = 10  # see the module docstring: the probe must not add tansu's fetch hold to every figure


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] latency: {msg}", flush=True)


# -- orchestration ------------------------------------------------------------------------------------


def worker_argv(
    case: Case, side: str, in_topic: str, out_topic: str, expect: int, tag: str
) -> tuple[list[str], dict[str, str]]:
    """The pass-through worker of ``side`` (agentstream app or raw loop), with its own group."""
    if side == "agentstream":
        return (
            [
                "bench.as_runner",
                "worker",
                "--app",
                "bench.apps.passthrough",
                "--expect",
                str(expect),
                "--data-dir",
                str(case.scratch / tag),
                "--logfile",
                str(case.logs / f"{tag}.worker.log"),
            ],
            {"BENCH_IN": in_topic, "BENCH_OUT": out_topic, "BENCH_APP_ID": f"bench-{tag}"},
        )
    return (
        [
            "bench.raw_passthrough",
            *(["--batch"] if side == "batch" else []),
            "--in",
            in_topic,
            "--out",
            out_topic,
            "--group",
            f"{side}-{tag}",
            "--expect",
            str(expect),
        ],
        {},
    )


def measure_max_rate(case: Case, n: int) -> dict[str, Any]:
    """Backlog throughput of both sides on ``n`` records (the pacing reference, step 1)."""
    topics = {side: f"lat-max-out-{side}" for side in SIDES}
    asyncio.run(common.create_topics(case.broker.bootstrap, ["lat-max-in", *topics.values()]))
    asyncio.run(common.load_topic(case.broker.bootstrap, "lat-max-in", common.passthrough_records(n)))
    out: dict[str, Any] = {"records": n}
    for side in SIDES:
        argv, env = worker_argv(case, side, "lat-max-in", topics[side], n, f"max-{side}")
        res = case.run(f"max-{side}", argv, env)
        out[side] = round(res["records_per_s"], 1)
        log(f"max rate {side}: {res['records_per_s']:.0f} records/s on a {n}-record backlog")
    out["max_rate"] = min(out[side] for side in SIDES)
    return out


def run_side(case: Case, side: str, count: int, rate: float) -> dict[str, Any]:
    """One side under the paced feed (step 2): worker, probe and feeder, each its own process."""
    in_topic, out_topic = f"lat-in-{side}", f"lat-out-{side}"
    broker = case.broker
    asyncio.run(common.create_topics(broker.bootstrap, [in_topic, out_topic]))
    budget = count / rate + 120.0
    argv, env = worker_argv(case, side, in_topic, out_topic, count, f"latency-{side}")
    worker = case.spawn(side, argv, env)
    probe = None
    try:
        worker.wait_for("assigned", 120)
        probe = case.spawn(
            f"{side}-probe",
            ["bench.latency_case", "probe", "--in", in_topic, "--out", out_topic, "--timeout", str(budget)],
        )
        probe.wait_for("ready", 60)
        time.sleep(IDLE_S)
        with common.Sampler(lambda: common.machine_sample(brokers.pids(broker))) as sampler:
            t0 = time.monotonic()
            feed = case.run(
                f"{side}-feed",
                ["bench.latency_case", "feed", "--topic", in_topic, "--rate", str(rate), "--count", str(count)],
                timeout=budget,
            )
            result = worker.wait(budget)
            t1 = time.monotonic()
        probe.signal()  # every output record is acknowledged by now: the probe reads up to the end and stops
        seen = probe.wait(120)
    finally:
        for proc in (worker, probe):
            if proc is not None:
                proc.kill()
    out = asyncio.run(read_sequences(broker.bootstrap, out_topic))
    result.pop("timeline", None)
    result.update(
        latency_ms=seen["out"],
        hop_ms=seen["hop"],
        latency_sample=seen["out_records"],
        latency_by_second=seen["by_second"],
        hop_by_second=seen["hop_by_second"],
        out_records=out["records"],
        duplicates=out["duplicates"],
        missing=count - out["distinct"],
        feed={k: feed[k] for k in ("records", "seconds", "records_per_s", "cpu_s", "max_behind_ms")},
        broker_cpu_pct=_pct(sampler.rate("broker_cpu_s", t0, t1)),
        machine_busy_cores=_pct(sampler.rate("machine_busy_s", t0, t1), 1),
    )
    result["at_least_once"] = result["missing"] == 0
    result["correct"] = result["missing"] == 0 and out["records"] == count
    lat = seen["out"]
    log(
        f"{side}: p50 {lat.get('p50', 0):.1f} ms, p99 {lat.get('p99', 0):.1f} ms, max {lat.get('max', 0):.1f} ms "
        f"({seen['out_records']} sampled); {out['records']} out, {result['missing']} missing, "
        f"{out['duplicates']} duplicates; broker CPU {result['broker_cpu_pct']} %, "
        f"machine {result['machine_busy_cores']} cores busy"
    )
    return result


def _pct(rate: float | None, scale: float = 100.0) -> float | None:
    return None if rate is None else round(rate * scale, 2)


async def read_sequences(bootstrap: str, topic: str) -> dict[str, int]:
    """Count, distinct sequence numbers and duplicates of a whole output topic (correctness)."""
    seen: set[int] = set()
    state = {"records": 0}

    def on_batch(messages: list[Any]) -> None:
        state["records"] += len(messages)
        seen.update(int(m.value[19:STAMP]) for m in messages)

    await common.read_topic(bootstrap, topic, on_batch=on_batch)
    return {"records": state["records"], "distinct": len(seen), "duplicates": state["records"] - len(seen)}


def headline(sides: dict[str, dict[str, Any]], rate: float, max_rate: dict[str, Any]) -> dict[str, Any]:
    """The row's figures: percentiles per side, agentstream/raw p99 as the ratio, and the p99
    differences to both baselines (the target is a difference, in ms)."""
    row: dict[str, Any] = {
        "paced_rate": round(rate, 1),
        "max_rate": max_rate,
        "ratio_is": "p99 latency agentstream/raw (lower is better)",
    }
    for name, side in sides.items():
        for q in ("p50", "p99", "max"):
            row[f"{name}_{q}_ms"] = round(side["latency_ms"].get(q, 0.0), 2)
        row[f"{name}_hop_p99_ms"] = round(side["hop_ms"].get("p99", 0.0), 2)
    ra, rr = row["agentstream_p99_ms"], row["raw_p99_ms"]
    row["ratio"] = round(ra / rr, 3) if rr else None
    row["ratio_p50"] = round(row["agentstream_p50_ms"] / row["raw_p50_ms"], 3) if row["raw_p50_ms"] else None
    for base in sides:
        if base != "agentstream":
            row[f"p99_minus_{base}_ms"] = round(ra - row[f"{base}_p99_ms"], 2)
    paced = (
        "fixed by BENCH_LATENCY_RATE" if max_rate.get("max_rate") is None else f"half of {max_rate['max_rate']:,.0f}"
    )
    per_side = "; ".join(
        f"{name} {row[f'{name}_p50_ms']:.1f}/{row[f'{name}_p99_ms']:.1f}/{row[f'{name}_max_ms']:.1f} ms"
        f" (hop p99 {row[f'{name}_hop_p99_ms']:.1f})"
        for name in sides
    )
    diffs = ", ".join(f"{row[f'p99_minus_{b}_ms']:+.1f} ms vs {b}" for b in sides if b != "agentstream")
    row["summary"] = f"at {rate:,.0f} records/s ({paced}): p50/p99/max {per_side}; agentstream p99 {diffs}"
    return row


def case_latency(case: Case, n: int) -> dict[str, Any]:
    """A :mod:`bench.run` case: ``n`` records paced at 1,000/s (``BENCH_LATENCY_RATE``: another
    rate, or ``half`` for half of the lowest max rate measured first), through each side."""
    fixed = os.environ.get("BENCH_LATENCY_RATE", "") or str(TARGET_RATE)
    if fixed != "half":
        max_rate: dict[str, Any] = {"max_rate": None, "fixed_rate": float(fixed)}
        rate = float(fixed)
    else:
        max_rate = measure_max_rate(case, min(n, MAX_RATE_RECORDS))
        rate = max_rate["max_rate"] / 2
    log(f"pacing {n} records at {rate:.0f} records/s ({n / rate:.1f} s) per side")
    sides = {side: run_side(case, side, n, rate) for side in SIDES}
    return {"paced_rate": rate, "max_rate": max_rate, **sides, "row": headline(sides, rate, max_rate)}


# -- feeder and probe (their own processes) -----------------------------------------------------------


async def feed(topic: str, rate: float, count: int) -> dict[str, Any]:
    """Send ``count`` records at ``rate``/s, each stamped as it is appended to its batch.

    Wakes every TICK_S (or when the next record is due, if later) and sends the records due by
    then as one hand-built batch per partition (round-robin): the feeder is the instrument, so
    it must cost little CPU, and the broker few requests, on a 2-core machine
    (``producer.send()`` per record takes about a core at 15 000/s; a request per partition
    every 1 ms took the broker to ~0.9 core at 22 000 records/s). A late wake-up sends a bigger batch rather than drifting; how far behind
    the schedule it ever was is reported (``max_behind_ms``)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=os.environ["BENCH_BOOTSTRAP"], acks="all", linger_ms=0)
    await producer.start()
    futures: list[Any] = []
    try:
        await producer.partitions_for(topic)
        sent, behind = 0, 0.0
        t0 = time.perf_counter()
        while sent < count:
            elapsed = time.perf_counter() - t0
            due = min(count, int(elapsed * rate) + 1)
            behind = max(behind, elapsed - sent / rate)
            batches: dict[int, Any] = {}
            while sent < due:
                p = sent % common.PARTITIONS
                batch = batches.get(p) or batches.setdefault(p, producer.create_batch())
                if (
                    batch.append(
                        key=b"k%07d" % sent, value=b"%019d%010d" % (time.monotonic_ns(), sent) + PAD, timestamp=None
                    )
                    is None
                ):  # full: send it, the record goes in the next one
                    futures.append(await producer.send_batch(batches.pop(p), topic, partition=p))
                    continue
                sent += 1
            for p, batch in batches.items():
                futures.append(await producer.send_batch(batch, topic, partition=p))
            await asyncio.sleep(max(TICK_S, sent / rate - (time.perf_counter() - t0)))
        await asyncio.gather(*futures)
        seconds = time.perf_counter() - t0
    finally:
        await producer.stop()
    return {
        "records": sent,
        "seconds": seconds,
        "records_per_s": sent / seconds,
        "cpu_s": common.cpu_seconds(),
        "max_behind_ms": round(behind * 1000, 2),
        "batches": len(futures),
    }


class Arrivals:
    """First arrival of each sequence number on one topic: latencies (ms) and duplicates."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.latency_ms: list[float] = []
        self.sent_ns: list[int] = []
        self.records = 0
        self.duplicates = 0

    def add(self, value: bytes, now_ns: int) -> None:
        self.records += 1
        sent_ns, seq = int(value[:19]), int(value[19:STAMP])
        if seq in self.seen:
            self.duplicates += 1
            return
        self.seen.add(seq)
        self.latency_ms.append((now_ns - sent_ns) / 1e6)
        self.sent_ns.append(sent_ns)

    def by_second(self) -> list[tuple[int, float, float]]:
        """(second of the feed, p50, max) per second of send time: shows warm-up and periodic stalls."""
        if not self.sent_ns:
            return []
        start = min(self.sent_ns)
        buckets: dict[int, list[float]] = {}
        for sent, lat in zip(self.sent_ns, self.latency_ms):
            buckets.setdefault((sent - start) // 1_000_000_000, []).append(lat)
        out = []
        for sec in sorted(buckets):
            stats = common.percentiles(buckets[sec], qs=(50,))
            out.append((sec, round(stats["p50"], 2), round(stats["max"], 2)))
        return common.downsample(out)


async def probe(in_topic: str, out_topic: str, timeout: float) -> dict[str, Any]:
    """Latency of partition 0 of the output (a sample of a quarter of the records: the keys
    hashing there) and of the input (the hop), from the start until SIGUSR1 (sent once the worker
    has committed everything), then up to the end. A quarter keeps the instrument's CPU low on
    a 2-core machine; the orchestrator checks every output record separately."""
    import signal

    from aiokafka import AIOKafkaConsumer, TopicPartition

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stop.set)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=os.environ["BENCH_BOOTSTRAP"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=PROBE_FETCH_WAIT_MS,
    )
    await consumer.start()
    arrivals = {in_topic: Arrivals(), out_topic: Arrivals()}
    try:
        tps = [TopicPartition(out_topic, 0), TopicPartition(in_topic, 0)]
        consumer.assign(tps)
        for tp in tps:
            await consumer.position(tp)  # offsets resolved: nothing fed from now on can be missed
        common.announce("ready")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ending = stop.is_set()
            batches = await consumer.getmany(timeout_ms=300 if ending else 100)
            now = time.monotonic_ns()
            if ending and not batches:
                break
            for tp, messages in batches.items():
                arr = arrivals[tp.topic]
                for m in messages:
                    arr.add(m.value, now)
    finally:
        await consumer.stop()
    out, hop = arrivals[out_topic], arrivals[in_topic]
    return {
        "records": len(out.seen),
        "out_records": out.records,
        "duplicates": out.duplicates,
        "out": common.percentiles(out.latency_ms),
        "hop": common.percentiles(hop.latency_ms),
        "by_second": out.by_second(),
        "hop_by_second": hop.by_second(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    f = sub.add_parser("feed")
    f.add_argument("--topic", required=True)
    f.add_argument("--rate", type=float, required=True)
    f.add_argument("--count", type=int, required=True)
    pr = sub.add_parser("probe")
    pr.add_argument("--in", dest="in_topic", required=True)
    pr.add_argument("--out", dest="out_topic", required=True)
    pr.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    import uvloop

    if args.mode == "feed":
        common.report(uvloop.run(feed(args.topic, args.rate, args.count)))
    else:
        common.report(uvloop.run(probe(args.in_topic, args.out_topic, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
