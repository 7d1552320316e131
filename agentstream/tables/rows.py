"""The read-only dict methods a table-shaped object derives from its ``items()``.

A :class:`~agentstream.tables.table.Table` and a :class:`~agentstream.joins.tables.JoinedTable`
both know how to list their rows (the partitions this worker holds); keys, values, length and
iteration follow from that the same way for both, so they are written once here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["Rows"]


class Rows:
    """Mixin: ``keys``, ``values``, ``as_dict``, ``iter()`` and ``len()`` over :meth:`items`."""

    __slots__ = ()

    def items(self) -> Iterator[tuple[Any, Any]]:
        raise NotImplementedError

    def keys(self) -> Iterator[Any]:
        return (k for k, _ in self.items())

    def values(self) -> Iterator[Any]:
        return (v for _, v in self.items())

    def as_dict(self) -> dict[Any, Any]:
        return dict(self.items())

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    def __len__(self) -> int:
        return sum(1 for _ in self.items())
