"""Batch-API baseline for the pass-through case: getmany -> each record appended unchanged to a
per-partition ``BatchBuilder`` (:class:`bench.batch_producer.BatchSender`) -> every second and at
the end: send the open batches, wait for them, commit. Timed like every other side.

    python -m bench.raw_batch_passthrough --in T --out T2 --group G --expect N
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.batch_producer import BatchSender, topic_partitions
from bench.common import COMMIT_INTERVAL, MAX_POLL_RECORDS, Meter, consumer_group_kwargs, report


async def run(args: argparse.Namespace) -> dict:
    bootstrap = os.environ["BENCH_BOOTSTRAP"]
    consumer = AIOKafkaConsumer(
        args.in_topic,
        bootstrap_servers=bootstrap,
        group_id=args.group,
        max_poll_records=MAX_POLL_RECORDS,
        **consumer_group_kwargs(),
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    await consumer.start()
    sender = BatchSender(producer, await topic_partitions(producer, args.out_topic), memo=False)
    out = args.out_topic
    meter = Meter()
    done = 0
    last_commit = time.monotonic()
    try:
        while done < args.expect:
            batches = await consumer.getmany(timeout_ms=200, max_records=MAX_POLL_RECORDS)
            if batches:
                meter.start()
            for messages in batches.values():
                for m in messages:
                    await sender.send(out, m.key, m.value)
                done += len(messages)
            if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                await sender.flush()
                await consumer.commit()
                last_commit = time.monotonic()
        await sender.flush()
        await consumer.commit()
        return meter.stop(done)
    finally:
        await consumer.stop()
        await producer.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="in_topic", required=True)
    p.add_argument("--out", dest="out_topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--expect", type=int, required=True)
    report(uvloop.run(run(p.parse_args())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
