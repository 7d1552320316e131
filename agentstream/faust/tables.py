"""``faust.tables``: table classes."""

from agentstream.tables.kinds import GlobalTable, SetGlobalTable, SetTable
from agentstream.tables.table import Table

__all__ = ["Table", "GlobalTable", "SetTable", "SetGlobalTable"]
