"""Scale cases: two worker processes against one, on the same input and a fresh broker each.

Partition numbers are the unit of parallelism: a second worker in the group should take half of
them (with their RocksDB tables) and double the throughput, as long as there are cores for it.
These cases measure how close to 2x agentstream gets (framework against itself: there is no raw
side), on two apps, each a row of its own:

* ``scale-wordcount``: the stateful ``apps/wordcount.py`` (split -> repartition by word through
  ``wordcount-words`` -> RocksDB table count -> ``word-counts``). records/s counts input
  sentences, like the wordcount case. Words are Zipf-distributed, so the partitions of the
  repartition topic are not equal: skew limits the speedup (``max_share``/``ideal_speedup``).
* ``scale-passthrough``: ``bench/apps/passthrough.py`` (records copied unchanged, 100-byte values),
  with distinct keys spread by the default partitioner: no skew, the framework's own scaling.

Partitions: ``--scale-partitions`` of :mod:`bench.run` (env ``BENCH_SCALE_PARTITIONS``), default
**8**, passed to the workers as ``AGENTSTREAM_TOPIC_PARTITIONS`` (environment settings override
the apps' ``topic_partitions=4``, so every topic follows it: input, repartition topic, changelog
and output; the case checks the counts on the broker after each run). Why 8 and not 4: a group
spreads partitions, not records, so with 2 instances a Kafka Streams / Faust user gives the topics
several partitions per instance (a multiple of the instance count, with headroom to add
instances later; 8 is also agentstream's and Faust's default ``topic_partitions``), so that no
instance is stuck with one big partition and partitions can move when the load is uneven. It does
*not* even out the word count here: the assignor deals partition numbers round-robin (worker 1
gets 0, 2, 4, ..., worker 2 gets 1, 3, 5, ...), and for any even count ``hash % P % 2 == hash % 2``,
so each worker gets exactly the same words with 4, 6, 8, 12 or 16 partitions: the busiest worker
handles 56.8 % of the records (1.76x ceiling) with the 1000-word Zipf vocabulary of
:func:`bench.common.sentences` (its top word alone is 6.5 % of the words). Only the pass-through
row shows scaling without skew. ``--scale-partitions 4`` reproduces the earlier set-up.

Noise: on the shared 2-vCPU VM one process's CPU cost per record varies by +-20 % from one run to
the next (host steal, other people's runs), so one pair can even exceed ``ideal_speedup``.
``--scale-repeat K`` (env ``BENCH_SCALE_REPEAT``) runs K pairs (1 worker, 2 workers, alternating)
and reports the median pair, with every pair's speedup in ``speedups``.

Each run (1 worker, then 2 workers) gets its **own fresh dev broker**, so fresh topics, a fresh
group and changelog and the same broker state for both (the apps have fixed topic names and app
ids). The workers (``bench.as_runner worker --until-signal``, distinct processes and data dirs)
start on empty topics (they create them); the orchestrator waits until the group has settled:
every worker announced an assignment, together they cover the partition numbers without overlap,
and nothing changed for 2 s. Only then is the input loaded (the loader appends its batches
round-robin over the partitions, far faster than the workers drain them, so it never starves
them; it does take some CPU during the first second or two, the same in both runs). Each worker
prints its records handled every 10 ms; when their sum reaches every record to handle (word
count: the sentences + the words, each repartitioned word is one record handled), the
orchestrator sends each worker SIGUSR1, on which it commits (caches -> changelog, producer
flush, offsets) and reports.

Timed interval: from the first record fetched by any worker to the last worker's commit
returned (``time.monotonic()``, system-wide on Linux). Correct when the output matches the
input (word count: the last count per word in ``word-counts`` equals a ``Counter`` over the
input; pass-through: count and checksum of the output topic), every topic has the partition
count asked for, and no rebalance happened during the interval.

Since the broker and the workers share the machine's 2 cores, the case also samples (every
0.25 s, from outside) the CPU of the broker process and of the whole machine: a second worker
only helps while there is a core for it. ``max_share`` is the busiest worker's share of the
records handled and ``ideal_speedup`` = 1 / max_share. ``records_per_cpu_s`` (records handled
per CPU-second, all workers together) shows whether two workers spend more CPU on the same work.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench import brokers, common
from bench.brokers import Broker

if TYPE_CHECKING:
    from bench.run import Case

DEFAULT_PARTITIONS = 8
SETTLE_QUIET_S = 2.0
PROGRESS_S = 0.01


def repeats() -> int:
    """How many 1-worker/2-worker pairs a scale case runs (``--scale-repeat``); the row shows the median."""
    return max(1, int(os.environ.get("BENCH_SCALE_REPEAT", "") or 1))


def partitions() -> int:
    """The partition count of every topic of the scale cases (``--scale-partitions``)."""
    return int(os.environ.get("BENCH_SCALE_PARTITIONS", "") or DEFAULT_PARTITIONS)


@dataclass
class Workload:
    """What one scale case runs: the app, how to load its input, how many records the workers
    handle in all, and how to check the output afterwards."""

    label: str
    app: str
    topics: list[str]  # every topic of the app (the partition counts are checked on the broker)
    total: int  # records handled by all workers together
    load: Callable[[str, int], Any]  # (bootstrap, partitions) -> coroutine
    check: Callable[[str, int], bool]  # (bootstrap, partitions) -> output correct
    env: dict[str, str] = field(default_factory=dict)
    batch_argv: list[str] = field(default_factory=list)  # the batch-API loop (bench.raw_*, --batch) on the same topics


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] scale: {msg}", flush=True)


@contextlib.contextmanager
def fresh_broker(case: Case, label: str) -> Iterator[Broker]:
    """A new dev broker as ``case.broker`` for the block (workers spawned in it connect to it)."""
    old = case.broker
    broker = brokers.new_broker(case.logs / f"broker-{label}.log")
    broker.start()
    case.broker = broker
    try:
        yield broker
    finally:
        case.broker = old
        broker.stop()


def spawn_workers(case: Case, k: int, work: Workload, parts: int, side: str = "agentstream") -> list[common.Spawned]:
    """``k`` workers, each with a new data dir (every run has a fresh broker: no old tables).
    ``side="batch"``: ``k`` processes of the batch-API loop in one group instead, on topics the
    orchestrator creates (the agentstream workers create theirs)."""
    if side == "batch":
        asyncio.run(common.create_topics(case.broker.bootstrap, work.topics, partitions=parts))
        return [
            case.spawn(
                f"{k}b-batch{i}", [*work.batch_argv, "--until-signal", "--progress", str(PROGRESS_S)], profile=False
            )
            for i in range(1, k + 1)
        ]
    env = {"AGENTSTREAM_TOPIC_PARTITIONS": str(parts), **work.env}
    return [
        case.spawn(
            f"{k}w-worker{i}",
            [
                "bench.as_runner",
                "worker",
                "--app",
                work.app,
                "--until-signal",
                "--progress",
                str(PROGRESS_S),
                "--data-dir",
                tempfile.mkdtemp(prefix=f"{k}w-{i}-", dir=case.scratch),
                "--logfile",
                str(case.logs / f"{k}w-worker{i}.log"),
            ],
            env,
            profile=False,
        )
        for i in range(1, k + 1)
    ]


@contextlib.contextmanager
def profiled(case: Case, workers: list[common.Spawned]) -> Iterator[None]:
    """With --profile: py-spy attached to each settled worker for the block only (the timed part,
    not start-up and group join), so samples divided by records handled compare across runs."""
    if not case.profile:
        yield
        return
    spies = [case.attach_py_spy(w.name, w.pid) for w in workers]
    time.sleep(1.0)  # py-spy takes a moment to attach
    try:
        yield
    finally:
        for spy in spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        for spy in spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()


def assignment(workers: list[common.Spawned], parts: int) -> list[list[int]] | None:
    """Each worker's partitions if all are assigned, disjoint and covering every partition."""
    latest = [w.last("assigned", "revoked") for w in workers]
    if any(e is None or e["kind"] != "assigned" for e in latest):
        return None
    got = [e["partitions"] for e in latest if e is not None]
    flat = [p for ps in got for p in ps]
    return got if sorted(flat) == list(range(parts)) else None


def wait_settled(workers: list[common.Spawned], parts: int, timeout: float = 180.0) -> list[list[int]]:
    """Block until the group's assignment is complete and unchanged for SETTLE_QUIET_S."""
    deadline = time.monotonic() + timeout
    stable_since, last = time.monotonic(), None
    while time.monotonic() < deadline:
        for w in workers:
            if not w.running:
                w.wait(10)  # raises with its stderr
        events = [len(w.events) for w in workers]
        if events != last:
            stable_since, last = time.monotonic(), events
        got = assignment(workers, parts)
        if got is not None and time.monotonic() - stable_since >= SETTLE_QUIET_S:
            return got
        time.sleep(0.1)
    raise RuntimeError(
        f"group did not settle within {timeout:.0f}s: {[w.last('assigned', 'revoked') for w in workers]}"
    )


def wait_handled(workers: list[common.Spawned], total: int, timeout: float) -> None:
    """Block until the workers' progress events add up to ``total`` records handled."""
    deadline = time.monotonic() + timeout
    while sum(w.progress for w in workers) < total:
        if time.monotonic() > deadline:
            raise RuntimeError(f"timeout: handled {[w.progress for w in workers]} of {total}")
        for w in workers:
            if not w.running:
                w.wait(10)
        time.sleep(0.005)


def run_workers(case: Case, k: int, n: int, work: Workload, parts: int, side: str = "agentstream") -> dict[str, Any]:
    """One run on a fresh broker: ``k`` workers (of ``side``) join, settle, then drain the input."""
    with fresh_broker(case, f"{k}{'w' if side == 'agentstream' else 'b'}") as broker:
        workers = spawn_workers(case, k, work, parts, side)
        try:
            assigned = wait_settled(workers, parts)
            settled = [len(w.events) for w in workers]  # any later assigned/revoked event is a rebalance
            log(f"{work.label}: {k} {side} worker(s) settled on partitions {assigned}; loading {n} records")
            with common.Sampler(
                lambda: {
                    **common.machine_sample(brokers.pids(broker)),
                    "orchestrator_cpu_s": common.cpu_seconds(),
                }
            ) as sampler:
                with profiled(case, workers):
                    t = time.perf_counter()
                    asyncio.run(work.load(broker.bootstrap, parts))
                    load_s = time.perf_counter() - t
                    wait_handled(workers, work.total, timeout=n / 100 + 300)
                    for w in workers:
                        w.signal()
                    results = [w.wait(120) for w in workers]
            rebalanced = [len(w.events) for w in workers] != settled
        finally:
            for w in workers:
                w.kill()
        correct = work.check(broker.bootstrap, parts)
        counts = asyncio.run(common.partition_counts(broker.bootstrap, work.topics))
    counts_ok = all(c == parts for c in counts.values())
    if not counts_ok:
        log(f"{work.label}: topics do not all have {parts} partitions: {counts}")
    return summarize(
        f"{work.label} ({side})", k, n, results, assigned, sampler, load_s, correct and counts_ok, rebalanced, counts
    )


def summarize(
    label: str,
    k: int,
    n: int,
    results: list[dict[str, Any]],
    parts: list[list[int]],
    sampler: common.Sampler,
    load_s: float,
    output_ok: bool,
    rebalanced: bool,
    topic_partitions: dict[str, int | None],
) -> dict[str, Any]:
    t0 = min(r["t0_monotonic"] for r in results)
    t1 = max(r["t_end_monotonic"] for r in results)
    seconds = t1 - t0
    broker = sampler.rate("broker_cpu_s", t0, t1)
    busy = sampler.rate("machine_busy_s", t0, t1)
    orchestrator = sampler.rate("orchestrator_cpu_s", t0, t1)
    for r in results:
        r.pop("timeline", None)
    handled = [r["processed"] for r in results]
    cpu_s = sum(r["cpu_s"] for r in results)
    out = {
        "workers": k,
        "records": n,
        "seconds": seconds,
        "records_per_s": n / seconds,
        "cpu_s": cpu_s,
        "worker_cpu_s": [round(r["cpu_s"], 2) for r in results],
        "worker_cpu_pct": [round(100 * r["cpu_s"] / seconds, 1) for r in results],
        # records handled (all of them: word count also counts the repartitioned words) per CPU-second
        "handled_per_cpu_s": round(sum(handled) / cpu_s, 1) if cpu_s else None,
        "worker_handled_per_cpu_s": [round(r["processed"] / r["cpu_s"], 1) if r["cpu_s"] else None for r in results],
        "broker_cpu_pct": round(100 * broker, 1) if broker is not None else None,
        "machine_busy_cores": round(busy, 2) if busy is not None else None,
        # where the machine's 2 cores went over the timed interval, in cores
        "cores": cores_used(cpu_s / seconds if seconds else 0.0, broker, orchestrator, busy),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        "total_peak_rss_mb": sum(r["peak_rss_mb"] for r in results),
        "partitions": parts,
        "topic_partitions": topic_partitions,
        "rebalanced_during_run": rebalanced,
        "load_s": round(load_s, 2),
        "handled": handled,
        # the busiest worker's share of the records (word count: Zipf-distributed words, unequal partitions)
        "max_share": round(max(handled) / max(1, sum(handled)), 3),
        "correct": output_ok and not rebalanced,
        "per_worker": results,
    }
    log(
        f"{label}: {k} worker(s): {out['records_per_s']:.0f} records/s over {seconds:.1f}s; worker CPU "
        f"{out['worker_cpu_s']} s ({out['worker_cpu_pct']} %); cores {describe_cores(out['cores'])}; "
        f"handled {handled}; correct={out['correct']}"
    )
    return out


def cores_used(
    workers: float, broker: float | None, orchestrator: float | None, busy: float | None, ncpu: int = 2
) -> dict[str, float | None]:
    """The machine's cores over an interval split into workers, broker, orchestrator (the loader
    and this process), other processes (other people's runs) and idle, each in cores."""
    if broker is None or orchestrator is None or busy is None:
        return {"workers": round(workers, 2), "broker": None, "orchestrator": None, "other": None, "idle": None}
    other = max(0.0, busy - workers - broker - orchestrator)
    return {
        "workers": round(workers, 2),
        "broker": round(broker, 2),
        "orchestrator": round(orchestrator, 2),
        "other": round(other, 2),
        "idle": round(max(0.0, ncpu - busy), 2),
    }


def describe_cores(cores: dict[str, float | None]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in cores.items() if value is not None) or "unknown"


def median_pair(
    pairs: list[tuple[float, dict[str, Any], dict[str, Any]]],
) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """The median (speedup, 1-worker run, 2-worker run) pair (the upper one of an even count)."""
    ordered = sorted(pairs, key=lambda x: x[0])
    return ordered[len(ordered) // 2]


def compare(work: Workload, n: int, parts: int, unit: str, extra: dict[str, Any]) -> Callable[[Case], dict[str, Any]]:
    """Run ``work`` with 1 worker, then 2, then the batch-API loop with 1 process and 2; the
    :mod:`bench.run` detail (``raw`` = agentstream's 1-worker run, ``batch`` = the batch loop's
    2-process run)."""

    def run(case: Case) -> dict[str, Any]:
        pairs, batch_pairs = [], []
        for _ in range(repeats()):  # 1 worker, 2 workers, 1, 2, ...: machine noise hits both alike
            one = run_workers(case, 1, n, work, parts)
            two = run_workers(case, 2, n, work, parts)
            pairs.append((two["records_per_s"] / one["records_per_s"], one, two))
            b1 = run_workers(case, 1, n, work, parts, "batch")
            b2 = run_workers(case, 2, n, work, parts, "batch")
            batch_pairs.append((b2["records_per_s"] / b1["records_per_s"], b1, b2))
        speedup, one, two = median_pair(pairs)
        bspeedup, b1, b2 = median_pair(batch_pairs)
        ideal = 1 / two["max_share"]  # the most 2 workers can gain when the busiest one has that share
        cpu_growth = two["cpu_s"] / one["cpu_s"]
        row = {
            "ratio_is": f"speedup: 2 workers / 1 worker, {unit} (raw_* = the 1-worker run, batch_* = the batch-API "
            "loop's 2-process run)",
            "partitions_per_topic": parts,
            "speedup": round(speedup, 3),
            "ideal_speedup": round(ideal, 3),
            "max_share": two["max_share"],
            "speedups": sorted(round(x[0], 3) for x in pairs),  # every pair of --scale-repeat, sorted
            "batch_speedup": round(bspeedup, 3),
            "batch_speedups": sorted(round(x[0], 3) for x in batch_pairs),
            "one_worker_records_per_s": round(one["records_per_s"], 1),
            "two_workers_records_per_s": round(two["records_per_s"], 1),
            "batch_one_records_per_s": round(b1["records_per_s"], 1),
            "batch_two_records_per_s": round(b2["records_per_s"], 1),
            "cpu_s": {"1": round(one["cpu_s"], 2), "2": two["worker_cpu_s"]},
            "cpu_s_2_over_1": round(cpu_growth, 3),
            "broker_cpu_pct": {"1": one["broker_cpu_pct"], "2": two["broker_cpu_pct"]},
            "machine_busy_cores": {"1": one["machine_busy_cores"], "2": two["machine_busy_cores"]},
            "cores": {"1": one["cores"], "2": two["cores"], "batch 1": b1["cores"], "batch 2": b2["cores"]},
            "summary": (
                f"{parts} partitions{f', median of {len(pairs)} pairs' if len(pairs) > 1 else ''}: "
                f"1 worker {one['records_per_s']:,.0f}/s -> 2 workers "
                f"{two['records_per_s']:,.0f}/s, speedup {speedup:.2f} (at most {ideal:.2f}: the busiest "
                f"worker handled {100 * two['max_share']:.0f} % of the records); batch-API loop "
                f"{b1['records_per_s']:,.0f}/s -> {b2['records_per_s']:,.0f}/s, speedup {bspeedup:.2f}; "
                f"CPU-s {one['cpu_s']:.1f} -> {two['worker_cpu_s']} (x{cpu_growth:.2f}); "
                f"cores (of 2) 1 worker: {describe_cores(one['cores'])}; 2 workers: "
                f"{describe_cores(two['cores'])}; batch 2 processes: {describe_cores(b2['cores'])}"
            ),
        }
        return {**extra, "partitions": parts, "agentstream": two, "raw": one, "batch": b2, "batch_one": b1, "row": row}

    return run


def case_scale_wordcount(case: Case, n: int) -> dict[str, Any]:
    """A :mod:`bench.run` case: ``n`` sentences through apps/wordcount.py, 1 worker then 2."""
    parts = partitions()
    texts = common.sentences(n)
    expected = common.count_words(texts)
    words = sum(expected.values())

    def check(bootstrap: str, parts: int) -> bool:
        return asyncio.run(common.final_counts(bootstrap, "word-counts", partitions=parts)) == expected

    work = Workload(
        "scale-wordcount",
        "apps.wordcount",
        ["sentences", "wordcount-words", "wordcount-word_counts-changelog", "word-counts"],
        total=n + words,
        load=lambda bootstrap, parts: common.load_sentences(bootstrap, texts, parts),
        check=check,
        batch_argv=[
            "bench.raw_wordcount",
            "--batch",
            "--in",
            "sentences",
            "--words",
            "wordcount-words",
            "--out",
            "word-counts",
            "--group",
            "batch-scale-wordcount",
        ],
    )
    return compare(work, n, parts, "sentences/s", {"words": words})(case)


def case_scale_passthrough(case: Case, n: int) -> dict[str, Any]:
    """A :mod:`bench.run` case: ``n`` records (distinct keys) through bench/apps/passthrough.py, 1 worker then 2."""
    parts = partitions()
    records = common.passthrough_records(n)
    expected = common.checksum(records)
    src, dst = "scale-pt-in", "scale-pt-out"

    def check(bootstrap: str, parts: int) -> bool:
        return asyncio.run(common.read_checksum(bootstrap, dst, partitions=parts)) == expected

    work = Workload(
        "scale-passthrough",
        "bench.apps.passthrough",
        [src, dst],
        total=n,
        load=lambda bootstrap, parts: common.load_topic(bootstrap, src, records, partitions=parts),
        check=check,
        env={"BENCH_IN": src, "BENCH_OUT": dst, "BENCH_APP_ID": "bench-scale-passthrough"},
        batch_argv=[
            "bench.raw_passthrough",
            "--batch",
            "--in",
            src,
            "--out",
            dst,
            "--group",
            "batch-scale-passthrough",
        ],
    )
    return compare(work, n, parts, "records/s", {})(case)
