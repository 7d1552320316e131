"""Baseline for the restore case: plain aiokafka reads of a changelog into rocksdict, no framework.

One Rdict (raw mode, WAL off: the changelog is the log) per partition; a consumer without a group
reads every partition from offset 0 with getmany(max_records=10000) (what agentstream's restore
consumer uses) and writes each fetched batch with one WriteBatch; a partition is done when its
position reaches the high watermark seen in the fetch responses; at the end every DB is flushed
(memtable -> SST), as a restore must before it may write a checkpoint. Timed from the first
getmany() (consumer already connected) to the end of the flushes.

    python -m bench.raw_restore --topic T --partitions 4 --expect N --data-dir DIR
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvloop
from aiokafka import AIOKafkaConsumer, TopicPartition
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from bench.common import Meter, report


async def run(args: argparse.Namespace) -> dict:
    bootstrap = os.environ["BENCH_BOOTSTRAP"]
    root = Path(args.data_dir)
    root.mkdir(parents=True, exist_ok=True)
    dbs: dict[TopicPartition, Rdict] = {}
    write_opts = WriteOptions()
    write_opts.disable_wal = True
    for p in range(args.partitions):
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        db = Rdict(str(root / str(p)), options=opts)
        db.set_write_options(write_opts)
        dbs[TopicPartition(args.topic, p)] = db
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=10_000)
    await consumer.start()
    meter = Meter()
    done = 0
    try:
        consumer.assign(list(dbs))
        for tp in dbs:
            consumer.seek(tp, 0)
        meter.start()
        position = {tp: 0 for tp in dbs}
        remaining = set(dbs)
        empty = 0
        while remaining and empty < 3:
            batches = await consumer.getmany(timeout_ms=300, max_records=10_000)
            empty = 0 if batches else empty + 1
            for tp, messages in batches.items():
                wb = WriteBatch(raw_mode=True)
                for m in messages:
                    if m.value is None:
                        wb.delete(m.key)
                    else:
                        wb.put(m.key, m.value)
                dbs[tp].write(wb)
                position[tp] = messages[-1].offset + 1
                done += len(messages)
            for tp in list(remaining):
                hw = consumer.highwater(tp)
                if hw is not None and position[tp] >= hw:
                    remaining.discard(tp)
        for db in dbs.values():
            db.flush(wait=True)
        result = meter.stop(done)
    finally:
        await consumer.stop()
    keys = 0
    for db in dbs.values():
        it = db.iter()
        it.seek_to_first()
        while it.valid():
            keys += 1
            it.next()
        del it
        db.close()
    result["keys"] = keys
    return result


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--data-dir", required=True)
    report(uvloop.run(run(p.parse_args())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
