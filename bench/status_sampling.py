"""What the status page costs a worker holding large RocksDB state (issue 45 finding 5).

A word-count-like app (one RocksDB table, 4 partitions) on the memory transport with its web server
on, as ``agentstream worker`` runs it by default. Its partitions are filled with ``--keys`` distinct
keys (a bulk write, as a restore from scratch makes), then for ``--seconds`` every partition takes a
commit each second (``--hot`` keys updated in place in the store, its changelog position moved by as
many records, as the commit unit does), then the status sampler takes its sample and
``/status?history=1`` is read, as the open status page does. Reported: the thread CPU seconds spent
in the sampler and the status view (per sample too); the key scans the sampler made and the keys
they read; the key count the page shows; peak RSS; the most descriptors open at once.

    python -m bench.status_sampling --keys 1000000 --seconds 60 [--data-dir DIR]

Runs against whichever agentstream is imported, so the same script measures a tree before and
after a change: ``cd /tmp && PYTHONPATH=<old tree>:<this checkout> python -m bench.status_sampling``
(from a directory without an ``agentstream`` package: ``python -m`` puts the current directory
first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import agentstream
from agentstream.testing import AppHarness


def _fds() -> int:
    return len(os.listdir("/proc/self/fd")) - 1


async def run(keys: int, seconds: float, hot: int, data_dir: Path) -> dict[str, Any]:
    app = agentstream.App(
        "bench-status", broker="memory://", topic_partitions=4, store="rocksdb://", data_dir=str(data_dir)
    )
    table = app.Table("t", default=int, key_type=bytes)

    @app.agent(app.topic("src", key_type=bytes, value_type=int))
    async def fill(stream: agentstream.Stream) -> None:
        async for event in stream.events():
            table[event.key] += event.value

    from agentstream.tables import query

    real_sliced = query.sliced
    scanned = [0, 0]  # scans, keys read by them

    async def sliced(items: Any, *args: Any) -> Any:  # every key scan the sampler makes goes through it
        scanned[0] += 1
        async for item in real_sliced(items, *args):
            scanned[1] += 1
            yield item

    query.sliced = sliced  # type: ignore[assignment]
    async with AppHarness(app, store="rocksdb://", data_dir=str(data_dir)) as h:
        parts = [table.parts[p] for p in sorted(table.parts)]
        began = time.perf_counter()
        per = keys // len(parts)
        for n, part in enumerate(parts):
            for lo in range(0, per, 50_000):
                chunk = [b"u%d-%09d" % (n, i) for i in range(lo, min(per, lo + 50_000))]
                part.store.write_many(chunk, [b"1"] * len(chunk))
            part.store.flush()
        fill_s = time.perf_counter() - began
        most_fds = _fds()
        shown: Any = None
        # The web server's own sampler is replaced by this loop, which runs it on the same 1 s
        # schedule and times it: the thread's CPU inside the sampler and the status view, not the
        # wall clock (on a loaded machine a sliced scan's wall time says little).
        sampler = h.web._sampler
        if sampler is not None:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
        scanned_before = list(scanned)
        first: tuple[float, list[int]] = (0.0, list(scanned))
        wall0 = time.monotonic()
        sampling = 0.0
        tick = 0
        while time.monotonic() - wall0 < seconds:
            await asyncio.sleep(1.0)
            tick += 1
            for part in parts:  # a commit: hot keys updated in place, their changelog records sent
                part.store.write_batch([(b"hot-%06d" % j, b"%d" % tick) for j in range(hot)])
                part.changelog_offset = (part.changelog_offset or 0) + hot
            c = time.thread_time()
            await h.web.stats.sample()
            status = await h.web.stats.status(history=True)  # what the open status page reads
            spent = time.thread_time() - c
            if tick == 1:
                first = (spent, list(scanned))
            else:
                sampling += spent
            shown = status["tables"]["t"]["local_keys"]
            most_fds = max(most_fds, _fds())
        wall = time.monotonic() - wall0
    return {
        "keys": keys,
        "fill_s": round(fill_s, 1),
        "seconds": round(wall, 1),
        "samples": tick,
        # the first sample counts every partition the bulk fill left uncounted (both versions)
        "first_sample_cpu_s": round(first[0], 2),
        "first_sample_keys_read": first[1][1] - scanned_before[1],
        # then: what the sampler costs while the partitions keep changing
        "later_samples_cpu_s": round(sampling, 2),
        "later_cpu_per_sample_ms": round(1000 * sampling / max(tick - 1, 1), 1),
        "later_scans": scanned[0] - first[1][0],
        "later_keys_read": scanned[1] - first[1][1],
        "keys_shown": shown,
        "keys_true": per * len(parts) + hot * len(parts),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "most_fds": most_fds,
        "fd_soft_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--hot", type=int, default=200, help="keys each partition updates per second")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="bench-status-"))
    try:
        out = asyncio.run(run(args.keys, args.seconds, args.hot, root))
    finally:
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
