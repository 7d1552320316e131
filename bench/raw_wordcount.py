"""Baseline for the word-count case: a plain hand-written aiokafka loop, no framework.

One group consumer reads the sentences topic and the repartition topic. A sentence is split
(same regex and lower-casing as apps/wordcount.py) and every word is sent keyed by itself to
the repartition topic; a word from the repartition topic is counted in a dict and its new
count sent to the output topic. Every second (agentstream's default commit_interval) and at
the end: producer.flush() then consumer.commit(). No changelog, no state store: that is the
framework's extra work. Timed from the first fetched record until the final flush + commit.

    python -m bench.raw_wordcount --in sentences --words W --out C --group G --sentences N --words-total M
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
    meter = Meter()
    counts: dict[str, int] = {}
    n_sentences = n_words = 0
    in_topic, words_topic, out_topic = args.in_topic, args.words_topic, args.out_topic
    send = producer.send
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
                                await send(words_topic, wb, key=wb)
                    n_sentences += len(messages)
                else:
                    for m in messages:
                        word = m.key.decode()
                        count = counts.get(word, 0) + 1
                        counts[word] = count
                        await send(out_topic, orjson.dumps(count), key=m.key)
                    n_words += len(messages)
            if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                await producer.flush()
                await consumer.commit()
                last_commit = time.monotonic()
        await producer.flush()
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
