"""A table read finds a key wherever the partition holds it: in the write-back cache (a value or a
delete), in the writes waiting for the changelog, or nowhere (the default, else KeyError). The read
looks in the cache inline (issue 41, the pure build), so each place is read here on purpose."""

from __future__ import annotations

from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("cache_size", [0, 10_000])  # 0: every write leaves the cache at once
async def test_reads_after_writes_and_deletes(cache_size: int) -> None:
    app = agentstream.App("table-reads", topic_partitions=1, table_cache_size=cache_size)
    counts = app.Table("counts", default=int)
    plain = app.Table("plain")  # no default: a missing key raises KeyError
    seen: list[Any] = []

    @app.agent(app.topic("words", value_type=str))
    async def count(stream: Any) -> None:
        async for word in stream:
            if word.startswith("-"):
                key = word[1:]
                del counts[key]
                del plain[key]
                seen.append((key, counts[key], key in plain))
                try:
                    seen.append(plain[key])
                except KeyError:
                    seen.append("KeyError")
            else:
                counts[word] = counts[word] + 1
                plain[word] = word * counts[word]
                seen.append((word, counts[word], plain[word]))

    async with AppHarness(app, virtual_time=True) as h:
        for word in ["a", "a", "b", "-a", "a", "-b"]:
            await h.send("words", word)
    assert seen == [
        ("a", 1, "a"),
        ("a", 2, "aa"),
        ("b", 1, "b"),
        ("a", 0, False),
        "KeyError",
        ("a", 1, "a"),
        ("b", 0, False),
        "KeyError",
    ]
