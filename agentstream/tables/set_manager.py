"""Faust's SetTableManager: set operations sent through a topic to the worker owning the key.

``app.SetTable("tags", start_manager=True)`` declares the topic ``<table>-setmanager`` (keyed
like the table, partitioned like it) and an agent over it; ``await tags.manager.add(key, x)``
from anywhere (a web view, a timer, another agent) sends the operation, and the agent applies
it in the key's own partition, so no update is lost to two workers writing one key. The records
are Faust's (``{"action": "ADD", "members": [...]}`` under the ``@SetManagerOperation``
namespace), so a Faust producer and agentstream's agent understand each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..exceptions import TopologyError
from ..models import Record
from ..models.record import lookup_model

if TYPE_CHECKING:
    from .kinds import SetTable

__all__ = ["SetManagerOperation", "SetTableManager", "SET_ACTIONS"]

# Faust's SetAction values -> the set method the owner applies (Faust sends DISCARD for
# difference_update too)
SET_ACTIONS = {
    "ADD": "update",
    "DISCARD": "difference_update",
    "CLEAR": "clear",
    "INTERSECTION": "intersection_update",
    "SYMDIFF": "symmetric_difference_update",
}


class SetManagerOperation(Record, namespace="@SetManagerOperation"):
    """One set operation on the manager topic (Faust's record, field for field)."""

    action: str
    members: list[Any]


def _member(value: Any) -> Any:
    """A member as sent: a Record comes back from its ``__faust``-tagged dict (Faust's maybe_model)."""
    model = lookup_model(value)
    return model.from_data(value) if model is not None else value


class SetTableManager:
    """``table.manager``: ``add``, ``discard``, ``clear``, ``difference_update``,
    ``intersection_update``, ``symmetric_difference_update`` routed to the key's owner."""

    def __init__(self, table: SetTable) -> None:
        self.set_table = table
        self.app = table.app
        self.enabled = table.start_manager
        self.agent: Any = None
        self.topic: Any = None
        if self.enabled:
            self._enable()

    def _enable(self) -> None:
        table = self.set_table
        key_type = table.key_type if table.key_type is not None else str
        self.topic = self.app.topic(
            table.manager_topic_name,
            key_type=key_type,
            value_type=SetManagerOperation,
            partitions=table._partitions,
        )
        self.agent = self.app.agent(self.topic, name=f"faust.SetTable.manager.{table.name}")(self._modify_set)

    async def _modify_set(self, stream: Any) -> None:
        async for key, operation in stream.items():
            method = SET_ACTIONS.get(operation.action)
            if method is None:
                raise ValueError(
                    f"set table {self.set_table.name!r}: unknown set operation {operation.action!r} for key {key!r}"
                )
            members = {_member(m) for m in operation.members}
            target = self.set_table[key]
            if method == "clear":
                target.clear()
            else:
                getattr(target, method)(members)

    async def _send(self, action: str, key: Any, members: Iterable[Any]) -> None:
        if not self.enabled:
            raise TopologyError(
                f"set table {self.set_table.name!r} has no manager: declare it with "
                f"app.SetTable({self.set_table.name!r}, start_manager=True)"
            )
        await self.topic.send(key=key, value=SetManagerOperation(action=action, members=list(members)))

    async def add(self, key: Any, member: Any) -> None:
        """Add ``member`` to the set at ``key``."""
        await self._send("ADD", key, [member])

    async def discard(self, key: Any, member: Any) -> None:
        """Remove ``member`` from the set at ``key`` (if there)."""
        await self._send("DISCARD", key, [member])

    async def clear(self, key: Any) -> None:
        """Empty the set at ``key``."""
        await self._send("CLEAR", key, [])

    async def difference_update(self, key: Any, members: Iterable[Any]) -> None:
        """Remove ``members`` from the set at ``key``."""
        await self._send("DISCARD", key, members)

    async def intersection_update(self, key: Any, members: Iterable[Any]) -> None:
        """Keep only the members also in ``members``."""
        await self._send("INTERSECTION", key, members)

    async def symmetric_difference_update(self, key: Any, members: Iterable[Any]) -> None:
        """Keep the members in exactly one of the set and ``members``."""
        await self._send("SYMDIFF", key, members)
