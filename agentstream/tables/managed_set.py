"""The value a SetTable hands out: a set that writes itself back to its table on every change.

A module of its own because a subclass of ``set`` cannot be a compiled (mypyc) class, and
``tables/table.py`` is compiled.
"""

from __future__ import annotations

from typing import Any, Protocol


class _Writable(Protocol):
    def __setitem__(self, key: Any, value: Any) -> None: ...


class ManagedSet(set):  # type: ignore[type-arg]
    """``table[key]`` of a SetTable: ``add``/``discard``/``remove``/``update``/``clear`` store the
    new set under ``key`` (and so in the changelog) at once."""

    def __init__(self, table: _Writable, key: Any, items: Any) -> None:
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
