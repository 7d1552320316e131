"""``faust.types``: Faust's abstract type names; here each is the concrete agentstream class
(agentstream has one implementation per concept, so the ``...T`` names are aliases)."""

from __future__ import annotations

from agentstream.agents.agent import Agent as AgentT
from agentstream.app import App as AppT
from agentstream.channels import Channel as ChannelT
from agentstream.events import Event as EventT
from agentstream.models import Record as ModelT
from agentstream.models import Record as RecordT
from agentstream.sensors import Sensor as SensorT
from agentstream.service import Service as ServiceT
from agentstream.settings import Settings
from agentstream.streams import Stream as StreamT
from agentstream.tables.table import Table as TableT
from agentstream.tables.windows import Window as WindowT
from agentstream.topics import Topic as TopicT
from agentstream.transport.base import TP, Message

CollectionT = TableT

__all__ = [
    "AgentT",
    "AppT",
    "ChannelT",
    "CollectionT",
    "EventT",
    "Message",
    "ModelT",
    "RecordT",
    "SensorT",
    "ServiceT",
    "Settings",
    "StreamT",
    "TableT",
    "TopicT",
    "TP",
    "WindowT",
]
