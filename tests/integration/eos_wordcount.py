"""The word count of ``apps/wordcount.py`` under exactly_once, with names of its own for a shared cluster.

``EOS_WORDCOUNT_ID`` names the app (its group, transactional ids and internal topics); its input is
``<id>-sentences`` and its output ``<id>-counts``. Everything else is the example app: ``split`` sends each
word keyed by itself to the repartition topic, ``count`` counts per word in ``word_counts`` and sends every
updated count, with a ``worker`` header naming the process (``EOS_WORKER``). Run as worker processes by ``tests/integration/test_kafka_eos.py``.
"""

from __future__ import annotations

import os
import re

import agentstream

APP_ID = os.environ.get("EOS_WORDCOUNT_ID", "eos-wordcount")
WORKER = os.environ.get("EOS_WORKER", "").encode()  # each count record names the worker that wrote it

app = agentstream.App(
    APP_ID,
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
    processing_guarantee="exactly_once",
)

sentences = app.topic(f"{APP_ID}-sentences", value_type=dict)
words = app.topic(f"{APP_ID}-words", key_type=str, value_type=str, internal=True)
counts_topic = app.topic(f"{APP_ID}-counts", key_type=str, value_type=int)
word_counts = app.Table("word_counts", default=int)

WORD = re.compile(r"\W+")


@app.agent(sentences)
async def split(stream: agentstream.Stream) -> None:
    async for value in stream:
        for word in WORD.split(str(value.get("text", "")).lower()):
            if word:
                await words.send(key=word, value=word)


@app.agent(words)
async def count(stream: agentstream.Stream) -> None:
    async for word in stream:
        n = word_counts[word] + 1
        word_counts[word] = n
        await counts_topic.send(key=word, value=n, headers=[("worker", WORKER)])
