"""Batch-API baseline for the word-count case: the best hand-written aiokafka loop we know.

Same work as :mod:`bench.raw_wordcount` (split sentences, repartition by word, count in a dict,
send each new count), but records go out through aiokafka's batch API
(:class:`bench.batch_producer.BatchSender`: per-partition ``BatchBuilder``s, ``send_batch``,
partition chosen once per distinct key) and every second (agentstream's default
commit_interval) and at the end: send the open batches, wait for all of them, commit.

    python -m bench.raw_batch_wordcount --in sentences --words W --out C --group G --sentences N --words-total M
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

import orjson
import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.batch_producer import BatchSender, topic_partitions
from bench.common import COMMIT_INTERVAL, MAX_POLL_RECORDS, Meter, consumer_group_kwargs, report

WORD = re.compile(r"\W+")


async def run(args: argparse.Namespace) -> dict:
    bootstrap = os.environ["BENCH_BOOTSTRAP"]
    consumer = AIOKafkaConsumer(
        args.in_topic,
        args.words_topic,
        bootstrap_servers=bootstrap,
        group_id=args.group,
        max_poll_records=MAX_POLL_RECORDS,
        **consumer_group_kwargs(),
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    await consumer.start()
    sender = BatchSender(producer, await topic_partitions(producer, args.words_topic, args.out_topic))
    meter = Meter()
    counts: dict[bytes, int] = {}
    n_sentences = n_words = 0
    in_topic, words_topic, out_topic = args.in_topic, args.words_topic, args.out_topic
    send = sender.send
    last_commit = time.monotonic()
    try:
        while n_sentences < args.sentences or n_words < args.words_total:
            batches = await consumer.getmany(timeout_ms=200, max_records=MAX_POLL_RECORDS)
            if batches:
                meter.start()
            for tp, messages in batches.items():
                if tp.topic == in_topic:
                    for m in messages:
                        text = str(orjson.loads(m.value).get("text", "")).lower()
                        for word in WORD.split(text):
                            if word:
                                wb = word.encode()
                                await send(words_topic, wb, wb)
                    n_sentences += len(messages)
                else:
                    for m in messages:
                        key = m.key
                        count = counts.get(key, 0) + 1
                        counts[key] = count
                        await send(out_topic, key, orjson.dumps(count))
                    n_words += len(messages)
            if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                await sender.flush()
                await consumer.commit()
                last_commit = time.monotonic()
        await sender.flush()
        await consumer.commit()
        return meter.stop(n_sentences, processed=n_sentences + n_words, words=n_words)
    finally:
        await consumer.stop()
        await producer.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="in_topic", required=True)
    p.add_argument("--words", dest="words_topic", required=True)
    p.add_argument("--out", dest="out_topic", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--sentences", type=int, required=True)
    p.add_argument("--words-total", type=int, required=True)
    report(uvloop.run(run(p.parse_args())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
