"""``make bench``: agentstream against hand-written aiokafka/rocksdict loops and Kafka Streams, on the dev
broker or (``BENCH_BROKER=kafka``) a 3-node Apache Kafka cluster.

Every case gets a fresh broker started here (the dev broker, tansu, in memory; with
``BENCH_BROKER=kafka`` a new 3-node KRaft cluster from tests/kafka_cluster with Kafka's own thread
pools and JVM settings, topics with replication factor 3), loads its input before anything is
timed, then runs the agentstream side, the raw loops and Kafka Streams one after the other, each in
its own subprocess (so peak RSS and CPU are per side), checks both outputs, and reports
records/s, the ratio agentstream/raw and each side's peak RSS.

Timed interval, the same for both sides of a case: from the first record fetched by the process
doing the work until every input record is handled, every output record it produced is
acknowledged by the broker (so visible to consumers) and its input offsets are committed
(restore: until the last changelog record is written and the stores are flushed to SST files).
Input is loaded before the process starts, so group join and start-up are not in the interval.

Cases:
  Baselines (bench/raw_loop.py, one loop for both): raw = aiokafka's send() per record; batch =
  aiokafka's batch API (BatchBuilder per partition, send_batch, partition memoised per key), the
  target. passthrough and wordcount run both; latency and scale run the batch one as well.

  Kafka Streams (bench/kstreams.py, Java, built with Maven once and cached): the same word count and
  pass-through, one stream thread, at_least_once, 1 s commits, its default 10 MB record cache in front of
  the RocksDB store; the row's kstreams_* fields are agentstream's ratios to it. BENCH_KSTREAMS=0 skips it;
  without Java or Maven the row says why in kstreams_skipped.

  passthrough  N records (100-byte values, 8-byte keys, 4 partitions) copied unchanged to another topic.
  wordcount    N sentences of ~10 words (vocabulary of 1000) through apps/wordcount.py (the real
               app: split -> repartition by word -> count in a RocksDB table -> counts topic);
               records/s counts input sentences (each becomes ~10 repartition + ~10 output records).
  restore      N-key changelog (16-byte keys, JSON int values, 4 partitions) into RocksDB; 3 runs per
               side, alternating, each into fresh stores; the median of each side.
  export       N-record changelog exported to Parquet by Spark vs a raw aiokafka read into Arrow (bench/export_case.py).
  latency      (bench/latency_case.py) end-to-end latency of the pass-through workload: N records
               paced at 1,000 records/s (issue 17's target; BENCH_LATENCY_RATE=R or =half: half of
               the lowest backlog throughput, measured first), each stamped with its send time,
               through agentstream, the raw loop and the batch-API loop; a probe consumer of the
               output topic reports p50/p99/max per side. The worker is joined and idle before the
               feed starts. ratio = p99 agentstream/raw (lower is better); p99_minus_* in ms.
  backlog      (bench/backlog_case.py) memory while draining an N-record pass-through backlog:
               RSS sampled every 0.25 s next to the records handled; RSS after the first
               min(100 000, N/5) records, peak/min after it, "flat" = all within +-20 %.
  scale-wordcount, scale-passthrough (``--cases scale`` runs both; bench/scale_case.py)
               2 worker processes against 1, each run on its own fresh broker, on apps/wordcount.py
               (N sentences; Zipf-skewed words) and on bench/apps/passthrough.py (N records with
               distinct keys: no skew); every topic has --scale-partitions partitions (default 8);
               workers settle in the group on empty topics before the input is loaded; also the
               broker's, the orchestrator's and the machine's CPU (where the cores went). The
               batch-API loop runs the same way with 1 and 2 processes (its own speedup: what the
               machine allows a hand-written loop). raw_* = agentstream's 1-worker run, batch_* =
               the batch loop's 2-process run; ratio = the speedup; 3 pairs, the median (--quick: 1).

Cases can add headline fields to their row (percentiles, speedup...) and a one-line summary.
A run of some of the cases keeps the other cases' rows of the results file (same size only).

    python -m bench.run [--quick] [--cases passthrough,wordcount,restore,latency,backlog,scale] [--profile]
                        [--scale-partitions 8] [--scale-repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentstream import compiled
from bench import brokers, common, kstreams
from bench.backlog_case import case_backlog
from bench.brokers import Broker
from bench.export_case import case_export
from bench.latency_case import case_latency
from bench.scale_case import DEFAULT_PARTITIONS, case_scale_passthrough, case_scale_wordcount

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts" / "bench"
RESULTS = Path(__file__).resolve().parent / "results.json"

FULL = {
    "passthrough": 500_000,
    "wordcount": 200_000,
    "restore": 1_000_000,
    "export": 1_000_000,
    "latency": 20_000,
    "backlog": 1_000_000,
    "large-state": 1_200_000,
    "scale-wordcount": 100_000,
    "scale-passthrough": 500_000,
}
QUICK = {
    "passthrough": 20_000,
    "wordcount": 5_000,
    "restore": 50_000,
    "export": 50_000,
    "latency": 3_000,
    "backlog": 50_000,
    "large-state": 50_000,
    "scale-wordcount": 5_000,
    "scale-passthrough": 20_000,
}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = 0.0
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem_gb = int(line.split()[1]) / 1024 / 1024
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "mem_gb": round(mem_gb, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


class Case:
    """Shared plumbing of one case: its broker, scratch dir, log dir and subprocess runs."""

    def __init__(self, name: str, broker: Broker, scratch: Path, profile: bool, logs: Path) -> None:
        self.name = name
        self.broker = broker
        self.scratch = scratch
        self.logs = logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.profile = profile

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(common.GROUP_ENV)
        env.update(
            {
                "AGENTSTREAM_BROKER": self.broker.url,
                "BENCH_BOOTSTRAP": self.broker.bootstrap,
                "BENCH_BROKER_PID": ",".join(str(pid) for pid in brokers.pids(self.broker)),
                "BENCH_REPLICATION_FACTOR": str(brokers.replication_factor()),
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
                "PYTHONHASHSEED": "0",
            }
        )
        return env

    def py_spy(self, side: str) -> list[str]:
        """``py-spy record`` writing ``SIDE.pyspy.txt`` (collapsed stacks) in the case's log dir;
        ``BENCH_PYSPY_NATIVE=1`` adds the C frames (the compiled modules' functions by name)."""
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if spy is None:
            raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
        native = ["--native"] if os.environ.get("BENCH_PYSPY_NATIVE") == "1" else []  # C frames: compiled modules
        return [
            spy,
            "record",
            "--rate",
            "250",
            *native,
            "--format",
            "raw",
            "--output",
            str(self.logs / f"{side}.pyspy.txt"),
        ]

    def command(self, side: str, argv: list[str], profile: bool | None = None) -> list[str]:
        cmd = [sys.executable, "-m", *argv]
        if self.profile if profile is None else profile:
            cmd = [*self.py_spy(side), "--", *cmd]
        return cmd

    def spawn(
        self, side: str, argv: list[str], extra_env: dict[str, str] | None = None, profile: bool | None = None
    ) -> common.Spawned:
        """Start ``python -m argv`` and return at once (for cases that drive the process while it runs).
        ``profile=False``: not under py-spy even with --profile (the case attaches it itself, see
        :meth:`attach_py_spy`)."""
        env = self.env()
        env.update(extra_env or {})
        with open(self.logs / f"{side}.stderr.log", "wb") as err:  # the child keeps its own copy of the fd
            popen = subprocess.Popen(
                self.command(side, argv, profile),
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        return common.Spawned(side, popen, self.logs)

    def attach_py_spy(self, side: str, pid: int) -> subprocess.Popen[bytes]:
        """py-spy attached to a running process (stop it with SIGINT: it then writes its file), so a
        profile covers only the part of the run the case wants (not start-up or the group join)."""
        with open(self.logs / f"{side}.pyspy.stderr.log", "wb") as err:
            return subprocess.Popen(
                [*self.py_spy(side), "--pid", str(pid)], stdin=subprocess.DEVNULL, stdout=err, stderr=err
            )

    def run(
        self,
        side: str,
        argv: list[str],
        extra_env: dict[str, str] | None = None,
        timeout: float = 900.0,
        cmd: list[str] | None = None,
    ) -> dict[str, Any]:
        """Run ``python -m argv`` (or ``cmd``, a whole command: the Java side) to its end; its result line."""
        env = self.env()
        env.update(extra_env or {})
        cmd = cmd or self.command(side, argv)
        stderr_path = self.logs / f"{side}.stderr.log"
        with open(stderr_path, "wb") as err:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, timeout=timeout)
        stdout = proc.stdout.decode(errors="replace")
        (self.logs / f"{side}.stdout.log").write_text(stdout)
        result = common.parse_result(stdout)
        if proc.returncode != 0 or result is None:
            tail = stderr_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name}/{side} failed (exit {proc.returncode}); stderr tail:\n{tail}")
        return result


# -- cases --------------------------------------------------------------------------------------------


KSTREAMS_TIMEOUT = 1800.0  # seconds: a full-size word count on the 3-node cluster of a loaded machine takes ~15 min


def run_kstreams(case: Case, mode: str, *args: str) -> dict[str, Any] | None:
    """The Kafka Streams side (bench/kstreams.py) of the word count or pass-through; None when BENCH_KSTREAMS=0,
    ``{"skipped": why}`` when Java or Maven cannot build it here."""
    if os.environ.get("BENCH_KSTREAMS", "1") == "0":
        return None
    try:
        cmd = kstreams.command(
            mode, "--state-dir", str(case.scratch / "kstreams"), "--timeout", str(int(KSTREAMS_TIMEOUT)), *args
        )
    except kstreams.KStreamsUnavailable as exc:
        log(f"{case.name}: no Kafka Streams side: {exc}")
        return {"skipped": str(exc)}
    return case.run("kstreams", [], cmd=cmd, timeout=KSTREAMS_TIMEOUT + 120)


KSTREAMS_DID = (
    "Kafka Streams 4.1.1 (bench/kstreams), 1 stream thread, at_least_once, commit.interval.ms=1000, "
    "statestore.cache.max.bytes=10 MB (its default), linger.ms=5, acks=all, max.poll.records=1000, "
    "JVM: " + " ".join(kstreams.JVM_OPTS)
)


async def _passthrough_setup(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    await common.create_topics(
        bootstrap, ["pt-in", "pt-out-agentstream", "pt-out-raw", "pt-out-batch", "pt-out-kstreams"]
    )
    await common.load_topic(bootstrap, "pt-in", records)


def case_passthrough(case: Case, n: int) -> dict[str, Any]:
    b = case.broker
    records = common.passthrough_records(n)
    expected = common.checksum(records)
    t = time.perf_counter()
    asyncio.run(_passthrough_setup(b.bootstrap, records))
    log(f"passthrough: loaded {n} records in {time.perf_counter() - t:.1f}s")
    del records
    app_env = {"BENCH_IN": "pt-in", "BENCH_OUT": "pt-out-agentstream", "BENCH_APP_ID": "bench-passthrough"}
    a = case.run(
        "agentstream",
        [
            "bench.as_runner",
            "worker",
            "--app",
            "bench.apps.passthrough",
            "--expect",
            str(n),
            "--data-dir",
            str(case.scratch / "as"),
            "--logfile",
            str(case.logs / "worker.log"),
        ],
        app_env,
    )
    log(f"passthrough: agentstream {a['records_per_s']:.0f} records/s")
    r = case.run(
        "raw",
        [
            "bench.raw_passthrough",
            "--in",
            "pt-in",
            "--out",
            "pt-out-raw",
            "--group",
            "raw-passthrough",
            "--expect",
            str(n),
        ],
    )
    log(f"passthrough: raw {r['records_per_s']:.0f} records/s")
    bt = case.run(
        "batch",
        [
            "bench.raw_passthrough",
            "--batch",
            "--in",
            "pt-in",
            "--out",
            "pt-out-batch",
            "--group",
            "batch-passthrough",
            "--expect",
            str(n),
        ],
    )
    log(f"passthrough: batch-API {bt['records_per_s']:.0f} records/s")
    ks = run_kstreams(
        case, "passthrough", "--app-id", "bench-kstreams-passthrough", "--in", "pt-in", "--out", "pt-out-kstreams",
        "--expect", str(n),
    )  # fmt: skip
    sides = [(a, "pt-out-agentstream"), (r, "pt-out-raw"), (bt, "pt-out-batch")]
    if ks is not None and "skipped" not in ks:
        log(f"passthrough: Kafka Streams {ks['records_per_s']:.0f} records/s")
        sides.append((ks, "pt-out-kstreams"))
    for side, topic in sides:
        got = asyncio.run(common.read_checksum(b.bootstrap, topic))
        side["correct"] = got == expected
        side["output"] = list(got)
    out = {"expected": list(expected), "agentstream": a, "raw": r, "batch": bt}
    if ks is not None:
        out["kstreams"] = ks
    return out


async def _wordcount_setup(bootstrap: str, texts: list[str]) -> None:
    await common.create_topics(
        bootstrap,
        [
            "sentences",
            "raw-wordcount-words",
            "raw-word-counts",
            "batch-wordcount-words",
            "batch-word-counts",
            "kstreams-word-counts",
        ],
    )
    await common.load_sentences(bootstrap, texts)


def case_wordcount(case: Case, n: int) -> dict[str, Any]:
    b = case.broker
    texts = common.sentences(n)
    expected = common.count_words(texts)
    words_total = sum(expected.values())
    t = time.perf_counter()
    asyncio.run(_wordcount_setup(b.bootstrap, texts))
    log(
        f"wordcount: loaded {n} sentences ({words_total} words, {len(expected)} distinct) "
        f"in {time.perf_counter() - t:.1f}s"
    )
    del texts
    a = case.run(
        "agentstream",
        [
            "bench.as_runner",
            "worker",
            "--app",
            "apps.wordcount",
            "--expect",
            str(n + words_total),
            "--records",
            str(n),
            "--stage-weights",
            f"{words_total / n},1",  # a sentence weighs its words in the steady rate, as in the loops
            "--data-dir",
            str(case.scratch / "as"),
            "--logfile",
            str(case.logs / "worker.log"),
        ],
    )
    log(f"wordcount: agentstream {a['records_per_s']:.0f} sentences/s")
    r = case.run(
        "raw",
        [
            "bench.raw_wordcount",
            "--in",
            "sentences",
            "--words",
            "raw-wordcount-words",
            "--out",
            "raw-word-counts",
            "--group",
            "raw-wordcount",
            "--sentences",
            str(n),
            "--words-total",
            str(words_total),
        ],
    )
    log(f"wordcount: raw {r['records_per_s']:.0f} sentences/s")
    bt = case.run(
        "batch",
        [
            "bench.raw_wordcount",
            "--batch",
            "--in",
            "sentences",
            "--words",
            "batch-wordcount-words",
            "--out",
            "batch-word-counts",
            "--group",
            "batch-wordcount",
            "--sentences",
            str(n),
            "--words-total",
            str(words_total),
        ],
    )
    log(f"wordcount: batch-API {bt['records_per_s']:.0f} sentences/s")
    ks = run_kstreams(
        case, "wordcount", "--app-id", "bench-kstreams-wordcount", "--in", "sentences", "--out",
        "kstreams-word-counts", "--sentences", str(n), "--words-total", str(words_total),
    )  # fmt: skip
    sides = [("agentstream", a, "word-counts"), ("raw", r, "raw-word-counts"), ("batch", bt, "batch-word-counts")]
    if ks is not None and "skipped" not in ks:
        log(f"wordcount: Kafka Streams {ks['records_per_s']:.0f} sentences/s")
        sides.append(("kstreams", ks, "kstreams-word-counts"))
    for name, side, topic in sides:
        got = asyncio.run(common.final_counts(b.bootstrap, topic))
        side["correct"] = got == expected
        if got != expected:
            diff = sorted(w for w in set(got) | set(expected) if got.get(w) != expected.get(w))
            log(
                f"wordcount: {name} counts differ for {len(diff)} words, e.g. "
                + ", ".join(f"{w}: {got.get(w)} != {expected.get(w)}" for w in diff[:5])
            )
    out = {"words": words_total, "distinct_words": len(expected), "agentstream": a, "raw": r, "batch": bt}
    if ks is not None:
        out["kstreams"] = ks
    return out


RESTORE_TOPIC = "bench-restore-restore-changelog"


async def _restore_setup(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    from agentstream.transport.partitioner import default_partition

    await common.create_topics(bootstrap, [RESTORE_TOPIC], compacted=[RESTORE_TOPIC])
    # Partitioned like a table's writes outside an agent would be (the changelog of partition p
    # only ever holds keys of partition p).
    await common.load_topic(bootstrap, RESTORE_TOPIC, records, partitioner=default_partition)


RESTORE_REPEAT = 3


def case_restore(case: Case, n: int) -> dict[str, Any]:
    """RESTORE_REPEAT restores per side, alternating (agentstream, raw, agentstream, ...), each
    into fresh stores; each side's median run is its figure (every run in ``runs_records_per_s``)."""
    b = case.broker
    records = common.changelog_records(n)
    t = time.perf_counter()
    asyncio.run(_restore_setup(b.bootstrap, records))
    log(f"restore: loaded {n} changelog records in {time.perf_counter() - t:.1f}s")
    del records
    runs: dict[str, list[dict[str, Any]]] = {"agentstream": [], "raw": []}
    same_input = ["--topic", RESTORE_TOPIC, "--partitions", "4", "--expect", str(n)]  # both sides
    for i in range(RESTORE_REPEAT):
        a = case.run(
            "agentstream",
            [
                "bench.as_runner",
                "restore",
                *same_input,
                "--data-dir",
                str(case.scratch / f"as{i}"),
                "--logfile",
                str(case.logs / "restore.log"),
            ],
        )
        r = case.run("raw", ["bench.raw_restore", *same_input, "--data-dir", str(case.scratch / f"raw{i}")])
        log(
            f"restore: agentstream {a['records_per_s']:.0f}, raw {r['records_per_s']:.0f} records/s "
            f"({a['records_per_s'] / r['records_per_s']:.2f}x)"
        )
        runs["agentstream"].append(a)
        runs["raw"].append(r)
    out: dict[str, Any] = {}
    for side, results in runs.items():
        for res in results:
            res["correct"] = res["records"] == n and res["keys"] == n
        median = dict(sorted(results, key=lambda x: x["records_per_s"])[len(results) // 2])
        median["runs_records_per_s"] = [round(x["records_per_s"], 1) for x in results]
        median["correct"] = all(x["correct"] for x in results)
        out[side] = median
    pairs = [round(x["records_per_s"] / y["records_per_s"], 3) for x, y in zip(runs["agentstream"], runs["raw"])]
    out["row"] = {
        "pair_ratios": pairs,
        "summary": f"median of {RESTORE_REPEAT} runs per side, alternating: agentstream "
        f"{out['agentstream']['runs_records_per_s']}, raw {out['raw']['runs_records_per_s']} "
        f"records/s; ratio per pair {pairs}",
    }
    return out


LARGE_KEYS = 1_000_000  # distinct keys of the large-state case (BENCH_LARGE_KEYS)


async def _large_setup(bootstrap: str, records: list[tuple[bytes, bytes]]) -> None:
    await common.create_topics(bootstrap, ["large-in", "raw-large-changelog", "batch-large-changelog"])
    await common.load_topic(bootstrap, "large-in", records)


def case_large_state(case: Case, n: int) -> dict[str, Any]:
    """N records over min(N, BENCH_LARGE_KEYS) distinct keys, each counted in 3 hopping windows in
    RocksDB (bench/apps/large_state.py) against bench/raw_large_state.py (the same work by hand)."""
    b = case.broker
    keys = min(n, int(os.environ.get("BENCH_LARGE_KEYS", LARGE_KEYS)))
    records = [(b"u%08d" % (i % keys), b"1") for i in range(n)]
    t = time.perf_counter()
    asyncio.run(_large_setup(b.bootstrap, records))
    log(f"large-state: loaded {n} records over {keys} keys in {time.perf_counter() - t:.1f}s")
    del records
    # a side's time limit grows with the input: 5M keys run at a few thousand records/s here
    limit = max(600.0, n / 1500)
    a = case.run(
        "agentstream",
        [
            "bench.as_runner",
            "worker",
            "--app",
            "bench.apps.large_state",
            "--timeout",
            str(limit),
            "--expect",
            str(n),
            "--data-dir",
            str(case.scratch / "as"),
            "--logfile",
            str(case.logs / "worker.log"),
        ],
        timeout=limit + 300,
    )
    log(f"large-state: agentstream {a['records_per_s']:.0f} records/s")
    sides = {"agentstream": a}
    for side, extra in (("raw", []), ("batch", ["--batch"])):
        r = case.run(
            side,
            [
                "bench.raw_large_state",
                *extra,
                "--in",
                "large-in",
                "--changelog",
                f"{side}-large-changelog",
                "--group",
                f"{side}-large",
                "--records",
                str(n),
                "--data-dir",
                str(case.scratch / side),
            ],
            timeout=limit + 300,
        )
        log(f"large-state: {side} {r['records_per_s']:.0f} records/s, {r['window_keys']} window keys")
        sides[side] = r
    # the same windows on both sides: the raw stores hold every (key, window) once; agentstream's
    # changelog holds each (key, window) it updated (read back: latest per key)
    from agentstream.tables.query import STREAM_TIME_KEY  # each partition's stream-time mark: not a window

    seen: set[bytes] = set()

    def on_batch(messages: list[Any]) -> None:
        seen.update(m.key for m in messages)

    asyncio.run(common.read_topic(b.bootstrap, "bench-large-views-changelog", on_batch=on_batch))
    seen.discard(STREAM_TIME_KEY)
    a["window_keys"] = len(seen)
    for side in sides.values():
        side["correct"] = side.get("window_keys") == sides["raw"]["window_keys"]
    return {
        "keys": keys,
        "rocksdb": "both: lz4, bloom 10 bits; agentstream: rocksdb_memory_mb 64 (one block cache with index and "
        "filter blocks, memtables flushed at 32 MB for all stores, 8 MB each, L0 compaction at 8 files), table_cache_size 10000; raw: 16 MB "
        "memtables x4 and RocksDB's default 32 MB block cache per DB",
        **sides,
    }


CASES = {
    "passthrough": case_passthrough,
    "wordcount": case_wordcount,
    "restore": case_restore,
    "export": case_export,
    "latency": case_latency,
    "backlog": case_backlog,
    "large-state": case_large_state,
    "scale-wordcount": case_scale_wordcount,
    "scale-passthrough": case_scale_passthrough,
}
# --cases shorthands
ALIASES = {"scale": ["scale-wordcount", "scale-passthrough"]}
UNITS = {
    "passthrough": "records/s",
    "wordcount": "sentences/s",
    "restore": "changelog records/s",
    "export": "changelog records/s",
    "latency": "records/s (paced)",
    "backlog": "records/s",
    "large-state": "records/s",
    "scale-wordcount": "sentences/s",
    "scale-passthrough": "records/s",
}
# What the row's "ratio" is, where it is not agentstream/raw in records/s (a case's "row" sets it).
RATIO_IS = "agentstream/raw records/s"


def logs_dir(name: str, profile: bool) -> Path:
    """artifacts/bench/CASE (profiled runs: artifacts/bench/CASE-profile, so plain runs keep them)."""
    return ARTIFACTS / (f"{name}-profile" if profile else name)


def loadavg() -> list[float]:
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return []


def run_case(name: str, n: int, profile: bool) -> dict[str, Any]:
    logs = logs_dir(name, profile)
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix=f"agentstream-bench-{name}-") as scratch:
        broker = brokers.new_broker(logs / "broker.log")
        broker.start()
        try:
            case = Case(name, broker, Path(scratch), profile, logs)
            load_before = loadavg()
            t = time.perf_counter()
            detail = CASES[name](case, n)
            wall = time.perf_counter() - t
        finally:
            broker.stop()
    a, r, bt = detail["agentstream"], detail["raw"], detail.get("batch")
    ks = detail.get("kstreams")
    ks = None if ks is None or "skipped" in ks else ks
    for side in (a, r, bt, ks):
        if side is not None:
            side["records_per_cpu_s"] = round(side["records"] / side["cpu_s"], 1) if side["cpu_s"] else None
            steady_fields(side)
    row = {
        "case": name,
        "n": n,
        "unit": UNITS[name],
        "agentstream_records_per_s": round(a["records_per_s"], 1),
        "raw_records_per_s": round(r["records_per_s"], 1),
        "ratio": round(a["records_per_s"] / r["records_per_s"], 3) if r["records_per_s"] else None,
        "agentstream_peak_rss_mb": round(a["peak_rss_mb"], 1),
        "raw_peak_rss_mb": round(r["peak_rss_mb"], 1),
        "correct": bool(
            a["correct"] and r["correct"] and (bt is None or bt["correct"]) and (ks is None or ks["correct"])
        ),
        "broker": brokers.kind(),
        "agentstream_correct": bool(a["correct"]),
        "raw_correct": bool(r["correct"]),
        "agentstream_records_per_cpu_s": a["records_per_cpu_s"],
        "raw_records_per_cpu_s": r["records_per_cpu_s"],
        "cpu_ratio": round(a["records_per_cpu_s"] / r["records_per_cpu_s"], 3)
        if a["records_per_cpu_s"] and r["records_per_cpu_s"]
        else None,
        "case_wall_s": round(wall, 1),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "profiled": profile,
        "ratio_is": RATIO_IS,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "detail": detail,
    }
    if bt is not None:  # the batch-API baseline: the target the ratios are judged against
        row.update(
            {
                "batch_records_per_s": round(bt["records_per_s"], 1),
                "batch_ratio": round(a["records_per_s"] / bt["records_per_s"], 3) if bt["records_per_s"] else None,
                "batch_cpu_ratio": round(a["records_per_cpu_s"] / bt["records_per_cpu_s"], 3)
                if a["records_per_cpu_s"] and bt["records_per_cpu_s"]
                else None,
                "batch_peak_rss_mb": round(bt["peak_rss_mb"], 1),
                "batch_correct": bool(bt["correct"]),
                "batch_steady_ratio": round(a["steady_per_s"] / bt["steady_per_s"], 3)
                if a.get("steady_per_s") and bt.get("steady_per_s")
                else None,
            }
        )
    if ks is not None:  # Kafka Streams: the system whose architecture agentstream follows
        row.update(kstreams_fields(a, ks))
    elif "kstreams" in detail:
        row["kstreams_skipped"] = detail["kstreams"]["skipped"]
    row.update(detail.pop("row", {}))  # a case's own headline figures (latency percentiles, speedup...)
    if profile:
        row["profile"] = {
            f.name.removesuffix(".pyspy.txt"): str(f.relative_to(ROOT)) for f in sorted(logs.glob("*.pyspy.txt"))
        }
    return row


def steady_fields(side: dict[str, Any]) -> None:
    """The side's steady rate (:func:`bench.common.steady_rate`, in the case's unit) from its timeline,
    which the row keeps downsampled to 60 samples."""
    timeline, total = side.pop("timeline", None), side.get("work_total") or side.get("processed")
    if timeline and total:
        rate = common.steady_rate([(t, n) for t, n in timeline], total)
        side["steady_per_s"] = None if rate is None else round(rate * side["records"] / total, 1)
        side["timeline"] = common.downsample(timeline, 60)


def kstreams_fields(a: dict[str, Any], ks: dict[str, Any]) -> dict[str, Any]:
    """agentstream against Kafka Streams: records/s, records per CPU-second and peak RSS as ratios
    agentstream/Kafka Streams (> 1: agentstream faster, cheaper in CPU, larger in memory), and CPU per record
    as agentstream's over Kafka Streams' (the issue's "within 2x")."""
    return {
        "kstreams_records_per_s": round(ks["records_per_s"], 1),
        "kstreams_ratio": round(a["records_per_s"] / ks["records_per_s"], 3) if ks["records_per_s"] else None,
        "kstreams_cpu_ratio": round(a["records_per_cpu_s"] / ks["records_per_cpu_s"], 3)
        if a["records_per_cpu_s"] and ks["records_per_cpu_s"]
        else None,
        "kstreams_cpu_per_record_ratio": round(ks["records_per_cpu_s"] / a["records_per_cpu_s"], 3)
        if a["records_per_cpu_s"] and ks["records_per_cpu_s"]
        else None,
        "kstreams_peak_rss_mb": round(ks["peak_rss_mb"], 1),
        "kstreams_rss_ratio": round(a["peak_rss_mb"] / ks["peak_rss_mb"], 3) if ks["peak_rss_mb"] else None,
        "kstreams_records_per_cpu_s": ks["records_per_cpu_s"],
        "kstreams_correct": bool(ks["correct"]),
        "kstreams_did": KSTREAMS_DID,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'case':<17} {'n':>9} {'agentstream/s':>14} {'raw/s':>11} {'ratio':>6} "
        f"{'RSS as MB':>10} {'RSS raw MB':>11} {'as CPU%':>8} {'raw CPU%':>9} {'ratio/CPU':>9} {'correct':>8}"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        a, r = row["detail"]["agentstream"], row["detail"]["raw"]
        print(
            f"{row['case']:<17} {row['n']:>9} {row['agentstream_records_per_s']:>14,.0f} "
            f"{row['raw_records_per_s']:>11,.0f} {row['ratio'] or 0:>6.2f} {row['agentstream_peak_rss_mb']:>10.1f} "
            f"{row['raw_peak_rss_mb']:>11.1f} {100 * a['cpu_s'] / a['seconds']:>7.0f}% "
            f"{100 * r['cpu_s'] / r['seconds']:>8.0f}% {row['cpu_ratio'] or 0:>9.2f} {str(row['correct']):>8}"
        )
    print(
        "units: passthrough records/s, wordcount input sentences/s (~10 words each), restore changelog records/s;"
        " CPU% = the working process's CPU over the timed interval (100% = one core);"
        " ratio/CPU = agentstream/raw in records per CPU-second of the working process;"
        " scale-*: agentstream = the 2-worker run (CPU% of both workers summed), raw = the 1-worker run,"
        " batch = the batch-API loop's 2-process run"
    )
    batch_rows = [row for row in rows if "batch_ratio" in row]
    if batch_rows:
        print()
        print("against the batch-API loop (aiokafka create_batch/send_batch, partition memoised per key):")
        head = (
            f"{'case':<17} {'agentstream/s':>14} {'batch/s':>11} {'ratio':>6} {'steady':>7} {'ratio/CPU':>9} "
            f"{'CPU/rec':>8} {'correct':>8}"
        )
        print(head)
        print("-" * len(head))
        for row in batch_rows:
            batch_cpu = row.get("batch_cpu_ratio")
            steady = "-" if row.get("batch_steady_ratio") is None else f"{row['batch_steady_ratio']:.2f}"
            print(
                f"{row['case']:<17} {row['agentstream_records_per_s']:>14,.0f} {row['batch_records_per_s']:>11,.0f} "
                f"{row['batch_ratio'] or 0:>6.2f} {steady:>7} {batch_cpu or 0:>9.2f} "
                f"{1 / batch_cpu if batch_cpu else 0:>8.2f} {str(row['batch_correct']):>8}"
            )
        print("steady: the ratio of the rates between 20 % and 80 % of the work done (bench.common.steady_rate);")
        print("CPU/rec: agentstream's CPU per record over the batch loop's (1 / ratio/CPU)")
    ks_rows = [row for row in rows if "kstreams_ratio" in row]
    if ks_rows:
        print()
        print("against Kafka Streams (one stream thread, at_least_once, 1 s commits; CPU/rec = agentstream's CPU per")
        print("record over Kafka Streams'; beside it the same ratios against the batch-API loop):")
        head = (
            f"{'case':<17} {'agentstream/s':>14} {'kstreams/s':>11} {'ratio':>6} {'CPU/rec':>8} {'RSS KS MB':>10} "
            f"{'RSS ratio':>9} {'batch ratio':>11} {'batch CPU/rec':>13} {'correct':>8}"
        )
        print(head)
        print("-" * len(head))
        for row in ks_rows:
            batch_cpu = row.get("batch_cpu_ratio")
            print(
                f"{row['case']:<17} {row['agentstream_records_per_s']:>14,.0f} {row['kstreams_records_per_s']:>11,.0f} "
                f"{row['kstreams_ratio'] or 0:>6.2f} {row['kstreams_cpu_per_record_ratio'] or 0:>8.2f} "
                f"{row['kstreams_peak_rss_mb']:>10.1f} {row['kstreams_rss_ratio'] or 0:>9.2f} "
                f"{row.get('batch_ratio') or 0:>11.2f} {1 / batch_cpu if batch_cpu else 0:>13.2f} "
                f"{str(row['kstreams_correct']):>8}"
            )
    for row in rows:
        if row.get("summary"):
            print(f"{row['case']}: {row['summary']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny inputs: a smoke run well under a minute")
    p.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated subset of {','.join(CASES)} (scale = both scale cases)",
    )
    p.add_argument("--n", type=int, default=None, help="override the input size of every selected case")
    p.add_argument(
        "--profile",
        action="store_true",
        help="run both sides under py-spy (artifacts/bench/CASE/SIDE.pyspy.txt; summarise with "
        "python -m bench.profile_report FILE); figures of such a run are not the headline ones",
    )
    p.add_argument(
        "--output",
        default=None,
        help=f"results file (default {RESULTS.relative_to(ROOT)}; "
        "--profile/--n runs default to artifacts/bench/results.json)",
    )
    p.add_argument(
        "--scale-partitions",
        type=int,
        default=None,
        help=f"partitions of every topic of the scale cases (default {DEFAULT_PARTITIONS}; env BENCH_SCALE_PARTITIONS)",
    )
    p.add_argument(
        "--scale-repeat",
        type=int,
        default=None,
        help="scale cases: run this many 1-worker/2-worker pairs and report the median (default 3, "
        "--quick 1; env BENCH_SCALE_REPEAT)",
    )
    args = p.parse_args(argv)
    if args.scale_repeat is not None:
        os.environ["BENCH_SCALE_REPEAT"] = str(max(1, args.scale_repeat))
    elif not args.quick:
        os.environ.setdefault("BENCH_SCALE_REPEAT", "3")  # issue 17: the median of 3 pairs
    if args.scale_partitions is not None:
        if args.scale_partitions < 2:
            p.error("--scale-partitions must be >= 2 (two workers)")
        os.environ["BENCH_SCALE_PARTITIONS"] = str(args.scale_partitions)
    names = [n for c in args.cases.split(",") if c.strip() for n in ALIASES.get(c.strip(), [c.strip()])]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    os.environ["BENCH_BROKER"] = brokers.kind()  # fails early on an unknown kind
    os.environ["BENCH_REPLICATION_FACTOR"] = str(brokers.replication_factor())  # topics this process creates
    sizes = QUICK if args.quick else FULL
    started = time.perf_counter()
    rows = []
    for name in names:
        n = args.n or sizes[name]
        log(f"case {name}: n={n}")
        rows.append(run_case(name, n, args.profile))
    total = time.perf_counter() - started
    print()
    print_table(rows)
    print(f"agentstream hot path: {compiled.BUILD} (agentstream/compiled.py)")
    print(f"total {total:.0f}s")
    if args.output:
        out = Path(args.output)
    elif args.profile or args.n or (args.quick and RESULTS.exists() and not _is_quick(RESULTS)):
        out = ARTIFACTS / "results.json"  # keep the committed full-run figures
    else:
        out = RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "machine": machine(),
        "quick": args.quick,
        "command": " ".join(
            [Path(sys.executable).name, "-m", "bench.run", *(argv if argv is not None else sys.argv[1:])]
        ),
        "total_s": round(total, 1),
        "build": compiled.BUILD,
        "broker": brokers.kind(),  # tansu (the dev broker) or kafka (a 3-node Apache Kafka cluster)  # the agentstream side's hot path: compiled (mypyc) or pure Python
        "timed_interval": "first record fetched -> all input handled, all output acknowledged by the broker, "
        "input offsets committed (restore: -> last record written, stores flushed)",
        "results": _merge_rows(out, rows, args.quick),
    }
    out.write_text(json.dumps(doc, indent=2) + "\n")
    log(f"wrote {out}")
    return 0 if all(r["correct"] for r in rows) else 1


def _merge_rows(out: Path, rows: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    """This run's rows, plus the rows of other cases already in ``out`` from a run of the same size,
    so ``--cases X`` updates X's figures without dropping the others (each row has its own date
    and load average)."""
    try:
        old = json.loads(out.read_text())
    except (OSError, ValueError):
        return rows
    if bool(old.get("quick")) != quick:
        return rows
    done = {r["case"] for r in rows}
    kept = [r for r in old.get("results", []) if r.get("case") not in done and r.get("case") in CASES]
    order = list(CASES)
    return sorted(kept + rows, key=lambda r: order.index(r["case"]))


def _is_quick(path: Path) -> bool:
    try:
        return bool(json.loads(path.read_text()).get("quick"))
    except (OSError, ValueError):
        return True


if __name__ == "__main__":
    sys.exit(main())
