"""Faust's SetTableManager (``app.SetTable(name, start_manager=True)``): operations sent from
outside any agent reach the key's owner through ``<name>-setmanager``. The expected sets are
what a faust-streaming 0.11 worker gave for the same calls: ``{"j": set(), "k": {1, 5}}``."""

from __future__ import annotations

import uuid

import pytest

import agentstream
from agentstream.exceptions import TopologyError
from agentstream.tables.set_manager import SetManagerOperation
from agentstream.testing import AppHarness


class Item(agentstream.Record):
    sku: str


async def test_manager_operations_reach_the_owner_and_none_is_lost() -> None:
    app = agentstream.App(f"g3s-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=4, store="memory://")
    tags = app.SetTable("tags", start_manager=True)
    carts = app.SetTable("carts", start_manager=True, manager_topic_suffix="-ops")
    assert tags.manager.topic.name == "tags-setmanager" and carts.manager.topic.name == "carts-ops"
    async with AppHarness(app) as h:
        m = tags.manager
        for n in (1, 2, 3):
            await m.add("k", n)
        await m.discard("k", 2)
        await m.intersection_update("k", [1, 3, 4])
        await m.symmetric_difference_update("k", [3, 5])
        await m.difference_update("j", [1])
        await m.add("j", 9)
        await m.clear("j")
        for n in range(50):  # many senders' updates to one key: every one lands
            await m.add("many", n)
        await carts.manager.add("c1", Item("a"))
        await h.wait_idle()
        assert h.table("tags") == {"j": set(), "k": {1, 5}, "many": set(range(50))}
        assert h.table("carts") == {"c1": {Item("a")}}
        # Faust's wire format: {"action": "ADD", "members": [...]} under "@SetManagerOperation"
        raw = [v for _, v in h.read("tags-setmanager")][0]
        assert isinstance(raw, SetManagerOperation) and raw.action == "ADD" and raw.members == [1]


async def test_a_manager_that_was_not_started_says_how_to_start_it() -> None:
    app = agentstream.App(f"g3s-{uuid.uuid4().hex[:6]}", broker="memory://")
    tags = app.SetTable("tags")
    with pytest.raises(TopologyError, match="start_manager=True"):
        await tags.manager.add("k", 1)
