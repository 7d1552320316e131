"""Runs the agentstream side of a benchmark case in its own process and prints one result line.

``worker`` mode runs a real worker for an app module (exactly what ``agentstream -A MODULE
worker`` runs: :class:`agentstream.worker.worker.Worker` on uvloop) and watches it from a
coroutine on the same loop, using only public attributes:

* t0 = the first record fetched (``worker.fetcher.fetched > 0``, polled every 1 ms);
* "processed" = the tasks' agents have handled ``--expect`` records (``StreamTask.processed``);
* t_end = right after that, ``await worker.commit()`` returned: caches flushed to the changelog,
  every produced record acknowledged by the broker, input offsets committed. (The periodic
  commit would get there within ``commit_interval`` anyway; calling it at once keeps the
  end time from depending on where the 1 s commit tick falls.)
* with ``--until-signal`` "processed" is replaced by SIGUSR1: with several workers only the
  orchestrator, summing their ``progress`` events, knows when all the input is handled.

It prints ``started``/``assigned``/``revoked``/``progress`` event lines (:func:`bench.common.announce`)
for cases that drive the worker while it runs (latency, backlog, scale).

``restore`` mode replays a changelog topic into fresh RocksDB table partitions with
:class:`agentstream.tables.manager.Restorer`, as the TableManager does on assignment.

    python -m bench.as_runner worker --app apps.wordcount --expect N --data-dir DIR
    python -m bench.as_runner worker --app apps.wordcount --until-signal --progress 0.01 --data-dir DIR
    python -m bench.as_runner restore --topic T --partitions 4 --expect N --data-dir DIR
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import Meter, announce, report


class Watch:
    """What the orchestrator may want to follow while the worker runs: ``assigned`` events (after
    each assignment's tasks are running, so the worker is ready for input) and, with
    ``--progress``, ``progress`` lines (records handled so far) every that many seconds."""

    def __init__(self, worker: Any, progress_every: float) -> None:
        self.worker = worker
        self.progress_every = progress_every
        self.next_progress = 0.0
        self.announced: tuple[int, ...] | None = None
        self.assignments = 0

    def work(self, weights: list[float]) -> float:
        """The records handled weighted by their sub-topology's weight (``--stage-weights``)."""
        return float(
            sum(
                t.processed * (weights[tid.subtopology] if tid.subtopology < len(weights) else 1.0)
                for tid, t in list(self.worker.tasks.items())
            )
        )

    def poll(self) -> int:
        worker = self.worker
        processed: int = sum(t.processed for t in list(worker.tasks.values()))
        ready = worker.assigned.is_set()
        parts = tuple(sorted({tid.partition for tid in worker.tasks})) if ready else None
        if parts != self.announced:
            self.announced = parts
            if parts is None:
                announce("revoked")
            else:
                self.assignments += 1
                announce("assigned", partitions=list(parts), assignments=self.assignments)
        now = time.monotonic()
        if self.progress_every and now >= self.next_progress:
            announce("progress", processed=processed)
            self.next_progress = now + self.progress_every
        return processed


def _gc_knob() -> None:
    """BENCH_GC_THRESHOLD (experiment knob, e.g. "100000,50,100"): the collector's thresholds."""
    gc_threshold = os.environ.get("BENCH_GC_THRESHOLD")
    if gc_threshold:
        import gc

        gc.set_threshold(*(int(x) for x in gc_threshold.split(",")))


async def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    from agentstream.bulk_gc import worker_gc
    from agentstream.cli import load_app, setup_logging
    from agentstream.worker.worker import Worker

    app = load_app(args.app)
    setup_logging(args.loglevel, args.logfile)
    app.settings = app.settings.replace(
        broker=os.environ["AGENTSTREAM_BROKER"], data_dir=Path(args.data_dir), web_enabled=False
    )
    worker = Worker(app, install_signal_handlers=True)
    worker_gc()  # as `agentstream worker` runs: start-up's heap frozen, fewer young collections
    _gc_knob()  # BENCH_GC_THRESHOLD still wins
    finish = asyncio.Event()  # --until-signal: SIGUSR1 from the orchestrator ends the measurement
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, finish.set)
    announce("started")
    run = asyncio.ensure_future(worker.run())
    watch = Watch(worker, args.progress)
    weights = [float(w) for w in args.stage_weights.split(",")] if args.stage_weights else []
    meter = Meter()
    processed = 0
    t_processed = 0.0
    deadline = time.monotonic() + args.timeout
    while True:
        if run.done():
            raise SystemExit(f"worker exited early (crashed: {worker.crashed!r})")
        if time.monotonic() > deadline:
            worker.request_stop()
            await run
            raise SystemExit(f"timeout: processed {processed} of {args.expect}")
        processed = watch.poll()
        done = finish.is_set() if args.until_signal else processed >= args.expect
        fetcher = worker.fetcher
        if meter.t0 is None and (done or (fetcher is not None and fetcher.fetched > 0)):
            meter.start()
        if meter.t0 is None:
            await asyncio.sleep(0.001)
            continue
        meter.mark(watch.work(weights) if weights else processed)  # the timeline: the steady rate
        if done:
            t_processed = time.perf_counter()
            await worker.commit()
            break
        await asyncio.sleep(0.005)
    assert meter.t0 is not None
    result = meter.stop(
        args.records or (processed if args.until_signal else args.expect),
        processed=processed,
        process_s=t_processed - meter.t0,
        commits=worker.commits,
        **({"work_total": watch.work(weights)} if weights else {}),
        assignments=watch.assignments,
        partitions=list(watch.announced or ()),
    )
    worker.request_stop()
    code = await run
    result["exit_code"] = code
    return result


async def run_restore(args: argparse.Namespace) -> dict[str, Any]:
    import agentstream
    from agentstream.cli import setup_logging
    from agentstream.tables.manager import CHECKPOINT_FILE
    from agentstream.tables.partition import TablePartition
    from agentstream.tables.restore import Restorer
    from agentstream.tables.store import store_for
    from agentstream.transport.base import TP

    setup_logging(args.loglevel, args.logfile)
    app = agentstream.App(
        args.app_id, broker=os.environ["AGENTSTREAM_BROKER"], topic_partitions=args.partitions, data_dir=args.data_dir
    )
    table = app.Table(args.table, partitions=args.partitions)
    topic = table.changelog_topic.name
    if topic != args.topic:
        raise SystemExit(f"changelog topic is {topic!r}, the orchestrator loaded {args.topic!r}")
    root = Path(args.data_dir) / app.id / "tables" / table.name
    parts = {}
    for p in range(args.partitions):
        path = root / str(p)
        store = store_for(app.settings.store, path, memory_mb=app.settings.rocksdb_memory_mb)  # as in a worker
        parts[TP(topic, p)] = TablePartition(table, p, store, path / CHECKPOINT_FILE, app.settings.table_cache_size)
    # The restore consumer exactly as TableManager builds it (its poll size and fetch wait).
    from agentstream.tables.manager import RESTORE_MAX_POLL_RECORDS, restore_fetch_max_wait_ms

    settings = dict(app.consumer_settings())
    settings["max_poll_records"] = RESTORE_MAX_POLL_RECORDS
    settings["fetch_max_wait_ms"] = restore_fetch_max_wait_ms(app.settings)
    consumer = app.transport.consumer(group_id=None, **settings)
    await consumer.start()
    meter = Meter()
    try:
        meter.start()
        done = await Restorer(consumer, "bench restore").run(parts)
        result = meter.stop(done)
    finally:
        await consumer.stop()
    keys = 0
    for part in parts.values():
        keys += sum(1 for _ in part.store.items())
        part.store.close()
    result["keys"] = keys
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["worker", "restore"])
    p.add_argument("--app", default="apps.wordcount")
    p.add_argument("--app-id", default="bench-restore")
    p.add_argument("--table", default="restore")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument(
        "--stage-weights",
        default="",
        help="comma-separated weight of a record of each sub-topology in the timeline (the steady rate): "
        "e.g. a sentence split into 10 words weighs 10, a word counted 1",
    )
    p.add_argument("--expect", type=int, default=0, help="records the agents must handle in all")
    p.add_argument(
        "--until-signal",
        action="store_true",
        help="worker: run until SIGUSR1 (the orchestrator sums several workers' progress), not --expect",
    )
    p.add_argument(
        "--progress",
        type=float,
        default=0.0,
        help="worker: print a progress event (records handled so far) every that many seconds",
    )
    p.add_argument("--records", type=int, default=0, help="records to report (default: --expect)")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--loglevel", default="INFO")
    p.add_argument("--logfile", default=None)
    args = p.parse_args(argv)
    if not args.expect and not (args.mode == "worker" and args.until_signal):
        p.error("--expect is required (worker mode: or --until-signal)")
    import uvloop

    _gc_knob()

    coro = run_worker(args) if args.mode == "worker" else run_restore(args)
    report(uvloop.run(coro))
    return 0


if __name__ == "__main__":
    sys.exit(main())
