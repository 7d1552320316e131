"""Baselines for the word-count case, by the shared hand-written loop (:mod:`bench.raw_loop`):
``await producer.send()`` per record, or with ``--batch`` through aiokafka's batch API.

One group consumer reads the sentences topic and the repartition topic. A sentence is split
(same regex and lower-casing as apps/wordcount.py) and every word is sent keyed by itself to
the repartition topic; a word from the repartition topic is counted in a dict and its new
count sent to the output topic. No changelog, no state store: that is the framework's extra work.

    python -m bench.raw_wordcount --in sentences --words W --out C --group G --sentences N --words-total M [--batch]
    python -m bench.raw_wordcount --in sentences --words W --out C --group G --until-signal --progress S [--batch]
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

import orjson
from aiokafka import TopicPartition

from bench import raw_loop
from bench.common import Meter

WORD = re.compile(r"\W+")


class WordCount:
    distinct_keys = False

    def __init__(self, args: argparse.Namespace) -> None:
        self.inputs, self.outputs = [args.in_topic, args.words_topic], [args.words_topic, args.out_topic]
        self.in_topic, self.words_topic, self.out_topic = args.in_topic, args.words_topic, args.out_topic
        self.expect_sentences, self.expect_words = args.sentences, args.words_total
        self.counts: dict[bytes, int] = {}
        self.sentences = self.words = self.split_words = 0

    @property
    def handled(self) -> int:
        return self.sentences + self.words

    @property
    def work(self) -> int:
        """Words split plus words counted: a sentence costs about its words, so the steady rate
        does not depend on whether a side splits ahead of counting (this loop does, at the start)."""
        return self.split_words + self.words

    async def handle(self, tp: TopicPartition, messages: list[Any], send: raw_loop.Send) -> None:
        if tp.topic == self.in_topic:
            words_topic = self.words_topic
            split = 0  # a local count per batch: the timeline's work, at no attribute write per word
            for m in messages:
                text = str(orjson.loads(m.value).get("text", "")).lower()
                for word in WORD.split(text):
                    if word:
                        wb = word.encode()
                        await send(words_topic, wb, wb)
                        split += 1
            self.split_words += split
            self.sentences += len(messages)
        else:
            counts, out_topic = self.counts, self.out_topic
            for m in messages:
                key = m.key
                count = counts.get(key, 0) + 1
                counts[key] = count
                await send(out_topic, key, orjson.dumps(count))
            self.words += len(messages)

    def finished(self) -> bool:
        return self.sentences >= self.expect_sentences and self.words >= self.expect_words

    def result(self, meter: Meter) -> dict[str, Any]:
        return meter.stop(self.sentences, processed=self.handled, words=self.words, work_total=self.work)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="in_topic", required=True)
    p.add_argument("--words", dest="words_topic", required=True)
    p.add_argument("--out", dest="out_topic", required=True)
    p.add_argument("--sentences", type=int, default=0)
    p.add_argument("--words-total", type=int, default=0)
    raw_loop.add_arguments(p)
    args = p.parse_args()
    return raw_loop.main(args, WordCount(args))


if __name__ == "__main__":
    sys.exit(main())
