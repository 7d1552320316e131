"""Baseline for the pass-through case: a plain hand-written aiokafka loop, no framework.

getmany -> producer.send each record unchanged -> every second (agentstream's default
commit_interval) and at the end: producer.flush() then consumer.commit(). Timed like the
agentstream side: from the first fetched record until the final flush + commit returned.
Prints the same ``assigned``/``progress`` event lines as :mod:`bench.as_runner` (latency, backlog).

    python -m bench.raw_passthrough --in T --out T2 --group G --expect N
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.common import COMMIT_INTERVAL, MAX_POLL_RECORDS, Meter, announce, consumer_group_kwargs, report


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
    announce("started")
    meter = Meter()
    done = 0
    last_commit = time.monotonic()
    assigned = False
    next_progress = 0.0
    try:
        while done < args.expect:
            batches = await consumer.getmany(timeout_ms=200, max_records=MAX_POLL_RECORDS)
            if batches:
                meter.start()
            for messages in batches.values():
                for m in messages:
                    await producer.send(args.out_topic, m.value, key=m.key)
                done += len(messages)
            if not assigned and consumer.assignment():  # joined: ready for a paced feed (latency case)
                assigned = True
                announce("assigned", partitions=sorted(tp.partition for tp in consumer.assignment()))
            if args.progress and time.monotonic() >= next_progress:
                announce("progress", processed=done)
                next_progress = time.monotonic() + args.progress
            if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                await producer.flush()
                await consumer.commit()
                last_commit = time.monotonic()
        await producer.flush()
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
    p.add_argument(
        "--progress",
        type=float,
        default=0.0,
        help="print a progress event (records handled so far) at most every that many seconds",
    )
    report(uvloop.run(run(p.parse_args())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
