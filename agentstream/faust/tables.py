"""``faust.tables``: table classes."""

from agentstream.tables.table import GlobalTable, SetGlobalTable, SetTable, Table

__all__ = ["Table", "GlobalTable", "SetTable", "SetGlobalTable"]
