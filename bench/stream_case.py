"""Streaming read vs batch read of the same changelog (the ``export --follow`` source against ``export``'s).

Standalone: starts its own dev broker, loads ``n`` changelog records (``bench.export_case``'s table:
``n // 2`` JSON keys written twice, JSON int values, 4 partitions), starts one Spark session and
times, ``REPEAT`` times each, in turns (median reported):

* batch: ``read_changelog(latest=False)`` into Spark's ``noop`` sink (planning, reading, decoding,
  Arrow to the JVM);
* stream: ``read_changelog_stream`` into the ``noop`` sink with ``trigger(availableNow=True)`` from
  a fresh checkpoint: the same reading plus the offset probe, the checkpoint's offset and commit
  logs, and the query's start and stop (also reported without the start and stop: the micro-batch's
  own ``triggerExecution`` time from Spark's progress);
* stream, ``max.records.per.batch`` = n / 10: the same in about ten micro-batches (what a query
  catching up on a backlog in bounded batches pays per batch).

::

    python -m bench.stream_case [--n 1000000] [--master local[*]]

Prints one line per side and the ratios, and writes ``artifacts/bench/stream.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPEAT = 3


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(n: int, master: str, scratch: Path) -> dict[str, Any]:
    import agentstream
    from agentstream.exporter.spark import read_changelog, read_changelog_stream, spark_session
    from bench.export_case import PARTITIONS

    app = agentstream.App("bench-export", broker=os.environ["AGENTSTREAM_BROKER"], topic_partitions=PARTITIONS)
    table = app.Table("t", default=int)
    spark = spark_session(master, conf={"spark.sql.shuffle.partitions": PARTITIONS * 2})
    spark.sparkContext.setLogLevel("ERROR")

    def batch() -> float:
        t0 = time.perf_counter()
        read_changelog(spark, app, table, latest=False).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t0

    def stream(run: str, per_batch: int | None) -> tuple[float, int, int, float]:
        t0 = time.perf_counter()
        df = read_changelog_stream(spark, app, table, max_records_per_batch=per_batch)
        query = (
            df.writeStream.format("noop")
            .option("checkpointLocation", str(scratch / run))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - t0
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        rows = sum(int(p["numInputRows"]) for p in progress)
        in_batches = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000  # without query start/stop
        return seconds, rows, len(progress), in_batches

    batch()  # warm-up: Python workers, data source code, JIT (untimed)
    stream("warm", None)
    batches, streams, in_batch, bounded = [], [], [], []
    rows_ok = True
    for i in range(REPEAT):
        batches.append(batch())
        seconds, rows, _, inside = stream(f"s{i}", None)
        streams.append(seconds)
        in_batch.append(inside)
        rows_ok = rows_ok and rows == n
        seconds, rows, count, _ = stream(f"b{i}", max(1, n // 10))
        bounded.append((seconds, count))
        rows_ok = rows_ok and rows == n
    spark.stop()
    b, s, inside = _median(batches), _median(streams), _median(in_batch)
    bb = sorted(bounded)[len(bounded) // 2]
    return {
        "n": n,
        "master": master,
        "batch_records_per_s": n / b,
        "stream_records_per_s": n / s,
        "stream_micro_batch_records_per_s": n / inside,
        "stream_micro_batch_vs_batch": b / inside,
        "stream_bounded_records_per_s": n / bb[0],
        "stream_bounded_micro_batches": bb[1],
        "stream_vs_batch": b / s,
        "stream_bounded_vs_batch": b / bb[0],
        "runs_s": {
            "batch": batches,
            "stream": streams,
            "stream_micro_batch": in_batch,
            "stream_bounded": [x for x, _ in bounded],
        },
        "correct": rows_ok,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--master", default="local[*]")
    args = p.parse_args(argv)

    from agentstream.devbroker import DevBroker
    from bench.export_case import load
    from bench.run import ARTIFACTS

    with tempfile.TemporaryDirectory(prefix="agentstream-bench-stream-") as scratch:
        with DevBroker(log_path=ARTIFACTS / "stream" / "broker.log") as broker:
            os.environ["AGENTSTREAM_BROKER"] = broker.url
            t = time.perf_counter()
            asyncio.run(load(broker.bootstrap, args.n))
            print(f"[bench] stream: loaded {args.n} changelog records in {time.perf_counter() - t:.1f}s", flush=True)
            r = measure(args.n, args.master, Path(scratch))
    print(
        f"stream n={args.n} ({args.master}), median of {REPEAT}: batch read {r['batch_records_per_s']:,.0f} records/s; "
        f"stream (availableNow, one micro-batch) {r['stream_records_per_s']:,.0f} records/s = "
        f"{r['stream_vs_batch']:.2f}x batch (the micro-batch alone {r['stream_micro_batch_records_per_s']:,.0f} "
        f"records/s = {r['stream_micro_batch_vs_batch']:.2f}x); stream in {r['stream_bounded_micro_batches']} micro-batches "
        f"{r['stream_bounded_records_per_s']:,.0f} records/s = {r['stream_bounded_vs_batch']:.2f}x; "
        f"correct={r['correct']}"
    )
    out = ARTIFACTS / "stream.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(r, indent=2) + "\n")
    return 0 if r["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
