"""A windowed click count with final results, for ``tests/integration/test_final_results.py``.

``FINAL_APP_ID`` names the app (group, transactional ids, internal topics); ``FINAL_GUARANTEE`` its
processing guarantee. Input ``<id>-clicks`` (key: user, value JSON ``{"ts": seconds}``); the count per
user in 0.5 s tumbling windows of ``ts`` sends one final per user and window to ``<id>-finals``; the
count per user and session (gap 0.25 s, grace 0.1 s, of the records' own timestamps) one final per user
and session to ``<id>-session-finals``.
"""

from __future__ import annotations

import os

import agentstream

APP_ID = os.environ.get("FINAL_APP_ID", "final-windows")
WINDOW = 0.5
SESSION_GAP, SESSION_GRACE = 0.25, 0.1

app = agentstream.App(
    APP_ID,
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
    processing_guarantee=os.environ.get("FINAL_GUARANTEE", "at_least_once"),
)

clicks = app.topic(f"{APP_ID}-clicks", key_type=str, value_type=dict)
counts = app.Table("clicks", default=int, key_type=str).tumbling(WINDOW, grace=0.1).relative_to_field("ts")
finals = counts.final_results(f"{APP_ID}-finals")
sessions = app.Table("click_sessions", default=int, key_type=str).session(SESSION_GAP, grace=SESSION_GRACE)
session_finals = sessions.final_results(f"{APP_ID}-session-finals")


@app.agent(clicks)
async def count(stream: agentstream.Stream) -> None:
    async for user, _ in stream.items():
        counts[user] += 1
        sessions[user] += 1
