"""Faust's table API beyond the dict: ``Table.clear()``, ``@table.on_recover`` and
``tumbling(..., key_index=True)``, as faust-streaming 0.11 runs them (checked with a Faust worker
on the dev broker: on_recover ran once at start; ``counts.clear()`` in an agent left the table
empty; with a key index ``keys()`` gave the keys, ``items()`` ``(key, value)`` of the current
window, ``len()`` the number of keys, and ``<name>-key_index`` was one of ``app.tables``)."""

from __future__ import annotations

import uuid
from typing import Any

import agentstream
from agentstream.testing import AppHarness


def _app() -> agentstream.App:
    return agentstream.App(f"g3t-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2, store="memory://")


async def test_clear_deletes_every_key_and_on_recover_runs_after_restore() -> None:
    app = _app()
    counts = app.Table("counts", default=int)
    words = app.topic("words", key_type=str, value_type=str)
    recovered: list[int] = []
    snapshots: list[Any] = []

    @counts.on_recover
    async def restored() -> None:
        recovered.append(len(counts.parts))

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            counts[word] += 1
            if word == "CLEAR":
                counts.clear()
                snapshots.append(sorted(counts.items()))

    async with AppHarness(app) as h:
        assert recovered == [2]  # once, after the partitions were restored and before agents ran
        for word in ["a", "b", "a"]:
            await h.send("words", word, key=word)
        await h.wait_idle()
        assert h.table("counts") == {"a": 2, "b": 1}
        await h.send("words", "CLEAR", key="CLEAR")
        await h.wait_idle()
        assert h.table("counts") == {}  # every partition this worker holds, not only the record's
    assert snapshots == [[]]


async def test_tumbling_with_a_key_index_lists_keys_items_and_len_per_key() -> None:
    app = _app()
    views = app.Table("views", default=int).tumbling(60, expires=3600, key_index=True)
    words = app.topic("words", key_type=str, value_type=str)
    report: dict[str, Any] = {}

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            views[word] += 1
            if word == "REPORT":
                report["keys"] = sorted(views.keys())
                report["items"] = sorted(views.items())
                report["values"] = sorted(views.values())
                report["iter"] = sorted(views)
                report["len"] = len(views)

    assert "views-key_index" in app.tables
    async with AppHarness(app) as h:
        for word in ["a", "b", "a", "REPORT"]:
            await h.send("words", word, key=word, timestamp=1_000.0)
        await h.wait_idle()
        assert h.table("views-key_index") == {"a": 1, "b": 1, "REPORT": 1}
    assert report == {
        "keys": ["REPORT", "a", "b"],
        "items": [("REPORT", 1), ("a", 2), ("b", 1)],
        "values": [1, 1, 2],
        "iter": ["REPORT", "a", "b"],
        "len": 3,
    }
