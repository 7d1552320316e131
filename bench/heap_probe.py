"""Where a large-state worker's memory goes: the dev broker, N records over K keys in ``large-in``,
the large-state app (bench/apps/large_state.py) run in this process, and every PERIOD seconds its
RSS, commit durations, the table partitions' cache and pending sizes, the changelog send queue and
(TM=1) the top tracemalloc allocation sites, diffed against the previous snapshot.

    cd <tree> && N=1200000 K=1000000 PERIOD=5 TM=0 python -m bench.heap_probe
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

N = int(os.environ.get("N", "600000"))
K = int(os.environ.get("K", "500000"))
PERIOD = float(os.environ.get("PERIOD", "15"))
TM = os.environ.get("TM", "1") == "1"


def print_rss() -> None:
    for line in open("/proc/self/status"):
        if line.startswith(("VmRSS", "VmHWM")):
            print("   ", line.strip(), flush=True)


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads, summed by thread name (RocksDB names its pools
    ``rocksdb:low`` (compaction) and ``rocksdb:high`` (flush))."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            name = open(f"/proc/self/task/{tid}/comm").read().strip()
            fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def print_rocksdb(worker: Any) -> None:
    tm = worker.tables
    if tm is None:
        return
    stores = [p.store for t in tm.tables for p in tm._held(t).values()]
    if not stores or not hasattr(stores[0], "property_int"):
        return
    l0 = [s.property_int("rocksdb.num-files-at-level0") for s in stores]
    sst = sum(s.property_int("rocksdb.total-sst-files-size") or 0 for s in stores)
    readers = sum(s.property_int("rocksdb.estimate-table-readers-mem") or 0 for s in stores)
    print(
        "    rocksdb budget",
        stores[0].memory.usage(),
        "L0 files",
        l0,
        f"sst {sst >> 20} MiB, table readers {readers >> 20} MiB",
        flush=True,
    )


def print_tables(worker: Any) -> None:
    tm = worker.tables
    if tm is None:
        return
    parts = [p for t in tm.tables for p in tm._held(t).values()]
    print(
        "    sends",
        sum(len(i) for _, i in tm._sends),
        "cache",
        [len(p.cache) for p in parts],
        "pending",
        [len(p.pending) for p in parts],
        flush=True,
    )


async def main() -> None:
    from agentstream.bulk_gc import worker_gc
    from agentstream.cli import load_app, setup_logging
    from agentstream.devbroker import DevBroker
    from agentstream.worker.worker import Worker
    from bench import common

    tmp = Path(tempfile.mkdtemp(prefix="heap-probe"))
    broker = DevBroker(log_path=tmp / "broker.log")
    await broker.astart()
    try:
        os.environ["AGENTSTREAM_BROKER"] = broker.url
        records = [(b"u%08d" % (i % K), b"1") for i in range(N)]
        await common.create_topics(broker.bootstrap, ["large-in"])
        await common.load_topic(broker.bootstrap, "large-in", records)
        del records
        app = load_app("bench.apps.large_state")
        setup_logging("warning", str(tmp / "worker.log"))
        app.settings = app.settings.replace(broker=broker.url, data_dir=tmp / "data", web_enabled=False)
        worker = Worker(app, install_signal_handlers=False)
        worker_gc()
        commit = worker.commit
        durations: list[float] = []

        async def timed_commit(*args: Any, **kwargs: Any) -> bool:
            t = time.perf_counter()
            try:
                return await commit(*args, **kwargs)
            finally:
                durations.append(round(time.perf_counter() - t, 1))

        worker.commit = timed_commit  # type: ignore[method-assign]
        if TM:
            tracemalloc.start()
        run = asyncio.ensure_future(worker.run())
        previous = None
        t0 = time.perf_counter()
        due = t0 + PERIOD
        while not run.done():
            await asyncio.sleep(0.5)
            processed = sum(task.processed for task in list(worker.tasks.values()))
            now = time.perf_counter()
            if now < due and processed < N:
                continue
            due = now + PERIOD
            print(f"== t={now - t0:.0f}s processed={processed} commits={worker.commits}", flush=True)
            print_rss()
            print("    commit durations", durations[-8:], flush=True)
            print_tables(worker)
            print_rocksdb(worker)
            print("    cpu", round(sum(os.times()[:2]), 1), thread_cpu(), flush=True)
            if TM:
                snap = tracemalloc.take_snapshot()
                stats = snap.compare_to(previous, "lineno") if previous is not None else snap.statistics("lineno")
                for stat in stats[:14]:
                    print("    ", str(stat)[:220], flush=True)
                previous = snap
            if processed >= N:
                await worker.commit()
                break
        worker.request_stop()
        await run
    finally:
        await broker.astop()


if __name__ == "__main__":
    asyncio.run(main())
