"""apps/wordcount.py with its id and topics prefixed by ``TEST_APP_NS`` (see the package docstring)."""

from __future__ import annotations

import os
import re

import agentstream

WORD = re.compile(r"\W+")


def make_app(ns: str, broker: str | None = None) -> agentstream.App:
    """The word count with ``ns`` before its id and topic names (tests in-process build theirs with it)."""
    app = agentstream.App(
        f"{ns}wordcount",
        broker=broker or os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
        topic_partitions=4,
    )
    sentences = app.topic(f"{ns}sentences", value_type=dict)
    words = app.topic(f"{ns}wordcount-words", key_type=str, value_type=str, internal=True)
    counts_topic = app.topic(f"{ns}word-counts", key_type=str, value_type=int)
    word_counts = app.Table("word_counts", default=int)

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

    return app


app = make_app(os.environ.get("TEST_APP_NS", ""))
