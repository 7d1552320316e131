"""``faust.tables``: table classes, and the table manager Faust's ``TableManager`` setting subclasses."""

from agentstream.tables.kinds import GlobalTable, SetGlobalTable, SetTable
from agentstream.tables.manager import TableManager
from agentstream.tables.table import Table

__all__ = ["Table", "GlobalTable", "SetTable", "SetGlobalTable", "TableManager"]
