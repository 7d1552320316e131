"""``faust.sensors.base``: the Sensor base class and the delegate ``app.sensors`` is."""

from agentstream.sensors import Sensor, SensorDelegate

__all__ = ["Sensor", "SensorDelegate"]
