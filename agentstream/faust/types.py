"""``faust.types``: Faust's abstract type names; here each is the concrete agentstream class
(agentstream has one implementation per concept, so the ``...T`` names are aliases)."""

from agentstream import (
    Agent as AgentT,
    App as AppT,
    Channel as ChannelT,
    Event as EventT,
    Record as ModelT,
    Record as RecordT,
    Sensor as SensorT,
    Service as ServiceT,
    Stream as StreamT,
    Table as TableT,
    Topic as TopicT,
)
from agentstream.settings import Settings
from agentstream.tables.windows import Window as WindowT
from agentstream.transport.base import TP, Message

CollectionT = TableT

__all__ = ["AgentT", "AppT", "ChannelT", "CollectionT", "EventT", "Message", "ModelT", "RecordT", "SensorT",
           "ServiceT", "Settings", "StreamT", "TableT", "TopicT", "TP", "WindowT"]
