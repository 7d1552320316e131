"""Faust's Table API of issue 40, item 10: a subclass's on_key_get/set/del and on_clear hooks are
called; table.data, info(), changelog_topic_name; on_recover and as_ansitable on windowed tables;
stream.echo('topic-name')."""

from __future__ import annotations

from typing import Any

import pytest

import agentstream
from agentstream.testing import AppHarness


class AuditedTable(agentstream.Table):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[Any, ...]] = []

    def on_key_get(self, key: Any) -> None:
        self.calls.append(("get", key))

    def on_key_set(self, key: Any, value: Any) -> None:
        self.calls.append(("set", key, value))

    def on_key_del(self, key: Any) -> None:
        self.calls.append(("del", key))

    def on_clear(self) -> None:
        self.calls.append(("clear",))


async def test_subclass_hooks_are_called() -> None:
    app = agentstream.App("table-hooks", topic_partitions=1, Table=AuditedTable)
    table = app.Table("counts", default=int)
    assert isinstance(table, AuditedTable)

    @app.agent(app.topic("words", value_type=str))
    async def count(stream: Any) -> None:
        async for word in stream:
            table[word] += 1
            if word == "drop":
                del table[word]
            if word == "reset":
                table.clear()

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("words", "a")
        await h.send("words", "drop")
        await h.send("words", "reset")
    assert table.calls == [
        ("get", "a"),
        ("set", "a", 1),
        ("get", "drop"),
        ("set", "drop", 1),
        ("del", "drop"),
        ("get", "reset"),
        ("set", "reset", 1),
        ("clear",),
    ]


async def test_data_info_and_changelog_topic_name() -> None:
    app = agentstream.App("table-info", topic_partitions=1)
    table = app.Table("totals", default=int, help="the totals", extra_topic_configs={"retention.ms": 1000})
    assert table.changelog_topic_name == "table-info-totals-changelog"
    info = table.info()
    assert (info["app"], info["name"], info["default"], info["help"]) == (app, "totals", int, "the totals")
    assert info["extra_topic_configs"] == {"retention.ms": "1000"}

    @app.agent(app.topic("words", value_type=str))
    async def count(stream: Any) -> None:
        async for word in stream:
            table[word] += 1

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("words", "x")
        await h.send("words", "x")
        assert dict(table.data) == {"x": 2} and len(table.data) == 1
        with pytest.raises(KeyError):
            table.data["absent"]  # no default, as Faust's store


def test_windowed_tables_pass_faust_s_api_on() -> None:
    app = agentstream.App("table-windowed", topic_partitions=1)
    windowed = app.Table("per_minute", default=int).tumbling(60.0, expires=3600.0)
    assert windowed.changelog_topic_name == "table-windowed-per_minute-changelog"
    assert windowed.info()["name"] == "per_minute"

    @windowed.on_recover
    async def recovered() -> None:
        pass

    assert windowed.table.info()["recover_callbacks"] == [recovered]
    text = windowed.as_ansitable(title="{table.name} now")
    assert text.splitlines()[0] == "per_minute now"


async def test_stream_echo_to_a_topic_by_name() -> None:
    app = agentstream.App("echo-by-name", topic_partitions=1)

    @app.agent(app.topic("src", value_type=str))
    async def relay(stream: Any) -> None:
        async for _ in stream.echo("echo-copy"):
            pass

    async with AppHarness(app, virtual_time=True) as h:
        await h.send("src", "v1", key="k")
        await h.wait_idle()
        assert [v for _, v in h.read("echo-copy")] == ["v1"]
