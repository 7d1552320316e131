"""``faust.sensors.monitor``: the Monitor (``app.monitor``) and its per-table counters."""

from agentstream.sensors import Monitor, TableState

__all__ = ["Monitor", "TableState"]
