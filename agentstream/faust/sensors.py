"""``faust.sensors``: the Sensor base class and the Monitor (``app.monitor``)."""

from agentstream.sensors import Monitor, Sensor, SensorDelegate

__all__ = ["Monitor", "Sensor", "SensorDelegate"]
