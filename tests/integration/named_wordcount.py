"""``apps.wordcount`` under names of its own, for tests sharing one Kafka cluster.

The app id and every topic carry ``WORDCOUNT_PREFIX`` (from the worker's environment), so tests running at
once on the shared cluster never meet each other's topics or groups: ``<prefix>-sentences`` in,
``<prefix>-word-counts`` out, the table's changelog ``<prefix>-word_counts-changelog``.
"""

from __future__ import annotations

import os
import re

import agentstream

PREFIX = os.environ.get("WORDCOUNT_PREFIX", "wc")

app = agentstream.App(PREFIX, broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"), topic_partitions=4)

sentences = app.topic(f"{PREFIX}-sentences", value_type=dict)
words = app.topic(f"{PREFIX}-words", key_type=str, value_type=str, internal=True)
counts_topic = app.topic(f"{PREFIX}-word-counts", key_type=str, value_type=int)
word_counts = app.Table("word_counts", default=int)

WORD = re.compile(r"\W+")


@app.agent(sentences)
async def split_sentences(stream: agentstream.Stream) -> None:
    async for value in stream:
        for word in WORD.split(str(value.get("text", "")).lower()):
            if word:
                await words.send(key=word, value=word)


@app.agent(words)
async def count_words(stream: agentstream.Stream) -> None:
    async for word in stream:
        count = word_counts[word] + 1
        word_counts[word] = count
        await counts_topic.send(key=word, value=count)
