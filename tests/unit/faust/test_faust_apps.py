"""The Faust-style apps of tests/faust_apps, run in-process on the memory transport (AppHarness /
agent.test_context), with the results Faust's documentation gives for such code."""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from agentstream.testing import AppHarness
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio


def last_values(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in pairs:
        out[k] = v
    return out


async def test_hello_world_with_test_context(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.faust_apps.hello_world import greet

    async with greet.test_context() as agent:
        await agent.put(b"hello")
        await agent.put(b"world")
    out = capsys.readouterr().out
    assert "GREETING: hello" in out and "GREETING: world" in out


async def test_word_count_group_by_table() -> None:
    from tests.faust_apps.word_count import app

    texts = ["the quick brown fox", "The lazy dog", "the end"]
    expected = collections.Counter(w for t in texts for w in t.lower().split())
    async with AppHarness(app) as h:
        for t in texts:
            await h.send("faust-sentences", {"text": t})
        await h.wait_idle()
        assert last_values(h.read("faust-word-counts")) == dict(expected)
        assert h.table("word_counts") == dict(expected)


async def test_windowed_tumbling_and_hopping_counts() -> None:
    from tests.faust_apps.windowed import app

    base = (int(time.time()) // 10) * 10 - 3600
    async with AppHarness(app) as h:
        for offset in (0, 3, 8, 12):
            await h.send("faust-page-views", {"page": "/a", "user": "u"}, key="/a", timestamp=base + offset)
        await h.wait_idle()
        got = [v for k, v in h.read("faust-window-counts") if k == "/a"]
    # tumbling 10 s: [base, base+10) counts 3, then [base+10, base+20) starts at 1.
    assert [g["tumbling"] for g in got] == [1, 2, 3, 1]
    # hopping 10 s every 5 s: current() is the newest window holding the record's time.
    assert [g["hopping"] for g in got] == [1, 2, 1, 1]


async def test_set_table() -> None:
    from tests.faust_apps.set_table import app

    async with AppHarness(app) as h:
        for user, page in [("ann", "/a"), ("bob", "/b"), ("ann", "/c"), ("ann", "/a")]:
            await h.send("faust-visits", {"user": user, "page": page})
        await h.wait_idle()
        assert last_values(h.read("faust-user-pages")) == {"ann": ["/a", "/c"], "bob": ["/b"]}
        assert h.table("pages_by_user") == {"ann": {"/a", "/c"}, "bob": {"/b"}}


async def test_global_table_is_read_from_every_partition() -> None:
    from tests.faust_apps.global_table import app

    async with AppHarness(app) as h:
        for sku, price in [("apple", 0.5), ("pear", 0.75), ("plum", 2.0)]:
            await h.send("faust-prices", price, key=sku)
        await h.wait_idle()
        for i, (sku, qty) in enumerate([("apple", 4), ("pear", 2), ("plum", 3)]):
            await h.send("faust-orders", {"id": f"o{i}", "sku": sku, "quantity": qty}, key=f"o{i}")
        await h.wait_idle()
        assert last_values(h.read("faust-order-totals")) == {"o0": 2.0, "o1": 1.5, "o2": 6.0}


async def test_rpc_ask() -> None:
    from tests.faust_apps.rpc import Add, adder, app

    async with AppHarness(app):
        assert await adder.ask(Add(a=2, b=40)) == 42


async def test_timer_task_service_run_with_the_worker(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.faust_apps.timer_producer import app

    async with AppHarness(app) as h:
        await until(lambda: len(h.read("faust-ticks")) >= 3, "three ticks")
        await h.wait_idle()
        assert [v for _, v in h.read("faust-ticks")][:3] == [1, 2, 3]
    out = capsys.readouterr().out
    assert "TICK 1" in out and "APP TASK RAN" in out
    assert "HEARTBEAT SERVICE STARTING" in out and "HEARTBEAT SERVICE WAKING UP" in out
    assert "HEARTBEAT SERVICE STOPPING" in out


async def test_web_view_and_table_route_in_process() -> None:
    import aiohttp

    from tests.faust_apps.word_count import app

    async with AppHarness(app, web_enabled=True) as h:
        await h.send("faust-sentences", {"text": "hello hello world"})
        await h.wait_idle()
        url = h.web.url
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{url}/count/hello/") as resp:
                assert resp.status == 200, await resp.text()
                assert await resp.json() == {"hello": 2}
            async with session.get(f"{url}/hello/") as resp:
                assert await resp.json() == {"hello": "world", "app": "faust-word-count"}
