"""Pass-through: every record of ``BENCH_IN`` is sent unchanged (key and value bytes) to
``BENCH_OUT``. The plain Faust-style way to write it: raw bytes topics, ``stream.items()``,
``topic.send``."""

from __future__ import annotations

import os

import agentstream

app = agentstream.App(
    os.environ.get("BENCH_APP_ID", "bench-passthrough"),
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
)

source = app.topic(os.environ.get("BENCH_IN", "bench-in"), key_type=bytes, value_type=bytes)
sink = app.topic(os.environ.get("BENCH_OUT", "bench-out"), key_type=bytes, value_type=bytes)


@app.agent(source)
async def passthrough(stream: agentstream.Stream) -> None:
    async for key, value in stream.items():
        await sink.send(key=key, value=value)
