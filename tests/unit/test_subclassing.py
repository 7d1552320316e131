"""Public classes stay open to subclasses in the default build: the compiled ones (Topic, Table,
the codecs) are compiled with ``allow_interpreted_subclasses``, the table kinds are plain Python
subclasses of the compiled Table. Each test overrides a method the runtime calls itself (from
compiled code where the class is compiled) and checks that the override ran."""

from __future__ import annotations

import uuid
from typing import Any

import agentstream
from agentstream.compiled import BUILD
from agentstream.testing import AppHarness
from agentstream.topics import Topic


def _app(**settings: Any) -> agentstream.App:
    return agentstream.App(f"subclass-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, **settings)


async def test_a_topic_subclass_encodes_what_an_agent_sends() -> None:
    """``Topic.send`` (compiled) encodes through ``self.encode``: a subclass's override runs."""

    class Stamped(Topic):
        encoded = 0

        def encode(self, key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
            type(self).encoded += 1
            kb, vb = super().encode(key, value)
            return kb, None if vb is None else b"stamped:" + vb

    app = _app()
    words = app.topic("words", value_type=str)
    out = Stamped(app, "out", value_serializer="raw")
    app.topics[out.name] = out  # declared: created at start-up

    @app.agent(words)
    async def forward(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            await out.send(value=word)

    async with AppHarness(app) as h:
        await h.send("words", "hi")
        await h.wait_idle()
        assert [v for _, v in h.read("out")] == [b"stamped:hi"]  # raw: the str's UTF-8
    assert Stamped.encoded == 1


async def test_table_kinds_and_a_table_subclass_take_writes_through_their_overrides() -> None:
    """A Table subclass's ``__setitem__`` sees every write an agent makes, and the kinds Faust
    has (GlobalTable, SetTable, SetGlobalTable) are subclasses of Table and of each other."""

    class Audited(agentstream.Table):
        writes: list[Any] = []

        def __setitem__(self, key: Any, value: Any) -> None:
            type(self).writes.append((key, value))
            super().__setitem__(key, value)

    app = _app()
    counts = Audited(app, "counts", default=int)
    app.tables["counts"] = counts
    tags = app.SetTable("tags")
    words = app.topic("words", value_type=str)

    @app.agent(words)
    async def count(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for word in stream:
            counts[word] += 1
            tags[word].add(len(word))

    async with AppHarness(app) as h:
        for word in ["a", "bb", "a"]:
            await h.send("words", word, key=word)
        await h.wait_idle()
        assert h.table("counts") == {"a": 2, "bb": 1}
        assert h.table("tags") == {"a": {1}, "bb": {2}}
    assert Audited.writes == [("a", 1), ("bb", 1), ("a", 2)]
    both = app.SetGlobalTable("both")
    assert isinstance(both, agentstream.SetTable) and isinstance(both, agentstream.GlobalTable)
    assert both.is_global and not tags.is_global and app.GlobalTable("g").is_global


def test_the_default_build_is_what_these_tests_ran() -> None:
    """``make test`` runs these on the compiled build (``make unit-pure`` on the pure one)."""
    assert BUILD in ("compiled", "pure")
