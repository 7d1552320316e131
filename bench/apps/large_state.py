"""Large state: every record counts its key in a hopping window (60 s windows every 20 s, so each
record updates 3 windows) in a RocksDB table, changelogged. ``BENCH_IN`` holds 1M+ distinct keys."""

from __future__ import annotations

import os

import agentstream

app = agentstream.App(
    os.environ.get("BENCH_APP_ID", "bench-large"),
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
    store="rocksdb://",
)

source = app.topic(os.environ.get("BENCH_IN", "large-in"), key_type=bytes, value_type=bytes)
views = app.Table("views", default=int, key_type=bytes).hopping(60.0, 20.0, expires=3600.0)


@app.agent(source)
async def count(stream: agentstream.Stream) -> None:
    async for event in stream.events():
        views[event.key] += 1
