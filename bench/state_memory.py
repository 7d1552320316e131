"""RocksDB's share of a worker's memory as the state grows: N keys, each in 3 hopping-window keys
(the large-state case's store keys), written into 4 RocksDB stores opened as a worker opens them
(``store_for``, so under ``rocksdb_memory_mb``), in commit-sized batches with a flush every 10
batches, then 200,000 random point reads. No Kafka, no Python-side table state: what is left is
the stores' memory. Prints one JSON line (peak RSS, the budget's usage).

    cd /tmp && PYTHONPATH=<tree> python -m bench.state_memory --keys 5000000 [--memory-mb 256]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentstream.tables.store import store_for

PARTITIONS = 4
BATCH = 30_000  # window keys per write (about a commit's worth)
FLUSH_EVERY = 10
READS = 200_000
STEP_MS = 20_000


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(keys: int, memory_mb: int | None, root: Path) -> dict[str, Any]:
    extra: dict[str, Any] = {} if memory_mb is None else {"memory_mb": memory_mb}
    stores = [store_for("rocksdb://", root / str(p), **extra) for p in range(PARTITIONS)]
    t = time.perf_counter()
    peak = 0.0
    batches = 0
    pending: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
    for i in range(keys):
        kb = b"u%08d" % i
        p = i % PARTITIONS
        for w in range(3):
            pending[p].append(kb + (w * STEP_MS).to_bytes(8, "big"))
        if len(pending[p]) >= BATCH:
            stores[p].write_many(pending[p], [b"1"] * len(pending[p]))
            pending[p] = []
            batches += 1
            if batches % FLUSH_EVERY == 0:
                for s in stores:
                    s.flush()
                peak = max(peak, rss_mb())
    for p, ks in enumerate(pending):
        if ks:
            stores[p].write_many(ks, [b"1"] * len(ks))
    for s in stores:
        s.flush()
    written = time.perf_counter() - t
    rng = random.Random(0)
    for n in range(READS):
        i = rng.randrange(keys)
        stores[i % PARTITIONS].get(b"u%08d" % i + (STEP_MS * (n % 3)).to_bytes(8, "big"))
        if n % 20_000 == 0:
            peak = max(peak, rss_mb())
    peak = max(peak, rss_mb())
    memory = getattr(stores[0], "memory", None)
    out = {
        "keys": keys,
        "window_keys": 3 * keys,
        "memory_mb": memory_mb,
        "peak_rss_mb": round(max(peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024), 1),
        "write_s": round(written, 1),
        "read_s": round(time.perf_counter() - t - written, 1),
        "budget": memory.usage() if memory is not None else None,
        "block_cache_capacity": [s.property_int("rocksdb.block-cache-capacity") for s in stores]  # type: ignore[attr-defined]
        if memory is not None
        else None,
    }
    for s in stores:
        s.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--memory-mb", type=int, default=None, help="rocksdb_memory_mb (default: the setting's default)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentstream-state-memory-") as d:
        print(json.dumps(run(args.keys, args.memory_mb, Path(d))), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
