"""One word-count app, run by faust-streaming first and by agentstream after (the takeover test).

The only difference between the two runs is the import line a migrating team changes
(``import faust`` -> ``import agentstream as faust``) and agentstream's ``topic_naming='faust'``:
same module, so Faust's agent topic names (``<id>-<module>.<agent>``) are the same on both sides.
Environment: TAKEOVER_ENGINE (faust | agentstream), TAKEOVER_APP_ID, TAKEOVER_BROKER.
"""

import os
import re

if os.environ.get("TAKEOVER_ENGINE") == "faust":
    import faust

    ENGINE_OPTIONS = {
        # tansu has no idempotent producer (InitProducerId fails)
        "producer_acks": 1,
        "web_enabled": False,
        "broker_session_timeout": 6.0,
        "broker_heartbeat_interval": 1.0,
        "broker_rebalance_timeout": 6.0,
        "broker_commit_interval": 0.5,
        "datadir": os.environ.get("TAKEOVER_DATADIR", "/tmp/faust-takeover-data"),
    }
else:
    import agentstream as faust

    ENGINE_OPTIONS = {"topic_naming": os.environ.get("TAKEOVER_NAMING", "faust")}

app = faust.App(
    os.environ.get("TAKEOVER_APP_ID", "takeover"),
    broker=os.environ.get("TAKEOVER_BROKER", "kafka://127.0.0.1:9092"),
    store="memory://",
    version=2,  # Faust's -v2 suffix on the group id and every internal topic
    topic_partitions=3,
    **ENGINE_OPTIONS,
)


class Sentence(faust.Record):
    text: str


class Word(faust.Record):
    word: str


sentences = app.topic(os.environ.get("TAKEOVER_SOURCE", "tk-sentences"), value_type=Sentence)
counted = app.topic(os.environ.get("TAKEOVER_OUTPUT", "tk-counted"), key_type=str, value_type=int)
word_counts = app.Table("word_counts", default=int)
# One window per day, kept a week: the windows of a word add up to its count.
daily_counts = app.Table("daily_counts", default=int).tumbling(86400, expires=7 * 86400)

WORD = re.compile(r"\W+")


@app.agent(sentences)
async def split(stream):
    async for sentence in stream:
        for word in WORD.split(sentence.text.lower()):
            if word:
                await count.send(value=Word(word=word))  # no key: any partition


@app.agent(value_type=Word)
async def count(stream):
    # repartition by word: <id>-v2-<id>-v2-<module>.count-Word.word-repartition under Faust's naming
    async for word in stream.group_by(Word.word):
        word_counts[word.word] += 1
        daily_counts[word.word] += 1
        await counted.send(key=word.word, value=word_counts[word.word])
