"""Baseline for the large-state case, by the shared hand-written loop (:mod:`bench.raw_loop`): every
record counts its key in the 3 hopping windows (60 s every 20 s) that contain its timestamp, in one
raw-mode Rdict per partition (WAL off, as agentstream's stores), read-modify-write through a dict of
the batch's updates and one ``WriteBatch`` per fetched batch; each updated window key's new count goes
to a changelog topic once per batch (agentstream's table cache sends once per commit). With
``--batch`` the changelog goes through the batch API.

    python -m bench.raw_large_state --in T --changelog C --group G --records N --data-dir DIR [--batch]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition
from rocksdict import BlockBasedOptions, DBCompressionType, Options, Rdict, WriteBatch, WriteOptions

from bench import raw_loop
from bench.common import Meter

SIZE, STEP = 60_000, 20_000  # ms


def rocksdb_options() -> Options:
    """What a hand-written loop would set, as agentstream's stores did before ``rocksdb_memory_mb``:
    lz4, 16 MB memtables (4), a bloom filter, RocksDB's default block cache (32 MB per DB; index
    and filter blocks outside it). agentstream's stores share one bounded budget instead
    (tables/rocksdb_memory.py)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.increase_parallelism(2)
    opts.set_compression_type(DBCompressionType.lz4())
    opts.set_write_buffer_size(16 << 20)
    opts.set_max_write_buffer_number(4)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    return opts


class LargeState:
    distinct_keys = False

    def __init__(self, args: argparse.Namespace) -> None:
        self.inputs, self.outputs = [args.in_topic], [args.changelog]
        self.changelog, self.expect = args.changelog, args.records
        self.root = Path(args.data_dir)
        self.dbs: dict[int, Rdict] = {}
        self.write_options = WriteOptions()
        self.write_options.disable_wal = True  # type: ignore[method-assign,assignment]
        self.handled = 0
        self.updates = 0

    def _db(self, partition: int) -> Rdict:
        db = self.dbs.get(partition)
        if db is None:
            db = Rdict(str(self.root / str(partition)), options=rocksdb_options())
            db.set_write_options(self.write_options)
            self.dbs[partition] = db
        return db

    async def handle(self, tp: TopicPartition, messages: list[Any], send: raw_loop.Send) -> None:
        db = self._db(tp.partition)
        dirty: dict[bytes, int] = {}
        get = db.get
        for m in messages:
            last = m.timestamp - m.timestamp % STEP
            for start in (last - 2 * STEP, last - STEP, last):
                if start < 0:
                    continue
                k = m.key + start.to_bytes(8, "big")
                n = dirty.get(k)
                if n is None:
                    raw = get(k)
                    n = 0 if raw is None else int(raw)
                dirty[k] = n + 1
        batch = WriteBatch(raw_mode=True)
        changelog = self.changelog
        for k, n in dirty.items():
            value = str(n).encode()
            batch.put(k, value)
            await send(changelog, k, value)
        db.write(batch)
        self.handled += len(messages)
        self.updates += len(dirty)

    @property
    def work(self) -> int:
        return self.handled

    def finished(self) -> bool:
        return self.handled >= self.expect

    def result(self, meter: Meter) -> dict[str, Any]:
        for db in self.dbs.values():
            db.flush()
        keys = sum(sum(1 for _ in db.keys()) for db in self.dbs.values())
        for db in self.dbs.values():
            db.close()
        return meter.stop(self.handled, processed=self.handled, window_keys=keys, changelog_records=self.updates)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="in_topic", required=True)
    p.add_argument("--changelog", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--data-dir", required=True)
    raw_loop.add_arguments(p)
    args = p.parse_args()
    return raw_loop.main(args, LargeState(args))


if __name__ == "__main__":
    sys.exit(main())
