"""Faust's ``table.data``: a table's rows on this worker as a read-only mapping.

Faust hands out its store; writing to it would skip the changelog, so agentstream's view only
reads (through the table: the same routing, codecs and caches), and writes go through the table."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["TableData"]


class TableData(Mapping[Any, Any]):
    """``table.data``: ``data[key]`` (KeyError when absent: no default), ``len``, iteration, ``items()``."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def __getitem__(self, key: Any) -> Any:
        if key not in self._table:
            raise KeyError(key)
        return self._table[key]

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in self._table.items())

    def __len__(self) -> int:
        return sum(1 for _ in self._table.items())

    def __repr__(self) -> str:
        return f"<data of table {self._table.name}>"
