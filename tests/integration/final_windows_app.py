"""A windowed click count with final results, for ``tests/integration/test_final_results.py``.

``FINAL_APP_ID`` names the app (group, transactional ids, internal topics); ``FINAL_GUARANTEE`` its
processing guarantee. Input ``<id>-clicks`` (key: user, value JSON ``{"ts": seconds}``); the count per
user in 0.5 s tumbling windows of ``ts`` sends one final per user and window to ``<id>-finals``.
"""

from __future__ import annotations

import os

import agentstream

APP_ID = os.environ.get("FINAL_APP_ID", "final-windows")
WINDOW = 0.5

app = agentstream.App(
    APP_ID,
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
    processing_guarantee=os.environ.get("FINAL_GUARANTEE", "at_least_once"),
)

clicks = app.topic(f"{APP_ID}-clicks", key_type=str, value_type=dict)
counts = app.Table("clicks", default=int, key_type=str).tumbling(WINDOW, grace=0.1).relative_to_field("ts")
finals = counts.final_results(f"{APP_ID}-finals")


@app.agent(clicks)
async def count(stream: agentstream.Stream) -> None:
    async for user, _ in stream.items():
        counts[user] += 1
