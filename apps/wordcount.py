"""Word count: sentences in, a running count per word out.

``sentences`` carries JSON ``{"text": "..."}``. ``split_sentences`` lower-cases each text, splits
it on ``\\W+`` and sends every word keyed by itself to ``wordcount-words`` (that send is the
repartition by word); ``count_words`` counts per word in the table ``word_counts`` (changelog
``wordcount-word_counts-changelog``) and sends every updated count to ``word-counts`` (key: the
word in UTF-8, value: the JSON integer).
"""

from __future__ import annotations

import os
import re

import agentstream

app = agentstream.App(
    "wordcount",
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
)

sentences = app.topic("sentences", value_type=dict)
words = app.topic("wordcount-words", key_type=str, value_type=str, internal=True)
counts_topic = app.topic("word-counts", key_type=str, value_type=int)
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
