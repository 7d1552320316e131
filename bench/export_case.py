"""Export benchmark: a table's changelog exported by Spark vs a raw aiokafka read into Arrow.

Standalone (starts its own dev broker, loads the changelog, runs both sides as subprocesses,
prints one line per side and writes ``artifacts/bench/export.json``)::

    python -m bench.export_case run [--n 1000000] [--master local[*]]

Or as the ``export`` case of :mod:`bench.run` (``case_export``).

Input: ``n`` changelog records of a JSON-keyed table (``n // 2`` distinct keys, each written
twice, JSON int values, 4 partitions, partitioned like table writes).

* raw side: one aiokafka consumer (no group) reads every partition from 0 up to its end (the
  fetch high watermark), decodes each record's JSON key and value with orjson and builds one
  Arrow record batch per fetched batch (:func:`to_arrow`); timed from the first getmany.
* agentstream side: ``read_changelog(latest=False)`` written to Parquet by a ``local[*]``
  session (JVM start and one small warm-up read untimed): records/s is changelog records read,
  decoded and written per second. The same run also times the read alone (the DataFrame computed
  into Spark's ``noop`` sink: ``read_records_per_s``) and ``latest=True`` (one row per key,
  computed in Spark: ``latest_records_per_s``).

Each side makes ``REPEAT`` (3) timed reads in its process, one after the other, and reports the
median (every run in ``runs_records_per_s``): on the shared 2-core machine one read can lose a
core to other processes, and the Spark side needs both cores (its first read also pays the
JVM's JIT compilation).

CPU and peak RSS of the Spark side include the JVM and the Python workers (this process's
descendants, from /proc), since that is where the work is done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common

TOPIC = "bench-export-t-changelog"  # App "bench-export", table "t"
PARTITIONS = 4


def changelog(n: int) -> list[tuple[bytes, bytes]]:
    keys = max(1, n // 2)
    return [(b'"k%09d"' % (i % keys), b"%d" % i) for i in range(n)]


async def load(bootstrap: str, n: int) -> None:
    from agentstream.transport.partitioner import default_partition

    await common.create_topics(bootstrap, [TOPIC], partitions=PARTITIONS, compacted=[TOPIC])
    await common.load_topic(bootstrap, TOPIC, changelog(n), partitioner=default_partition)


# -- process-tree stats ---------------------------------------------------------------------------


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu_seconds() -> float:
    """CPU of this process and every live descendant (the JVM, Spark's Python workers)."""
    total = common.cpu_seconds()
    for pid in _descendants(os.getpid()):
        total += common.proc_cpu_seconds(pid) or 0.0
    return total


def tree_peak_rss_mb() -> float:
    total = common.peak_rss_mb()
    for pid in _descendants(os.getpid()):
        try:
            total += common.peak_rss_mb(pid)
        except OSError:
            pass
    return total


# -- the two sides (each its own process) --------------------------------------------------------------


REPEAT = 3  # timed reads per side, in the same process; the median is the figure


async def raw_side(expect: int, repeat: int = REPEAT) -> dict[str, Any]:
    """``repeat`` raw reads of the whole changelog, one after the other; the median read's figures."""
    from agentstream.exporter.offsets import changelog_ranges

    bootstrap = os.environ["BENCH_BOOTSTRAP"]
    ranges = await changelog_ranges(bootstrap, TOPIC)  # the ends, as the export takes them (untimed)
    runs = [await _raw_read(bootstrap, ranges, expect) for _ in range(repeat)]
    ordered = sorted(runs, key=lambda r: r["records_per_s"])
    result = dict(ordered[len(ordered) // 2])
    result["runs_records_per_s"] = [round(r["records_per_s"], 1) for r in runs]
    result["correct"] = all(r["correct"] for r in runs)
    return result


async def _raw_read(bootstrap: str, ranges: Any, expect: int) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        max_partition_fetch_bytes=8 * 1024 * 1024,
        fetch_max_bytes=64 * 1024 * 1024,
    )
    await consumer.start()
    batches_out: list[Any] = []
    n_records = 0
    meter = common.Meter()
    try:
        ends = {TopicPartition(TOPIC, r.partition): r.end for r in ranges}
        consumer.assign(list(ends))
        for tp in ends:
            consumer.seek(tp, 0)
        remaining = {tp for tp, end in ends.items() if end > 0}
        meter.start()
        while remaining:
            batches = await consumer.getmany(*remaining, timeout_ms=500, max_records=65_536)
            for tp, messages in batches.items():
                batches_out.append(to_arrow(tp.partition, messages))
                n_records += len(messages)
                if messages[-1].offset + 1 >= ends[tp]:
                    remaining.discard(tp)
        result = meter.stop(n_records)
    finally:
        await consumer.stop()
    result["correct"] = n_records == expect == sum(b.num_rows for b in batches_out)
    return result


def to_arrow(partition: int, messages: Any) -> Any:
    """What a careful hand-written reader does: decode JSON key and value per record (orjson) and
    build one Arrow record batch per fetched batch (the columns the export writes, minus window)."""
    import orjson
    import pyarrow as pa

    loads = orjson.loads
    keys, values, offsets, timestamps, raw_keys, tombstones = [], [], [], [], [], []
    for m in messages:
        keys.append(loads(m.key))
        v = m.value
        values.append(None if v is None else loads(v))
        offsets.append(m.offset)
        timestamps.append(m.timestamp * 1000)
        raw_keys.append(m.key)
        tombstones.append(v is None)
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.string()),
            pa.array(values, pa.int64()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.timestamp("us", tz="UTC")),
            pa.array(raw_keys, pa.binary()),
            pa.array(tombstones, pa.bool_()),
            pa.array([partition] * n, pa.int32()),
        ],
        names=["key", "value", "offset", "timestamp", "raw_key", "tombstone", "partition"],
    )


def export_side(expect: int, master: str, out: Path) -> dict[str, Any]:
    import agentstream
    from agentstream.exporter.offsets import PartitionRange, snapshot_ranges
    from agentstream.exporter.spark import read_changelog, spark_session

    app = agentstream.App("bench-export", broker=os.environ["AGENTSTREAM_BROKER"], topic_partitions=PARTITIONS)
    table = app.Table("t", default=int)
    spark = spark_session(master, conf={"spark.sql.shuffle.partitions": PARTITIONS * 2})
    spark.sparkContext.setLogLevel("ERROR")
    # Warm-up (untimed): Python workers started, data source and Parquet writer code loaded.
    warm = [
        PartitionRange(r.partition, r.start, min(r.end, r.start + 10))
        for r in snapshot_ranges(os.environ["BENCH_BOOTSTRAP"], TOPIC)
    ]
    read_changelog(spark, app, table, latest=False, ranges=warm).write.mode("overwrite").parquet(str(out / "warm"))

    runs = []
    for _i in range(REPEAT):  # the median of REPEAT timed exports; the first pays the JVM's JIT warm-up
        cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
        read_changelog(spark, app, table, latest=False).write.mode("overwrite").parquet(str(out / "all"))
        runs.append((time.perf_counter() - t0, tree_cpu_seconds() - cpu0))
    reads = []
    for _i in range(REPEAT):  # the read alone: the DataFrame computed into Spark's no-op sink
        t0 = time.perf_counter()
        read_changelog(spark, app, table, latest=False).write.format("noop").mode("overwrite").save()
        reads.append(time.perf_counter() - t0)
    seconds, cpu = sorted(runs)[len(runs) // 2]
    read_seconds = sorted(reads)[len(reads) // 2]
    t1 = time.perf_counter()
    read_changelog(spark, app, table, latest=True).write.mode("overwrite").parquet(str(out / "latest"))
    latest_seconds = time.perf_counter() - t1
    rows_all = spark.read.parquet(str(out / "all")).count()
    rows_latest = spark.read.parquet(str(out / "latest")).count()
    rss = tree_peak_rss_mb()
    spark.stop()
    return {
        "records": rows_all,
        "seconds": seconds,
        "records_per_s": expect / seconds,
        "cpu_s": cpu,
        "runs_records_per_s": [round(expect / t, 1) for t, _ in runs],
        "runs_cpu_s": [round(c, 2) for _, c in runs],  # falls run by run as the JVM's JIT settles (docs/spark.md)
        "read_records_per_s": expect / read_seconds,
        "read_runs_records_per_s": [round(expect / t, 1) for t in reads],
        "latest_seconds": latest_seconds,
        "latest_records_per_s": expect / latest_seconds,
        "latest_rows": rows_latest,
        "peak_rss_mb": rss,
        "master": master,
        "correct": rows_all == expect and rows_latest == max(1, expect // 2),
    }


# -- orchestration --------------------------------------------------------------------------------------


def case_export(case: Any, n: int) -> dict[str, Any]:
    """A :mod:`bench.run` case: ``case`` is its ``Case`` (broker, scratch dir, subprocess runner)."""
    t = time.perf_counter()
    asyncio.run(load(case.broker.bootstrap, n))
    print(f"[bench] export: loaded {n} changelog records in {time.perf_counter() - t:.1f}s", flush=True)
    a = case.run(
        "agentstream", ["bench.export_case", "export", "--expect", str(n), "--out", str(case.scratch / "export")]
    )
    r = case.run("raw", ["bench.export_case", "raw", "--expect", str(n)])
    raw = r["records_per_s"]
    row = {
        "read_records_per_s": round(a["read_records_per_s"], 1),
        "read_ratio": round(a["read_records_per_s"] / raw, 3),
        "latest_records_per_s": round(a["latest_records_per_s"], 1),
        "summary": (
            f"median of {len(a['runs_records_per_s'])} reads per side: Parquet export "
            f"{a['records_per_s']:,.0f}/s (runs {a['runs_records_per_s']}), read alone (noop sink) "
            f"{a['read_records_per_s']:,.0f}/s (runs {a['read_runs_records_per_s']}), latest values "
            f"{a['latest_records_per_s']:,.0f}/s; raw aiokafka -> Arrow {raw:,.0f}/s (runs "
            f"{r['runs_records_per_s']}): export {a['records_per_s'] / raw:.2f}x, read alone "
            f"{a['read_records_per_s'] / raw:.2f}x"
        ),
    }
    return {"agentstream": a, "raw": r, "row": row}


def run_standalone(n: int, master: str) -> dict[str, Any]:
    from agentstream.devbroker import DevBroker
    from bench.run import ARTIFACTS, Case, machine

    logs = ARTIFACTS / "export"
    shutil.rmtree(logs, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="agentstream-bench-export-") as scratch:
        with DevBroker(log_path=logs / "broker.log") as broker:
            case = Case("export", broker, Path(scratch), False, logs)
            os.environ["BENCH_EXPORT_MASTER"] = master
            detail = case_export(case, n)
    a, r = detail["agentstream"], detail["raw"]
    row = {
        "case": "export",
        "n": n,
        "unit": "changelog records/s",
        "master": master,
        "export_records_per_s": round(a["records_per_s"], 1),
        "export_latest_records_per_s": round(a["latest_records_per_s"], 1),
        "raw_records_per_s": round(r["records_per_s"], 1),
        "ratio": round(a["records_per_s"] / r["records_per_s"], 3),
        "export_cpu_s": round(a["cpu_s"], 1),
        "raw_cpu_s": round(r["cpu_s"], 1),
        "export_peak_rss_mb": round(a["peak_rss_mb"], 1),
        "raw_peak_rss_mb": round(r["peak_rss_mb"], 1),
        "correct": bool(a["correct"] and r["correct"]),
        "machine": machine(),
        "detail": detail,
    }
    out = ARTIFACTS / "export.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(row, indent=2) + "\n")
    print(
        f"export n={n} ({master}): spark all-versions {a['records_per_s']:,.0f} records/s "
        f"({a['seconds']:.1f}s), latest {a['latest_records_per_s']:,.0f} records/s ({a['latest_seconds']:.1f}s); "
        f"raw aiokafka -> Arrow {r['records_per_s']:,.0f} records/s ({r['seconds']:.1f}s); "
        f"ratio {row['ratio']:.2f}; correct={row['correct']}; wrote {out}"
    )
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run", help="the whole comparison, standalone")
    run.add_argument("--n", type=int, default=1_000_000)
    run.add_argument("--master", default="local[*]")
    raw = sub.add_parser("raw")
    raw.add_argument("--expect", type=int, required=True)
    exp = sub.add_parser("export")
    exp.add_argument("--expect", type=int, required=True)
    exp.add_argument("--out", required=True)
    exp.add_argument("--master", default=None)
    args = p.parse_args(argv)
    if args.mode == "run":
        return 0 if run_standalone(args.n, args.master)["correct"] else 1
    if args.mode == "raw":
        result = asyncio.run(raw_side(args.expect))
        common.report(result)
    else:
        master = args.master or os.environ.get("BENCH_EXPORT_MASTER", "local[*]")
        common.report(export_side(args.expect, master, Path(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
