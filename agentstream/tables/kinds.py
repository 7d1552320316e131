"""The kinds of table besides :class:`~agentstream.tables.table.Table`: global tables and tables
of sets (Faust's GlobalTable, SetTable and SetGlobalTable).

Plain Python subclasses of the compiled Table (as an app's own subclass is), in a module of their
own: a compiled module's classes cannot inherit from each other more than once, and
SetGlobalTable is both a SetTable and a GlobalTable.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any, Self

from .. import codecs
from .set_manager import SetTableManager
from .table import Table

__all__ = ["GlobalTable", "SetTable", "SetGlobalTable", "ManagedSet", "SetCodec"]


class GlobalTable(Table):
    """Every worker holds every partition (restored before agents start); reads see all keys."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.is_global = True


class SetTable(Table):
    """A table of sets (Faust's SetTable): ``table[k].add(x)`` is written back automatically.

    ``start_manager=True`` adds Faust's :class:`~agentstream.tables.set_manager.SetTableManager`
    as ``table.manager`` (operations sent to the key's owner through ``<name>-setmanager``, or
    ``manager_topic_name``/``manager_topic_suffix``)."""

    manager_topic_suffix = "-setmanager"

    def __init__(
        self,
        *args: Any,
        start_manager: bool = False,
        manager_topic_name: str | None = None,
        manager_topic_suffix: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("default", set)
        super().__init__(*args, **kwargs)
        self.value_codec = SetCodec()
        self.start_manager = start_manager
        if manager_topic_suffix is not None:
            self.manager_topic_suffix = manager_topic_suffix
        self.manager_topic_name = manager_topic_name or self.name + self.manager_topic_suffix
        self.manager = SetTableManager(self)

    def __getitem__(self, key: Any) -> Any:
        return ManagedSet(self, key, super().__getitem__(key))


class SetGlobalTable(SetTable, GlobalTable):
    """A table of sets held in full by every worker (Faust's SetGlobalTable)."""


class ManagedSet(set):  # type: ignore[type-arg]
    """``table[key]`` of a SetTable: ``add``/``discard``/``remove``/``update``/``clear`` store the
    new set under ``key`` (and so in the changelog) at once."""

    def __init__(self, table: Table, key: Any, items: Any) -> None:
        super().__init__(items or ())
        self._table, self._key = table, key

    def _save(self) -> None:
        self._table[self._key] = set(self)

    def add(self, item: Any) -> None:
        super().add(item)
        self._save()

    def discard(self, item: Any) -> None:
        super().discard(item)
        self._save()

    def remove(self, item: Any) -> None:
        super().remove(item)
        self._save()

    def update(self, *others: Any) -> None:
        super().update(*others)
        self._save()

    def clear(self) -> None:
        super().clear()
        self._save()

    def difference_update(self, *others: Any) -> None:
        super().difference_update(*others)
        self._save()

    def intersection_update(self, *others: Any) -> None:
        super().intersection_update(*others)
        self._save()

    def symmetric_difference_update(self, other: Any) -> None:
        super().symmetric_difference_update(other)
        self._save()

    def pop(self) -> Any:
        item = super().pop()
        self._save()
        return item

    def __ior__(self, other: AbstractSet[Any]) -> Self:  # type: ignore[misc]  # in place, as set does
        self.update(other)
        return self

    def __isub__(self, other: AbstractSet[Any]) -> Self:  # type: ignore[misc]  # in place, as set does
        self.difference_update(other)
        return self

    def __iand__(self, other: AbstractSet[Any]) -> Self:  # type: ignore[misc]  # in place, as set does
        self.intersection_update(other)
        return self

    def __ixor__(self, other: AbstractSet[Any]) -> Self:  # type: ignore[misc]  # in place, as set does
        self.symmetric_difference_update(other)
        return self


class SetCodec:
    """A SetTable's values: a set as a JSON list (sorted, so equal sets give equal bytes)."""

    def dumps(self, obj: Any) -> bytes | None:
        return codecs.get("json").dumps(sorted(obj, key=repr))

    def loads(self, data: bytes | None) -> set[Any]:
        return set(codecs.get("json").loads(data) or ())
