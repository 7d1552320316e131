"""Property tests: what an agent writes to a table reads back identically from everywhere.

Over key types (str, bytes, int, Record) and value types (int, str, Record, list of Records, a
nested Record with lists, dicts, datetimes, Decimals and sets), on ``memory://``: from the agent,
a timer, the web endpoint, the harness (test code), after a commit, after a restart (restore) and
from a standby. Example counts are modest: every example runs real workers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any, Callable, Optional

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentstream
from agentstream.codecs import revive
from agentstream.testing import AppHarness
from agentstream.worker.worker import Worker


class Key(agentstream.Record):
    region: str
    n: int


class Line(agentstream.Record):
    sku: str
    qty: int


class Nested(agentstream.Record):
    name: str
    lines: list[Line]
    by_sku: dict[str, Line]
    at: dt.datetime
    total: Decimal
    tags: set[str]
    parent: Optional[Line] = None


texts = st.text(max_size=12)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
lines = st.builds(Line, texts, st.integers(-1000, 1000))
KEYS: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "str": (str, st.text(min_size=1, max_size=12)),
    "bytes": (bytes, st.binary(min_size=1, max_size=12)),
    "int": (int, ints),
    "record": (Key, st.builds(Key, texts, st.integers(-50, 50))),
}
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "int": ints,
    "str": texts,
    "record": lines,
    "list_of_records": st.lists(lines, max_size=4),
    "nested": st.builds(
        Nested,
        texts,
        st.lists(lines, max_size=3),
        st.dictionaries(texts, lines, max_size=3),
        st.datetimes(timezones=st.just(dt.UTC)),
        st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6),
        st.sets(texts, max_size=3),
        st.none() | lines,
    ),
}


@st.composite
def cases(draw: Callable[..., Any]) -> tuple[str, str, dict[Any, Any]]:
    key_kind = draw(st.sampled_from(sorted(KEYS)))
    value_kind = draw(st.sampled_from(sorted(VALUES)))
    data = draw(st.dictionaries(KEYS[key_kind][1], VALUES[value_kind], min_size=1, max_size=6))
    return key_kind, value_kind, data


class Probe:
    """An app whose agent writes ``table[key] = value`` and reads keys back when asked."""

    def __init__(self, app_id: str, key_kind: str, **settings: Any) -> None:
        key_type = KEYS[key_kind][0]
        self.app = agentstream.App(app_id, topic_partitions=2, **settings)
        self.writes = self.app.topic("writes", key_type=key_type)  # values untyped: tags name records
        self.reads = self.app.topic("reads", key_type=key_type)
        self.table = self.app.Table("state", key_type=key_type)
        self.agent_seen: dict[Any, Any] = {}
        self.timer_seen: dict[Any, Any] = {}
        self.timer_keys: list[Any] = []
        table = self.table

        @self.app.agent(self.writes)
        async def write(stream: agentstream.Stream) -> None:
            async for event in stream.events():
                table[event.key] = event.value

        @self.app.agent(self.reads)
        async def read(stream: agentstream.Stream) -> None:
            async for event in stream.events():
                self.agent_seen[event.key] = table[event.key]

        @self.app.timer(0.02)
        async def timer() -> None:
            for k in list(self.timer_keys):
                self.timer_seen[k] = table.get(k)

    async def read_in_agent(self, h: AppHarness, data: dict[Any, Any]) -> dict[Any, Any]:
        self.agent_seen.clear()
        for k in data:
            await h.send("reads", None, key=k)
        await h.wait_idle()
        return dict(self.agent_seen)

    async def read_in_timer(self, data: dict[Any, Any]) -> dict[Any, Any]:
        self.timer_seen.clear()
        self.timer_keys[:] = list(data)
        for _ in range(500):
            if len(self.timer_seen) == len(data):
                break
            await asyncio.sleep(0.02)
        self.timer_keys.clear()
        return dict(self.timer_seen)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_agent_writes_read_back_from_agent_timer_web_and_harness(case: tuple[str, str, dict[Any, Any]]) -> None:
    key_kind, _, data = case

    async def scenario() -> None:
        probe = Probe(f"prop-{uuid.uuid4().hex[:6]}", key_kind, broker="memory://")
        async with AppHarness(probe.app) as h:
            for k, v in data.items():
                await h.send("writes", v, key=k)
            await h.wait_idle()  # a commit: the write cache went to the changelog and the store
            assert await probe.read_in_agent(h, data) == data
            assert await probe.read_in_timer(data) == data
            assert {k: probe.table[k] for k in data} == data  # test code, outside any agent
            assert h.table("state") == data
            async with aiohttp.ClientSession() as s:
                async with s.get(h.web.url + "/tables/state?limit=1000") as r:
                    body = await r.json()
            web_values = [revive(item["value"]) for item in body["items"]]
            assert _same_multiset(web_values, list(data.values()))
            if key_kind in ("str", "int", "record"):
                assert {_key(key_kind, item["key"]): revive(item["value"]) for item in body["items"]} == data

    run(scenario())


def _same_multiset(got: list[Any], expected: list[Any]) -> bool:
    rest = list(got)
    for value in expected:
        for i, other in enumerate(rest):
            if other == value and type(other) is type(value):
                del rest[i]
                break
        else:
            return False
    return not rest


def _key(kind: str, web_key: Any) -> Any:
    return revive(web_key) if kind == "record" else web_key


async def _worker(app: agentstream.App) -> AppHarness:
    h = AppHarness(app)
    h.worker = Worker(app)
    await h.worker.start()
    await asyncio.wait_for(h.worker.assigned.wait(), 30)
    return h


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_agent_writes_survive_a_restart_and_read_back_from_a_standby(case: tuple[str, str, dict[Any, Any]]) -> None:
    key_kind, _, data = case

    async def scenario() -> None:
        app_id, broker = f"prop-r-{uuid.uuid4().hex[:6]}", f"memory://prop-r-{uuid.uuid4().hex[:8]}"
        opts = dict(broker=broker, store="memory://", commit_interval=0.05, table_standby_replicas=1, web_enabled=False)
        a = Probe(app_id, key_kind, **opts)
        ha = await _worker(a.app)
        hb = None
        try:
            for k, v in data.items():
                await ha.send("writes", v, key=k)
            await ha.wait_idle()
            # B joins: each worker keeps one partition active and follows the other as a standby
            b = Probe(app_id, key_kind, **opts)
            hb = await _worker(b.app)
            await a.app.transport.settle()
            await asyncio.wait_for(ha.worker.assigned.wait(), 30)
            standby = set(hb.worker.assignor.assignment.standby)
            assert standby, "B should follow A's partition as a standby"
            from agentstream.transport.partitioner import default_partition

            on_standby = {k: v for k, v in data.items() if default_partition(b.table._key_dumps(k), 2) in standby}
            for _ in range(500):  # the standby follows the changelog asynchronously
                if {k: b.table.get(k) for k in on_standby} == on_standby:
                    break
                await asyncio.sleep(0.02)
            assert {k: b.table.get(k) for k in on_standby} == on_standby
            await hb.worker.stop()
            hb = None
        finally:
            if hb is not None:
                await hb.worker.stop()
            await ha.worker.stop()
        # a restart: a new process (new app object, empty memory stores) restores from the changelog
        c = Probe(app_id, key_kind, **opts)
        hc = await _worker(c.app)
        try:
            assert {k: c.table[k] for k in data} == data
            assert c.table.as_dict() == data
            assert await c.read_in_agent(hc, data) == data
        finally:
            await hc.worker.stop()

    run(scenario())


@pytest.mark.parametrize("value_kind", sorted(VALUES))
def test_values_keep_their_type_through_the_codec_of_an_untyped_table(value_kind: str) -> None:
    app = agentstream.App(f"codec-{uuid.uuid4().hex[:6]}", broker="memory://")
    table = app.Table("t")

    @settings(max_examples=30, deadline=None)
    @given(VALUES[value_kind])
    def check(value: Any) -> None:
        assert table.value_codec.loads(table.value_codec.dumps(value)) == value

    check()


@pytest.mark.parametrize("key_kind", sorted(KEYS))
def test_typed_table_keys_round_trip_and_str_bytes_keys_are_fausts_raw_bytes(key_kind: str) -> None:
    app = agentstream.App(f"keys-{uuid.uuid4().hex[:6]}", broker="memory://")
    key_type, keys = KEYS[key_kind]
    table = app.Table("t", key_type=key_type)
    topic = app.topic("src", key_type=key_type)

    @settings(max_examples=50, deadline=None)
    @given(keys)
    def check(key: Any) -> None:
        kb = table.key_codec.dumps(key)
        assert kb == topic.key_codec.dumps(key)  # one encoding: a stream keyed alike lands alike
        assert table.key_codec.loads(kb) == key
        if key_kind == "str":
            assert kb == key.encode("utf-8")
        elif key_kind == "bytes":
            assert kb == key

    check()
