"""Scale case: two worker processes against one, on the stateful word-count app.

Partition numbers are the unit of parallelism: a second worker in the group should take half of
them (with their RocksDB tables) and double the throughput, as long as there are cores for it.
This case measures how close to 2x the real ``apps/wordcount.py`` gets (framework against
itself: there is no raw side).

Each run (1 worker, then 2 workers) gets its **own fresh dev broker**, so fresh topics, a fresh
group and changelog and the same broker state for both (``apps.wordcount`` has fixed topic
names and app id). The workers (``bench.as_runner worker --until-signal``, distinct processes
and data dirs) start on empty topics; the orchestrator waits until the group has settled: every
worker announced an assignment, together they cover the 4 partition numbers without overlap,
and nothing changed for 2 s. Only then are the ``n`` sentences loaded (the loader appends tens
of thousands per second, far ahead of the workers, so it never starves them; it does take some
CPU during the first second or two, the same in both runs). Each worker prints its records
handled every 10 ms; when their sum reaches ``n`` + the number of words (every sentence and
every repartitioned word is one record handled), the orchestrator sends each worker SIGUSR1,
on which it commits (caches -> changelog, producer flush, offsets) and reports.

Timed interval: from the first record fetched by any worker to the last worker's commit
returned (``time.monotonic()``, system-wide on Linux). records/s counts input sentences, like
the wordcount case. Correct when the last count per word in ``word-counts`` equals a
``Counter`` over the input and no rebalance happened during the interval.

Since the broker and the workers share the machine's 2 cores, the case also samples (every
0.25 s, from outside) the CPU of the broker process and of the whole machine: a second worker
only helps while there is a core for it. (On these large batches the broker takes only a few %
of a core; the other ceiling is skew: words are Zipf-distributed, so one worker's partitions
carry more than half of the repartitioned words. ``max_share`` is the busiest worker's share
of the records handled and ``ideal_speedup`` = 1 / max_share.)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Iterator

from agentstream.devbroker import DevBroker
from bench import common

if TYPE_CHECKING:
    from bench.run import Case

PARTITIONS = common.PARTITIONS
SETTLE_QUIET_S = 2.0
PROGRESS_S = 0.01


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] scale: {msg}", flush=True)


@contextlib.contextmanager
def fresh_broker(case: "Case", label: str) -> Iterator[DevBroker]:
    """A new dev broker as ``case.broker`` for the block (workers spawned in it connect to it)."""
    old = case.broker
    broker = DevBroker(log_path=case.logs / f"broker-{label}.log")
    broker.start()
    case.broker = broker
    try:
        yield broker
    finally:
        case.broker = old
        broker.stop()


def spawn_workers(case: "Case", k: int) -> list[common.Spawned]:
    return [case.spawn(f"{k}w-worker{i}", ["bench.as_runner", "worker", "--app", "apps.wordcount", "--until-signal",
                                           "--progress", str(PROGRESS_S), "--data-dir", str(case.scratch / f"{k}w-{i}"),
                                           "--logfile", str(case.logs / f"{k}w-worker{i}.log")])
            for i in range(1, k + 1)]


def assignment(workers: list[common.Spawned]) -> list[list[int]] | None:
    """Each worker's partitions if all are assigned, disjoint and covering every partition."""
    latest = [w.last("assigned", "revoked") for w in workers]
    if any(e is None or e["kind"] != "assigned" for e in latest):
        return None
    parts = [e["partitions"] for e in latest if e is not None]
    flat = [p for ps in parts for p in ps]
    return parts if sorted(flat) == list(range(PARTITIONS)) else None


def wait_settled(workers: list[common.Spawned], timeout: float = 180.0) -> list[list[int]]:
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
        parts = assignment(workers)
        if parts is not None and time.monotonic() - stable_since >= SETTLE_QUIET_S:
            return parts
        time.sleep(0.1)
    raise RuntimeError(f"group did not settle within {timeout:.0f}s: {[w.last('assigned', 'revoked') for w in workers]}")


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


def run_workers(case: "Case", k: int, texts: list[str], expected: dict[str, int]) -> dict[str, Any]:
    """One run on a fresh broker: ``k`` workers join, settle, then drain ``texts``."""
    n, total = len(texts), len(texts) + sum(expected.values())
    with fresh_broker(case, f"{k}w") as broker:
        workers = spawn_workers(case, k)
        try:
            parts = wait_settled(workers)
            settled = [len(w.events) for w in workers]  # any later assigned/revoked event is a rebalance
            log(f"{k} worker(s) settled on partitions {parts}; loading {n} sentences")
            with common.Sampler(lambda: common.machine_sample(broker._proc.pid if broker._proc else None)) as sampler:
                t = time.perf_counter()
                asyncio.run(common.load_sentences(broker.bootstrap, texts))
                load_s = time.perf_counter() - t
                wait_handled(workers, total, timeout=n / 100 + 300)
                for w in workers:
                    w.signal()
                results = [w.wait(120) for w in workers]
            rebalanced = [len(w.events) for w in workers] != settled
        finally:
            for w in workers:
                w.kill()
        counts = asyncio.run(common.final_counts(broker.bootstrap, "word-counts"))
    return summarize(k, n, results, parts, sampler, load_s, counts == expected, rebalanced)


def summarize(k: int, n: int, results: list[dict[str, Any]], parts: list[list[int]], sampler: common.Sampler,
              load_s: float, counts_ok: bool, rebalanced: bool) -> dict[str, Any]:
    t0 = min(r["t0_monotonic"] for r in results)
    t1 = max(r["t_end_monotonic"] for r in results)
    seconds = t1 - t0
    broker = sampler.rate("broker_cpu_s", t0, t1)
    busy = sampler.rate("machine_busy_s", t0, t1)
    for r in results:
        r.pop("timeline", None)
    out = {
        "workers": k, "records": n, "seconds": seconds, "records_per_s": n / seconds,
        "cpu_s": sum(r["cpu_s"] for r in results),
        "worker_cpu_pct": [round(100 * r["cpu_s"] / seconds, 1) for r in results],
        "broker_cpu_pct": round(100 * broker, 1) if broker is not None else None,
        "machine_busy_cores": round(busy, 2) if busy is not None else None,
        "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        "total_peak_rss_mb": sum(r["peak_rss_mb"] for r in results),
        "partitions": parts, "rebalanced_during_run": rebalanced, "load_s": round(load_s, 2),
        "handled": [r["processed"] for r in results],
        # the busiest worker's share of the records: words are Zipf-distributed, so partitions are not equal
        "max_share": round(max(r["processed"] for r in results) / max(1, sum(r["processed"] for r in results)), 3),
        "correct": counts_ok and not rebalanced,
        "per_worker": results,
    }
    log(f"{k} worker(s): {out['records_per_s']:.0f} sentences/s over {seconds:.1f}s; worker CPU "
        f"{out['worker_cpu_pct']} %, broker {out['broker_cpu_pct']} %, machine {out['machine_busy_cores']} cores "
        f"busy; correct={out['correct']}")
    return out


def case_scale(case: "Case", n: int) -> dict[str, Any]:
    """A :mod:`bench.run` case: ``n`` sentences through 1 worker, then through 2 (``raw`` = the 1-worker run)."""
    texts = common.sentences(n)
    expected = common.count_words(texts)
    one = run_workers(case, 1, texts, expected)
    two = run_workers(case, 2, texts, expected)
    speedup = two["records_per_s"] / one["records_per_s"]
    ideal = 1 / two["max_share"]  # the most 2 workers can gain when the busiest one has that share
    row = {"ratio_is": "speedup: 2 workers / 1 worker, sentences/s (raw_* = the 1-worker run)",
           "speedup": round(speedup, 3), "ideal_speedup": round(ideal, 3), "one_worker_records_per_s": round(one["records_per_s"], 1),
           "two_workers_records_per_s": round(two["records_per_s"], 1),
           "broker_cpu_pct": {"1": one["broker_cpu_pct"], "2": two["broker_cpu_pct"]},
           "machine_busy_cores": {"1": one["machine_busy_cores"], "2": two["machine_busy_cores"]},
           "summary": (f"1 worker {one['records_per_s']:,.0f}/s -> 2 workers {two['records_per_s']:,.0f}/s, speedup "
                       f"{speedup:.2f} (at most {ideal:.2f}: the busiest worker handled {100 * two['max_share']:.0f} % "
                       f"of the records); broker CPU {one['broker_cpu_pct']} -> {two['broker_cpu_pct']} %, machine "
                       f"busy {one['machine_busy_cores']} -> {two['machine_busy_cores']} of 2 cores")}
    return {"words": sum(expected.values()), "agentstream": two, "raw": one, "row": row}
