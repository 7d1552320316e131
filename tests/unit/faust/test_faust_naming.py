"""topic_naming='faust' (issue 16): Faust's internal topic names and table record formats, so
agentstream can continue a Faust app on its topics (the end-to-end proof against faust-streaming
is tests/integration/test_faust_takeover.py)."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.testing import AppHarness
from agentstream.topology import warn_legacy_agent_topics
from agentstream.transport.base import TopicSpec
from agentstream.transport.memory import MemoryTransport
from agentstream.transport.partitioner import default_partition


class Word(agentstream.Record):
    word: str


def faust_app(app_id: str, **options: Any) -> agentstream.App:
    return agentstream.App(app_id, broker="memory://", topic_partitions=3, topic_naming="faust", **options)


def test_settings_validate_topic_naming_and_version() -> None:
    with pytest.raises(ConfigError, match="topic_naming"):
        agentstream.App("x", broker="memory://", topic_naming="kafka-streams")
    with pytest.raises(ConfigError, match="version"):
        agentstream.App("x", broker="memory://", topic_naming="faust", version=0)
    assert faust_app("x", version=3).id == "x-v3"  # Faust's conf.id: group id and topic prefix
    assert faust_app("x").id == "x"  # version 1: no suffix, as in Faust
    assert agentstream.App("x", broker="memory://", version=3).id == "x-v3"  # a new app in either naming
    app = faust_app("x", version=2)
    assert app.settings.replace(commit_interval=2.0).id == "x-v2"  # never suffixed twice


@pytest.mark.asyncio
async def test_faust_names_of_changelog_agent_and_repartition_topics() -> None:
    app = faust_app(f"fn{uuid.uuid4().hex[:6]}", version=2)
    source = app.topic("src", value_type=Word)
    counts = app.Table("counts", default=int)

    @app.agent(value_type=Word)
    async def count(stream: agentstream.Stream) -> None:
        async for w in stream.group_by(Word.word):
            counts[w.word] += 1

    @app.agent(source)
    async def by_name(stream: agentstream.Stream) -> None:
        async for w in stream.group_by(lambda w: w.word, name="w"):
            counts[w.word] += 1

    await app.discover()
    gid = app.id
    assert gid.endswith("-v2")
    names = set(app.topics)
    assert f"{gid}-counts-changelog" in names
    assert f"{gid}-{__name__}.count" in names  # <id>-<module>.<function name> (Faust's shortname)
    # derived from an agent topic (already prefixed): no second prefix; the field's Faust name
    assert f"{gid}-{__name__}.count-Word.word-repartition" in names
    assert f"{gid}-src-w-repartition" in names  # from a plain topic: <id>-<topic>-<name>-repartition


@pytest.mark.asyncio
async def test_faust_table_records_json_keys_and_faust_window_keys_routed_by_raw_key() -> None:
    app = faust_app(f"fr{uuid.uuid4().hex[:6]}")
    words = app.topic("words", key_type=str, value_type=str)
    counts = app.Table("counts", default=int)
    daily = app.Table("daily", default=int).tumbling(60, expires=600)

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:
        async for word in stream:
            counts[word] += 1
            daily[word] += 1

    async with AppHarness(app) as h:
        for word in ["hello", "naïve", "hello"]:
            await h.send("words", word, key=word, timestamp=125.0)
        await h.wait_idle()
        assert counts.as_dict() == {"hello": 2, "naïve": 1}
        assert daily.as_dict() == {("hello", (120.0, 180.0)): 2, ("naïve", (120.0, 180.0)): 1}
        transport = app.transport
        assert isinstance(transport, MemoryTransport)
        records = [(m.partition, m.key, m.value) for m in transport.read_topic(f"{app.id}-counts-changelog")]
        # Faust's bytes: JSON keys (stdlib json: non-ASCII escaped), JSON values, and the partition the
        # raw key hashes to (where Faust's group_by puts the record, and so its changelog write)
        assert (default_partition(b"hello", 3), b'"hello"', b"2") in records
        assert (default_partition("naïve".encode(), 3), b'"na\\u00efve"', b"1") in records
        window_keys = {m.key for m in transport.read_topic(f"{app.id}-daily-changelog")}
        assert window_keys == {b'["hello",[120.0,179.9]]', b'["na\\u00efve",[120.0,179.9]]'}  # end = start + size - 0.1
        assert all(orjson.loads(k) for k in window_keys)  # nothing but Faust-readable keys (no stream-time entry)


@pytest.mark.parametrize("naming", ["agentstream", "faust"])
def test_an_agent_without_a_topic_reads_fausts_implicit_topic_in_either_naming(naming: str) -> None:
    """Issue 44: ``@app.agent(value_type=...)`` reads ``<id>-<module>.<function>`` (Faust's
    name, which producers follow), ``<id>-<name>`` when given ``name=``, as Faust."""
    app = agentstream.App(f"im{uuid.uuid4().hex[:6]}", broker="memory://", topic_naming=naming)

    @app.agent(value_type=Word)
    async def order(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    @app.agent(value_type=Word, name="named")
    async def other(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    assert [t.name for t in order.topics] == [f"{app.id}-{__name__}.order"]
    assert [t.name for t in other.topics] == [f"{app.id}-named"]


def test_the_script_run_as_main_is_named_after_its_file_as_faust_does(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    from agentstream.naming import main_module_name

    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    main = types.ModuleType("__main__")
    main.__file__ = str(tmp_path / "pkg" / "sub" / "shop.py")
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert main_module_name() == "sub.pkg.shop"  # Faust's order (innermost package first)
    main.__file__ = str(tmp_path / "shop.py")
    assert main_module_name() == "shop"

    app = agentstream.App(f"mm{uuid.uuid4().hex[:6]}", broker="memory://")

    async def order(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    order.__module__ = "__main__"
    assert [t.name for t in app.agent(value_type=Word)(order).topics] == [f"{app.id}-shop.order"]


@pytest.mark.asyncio
async def test_a_starting_worker_warns_when_the_agents_pre_faust_topic_exists(caplog: pytest.LogCaptureFixture) -> None:
    app = agentstream.App(f"lg{uuid.uuid4().hex[:6]}", broker=f"memory://lg-{uuid.uuid4().hex[:6]}")

    @app.agent(value_type=Word)
    async def order(stream: agentstream.Stream) -> None:
        async for _ in stream:
            pass

    transport = app.transport
    assert isinstance(transport, MemoryTransport)
    with caplog.at_level("WARNING", logger="agentstream.topology"):
        await warn_legacy_agent_topics(app, transport)  # (what a starting worker calls)
        assert not caplog.records  # no such topic: nothing to say
        await transport.ensure_topics([TopicSpec(f"{app.id}-order", 1)])
        await warn_legacy_agent_topics(app, transport)
    warned = [r.getMessage() for r in caplog.records if "is not read" in r.getMessage()]
    assert len(warned) == 1 and f"the topic {app.id}-order " in warned[0]
    assert f"app.topic('{app.id}-{__name__}.order', '{app.id}-order')" in warned[0]
