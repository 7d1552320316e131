"""agentstream: Faust-style stream processing on Kafka Streams' architecture.

Declare an :class:`App`, its topics, :class:`Record` models, agents and tables; run workers with
``agentstream -A module worker``. See the README for a tour.
"""

from __future__ import annotations

from .app import App
from .credentials import GSSAPICredentials, OAuthCredentials, SASLCredentials, SSLCredentials
from .events import Event, current_event
from .exceptions import (
    AgentStreamError,
    ConfigError,
    ImproperlyConfigured,
    PartitionCountMismatch,
    SerializationError,
    TopologyError,
    ValidationError,
)
from .models import Record
from .streams import Stream
from .topics import Topic

# Faust's public names, so ``import agentstream as faust`` runs Faust apps (docs/migrating-from-faust.md)
from .agents.agent import Agent
from .channels import Channel
from .faust_compat import uuid
from .faust_worker import Worker
from .sensors import Monitor, Sensor
from .signals import Signal, SyncSignal
from .topics import TopicGroup
from .service import Service, ServiceT
from .tables.table import GlobalTable, SetGlobalTable, SetTable, Table
from .tables.windows import HoppingWindow, SlidingWindow, TumblingWindow

# These install operators into the layers below them (Stream.join, Table.tumbling/hopping/join,
# Agent.test_context, App.main): imported here, so they are there whatever the app imports first.
from . import cli as _cli, joins as _joins, testing as _testing  # noqa: F401
from .tables import windowed as _windowed  # noqa: F401

Model = Record
EventT = Event
StreamT = Stream
TopicT = Topic
ChannelT = Channel
AgentT = Agent
TableT = Table

from ._version import __version__


def __getattr__(name: str) -> object:
    """``faust.web``, ``faust.cli``, ``faust.serializers``: imported on first use (aiohttp is heavy)."""
    if name in ("web", "cli", "serializers", "crontab", "testing"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'agentstream' has no attribute {name!r}")

__all__ = [
    "App",
    "Record",
    "Stream",
    "Topic",
    "Event",
    "current_event",
    "Agent",
    "Channel",
    "Service",
    "ServiceT",
    "Worker",
    "uuid",
    "Sensor",
    "Monitor",
    "Signal",
    "SyncSignal",
    "TopicGroup",
    "Table",
    "GlobalTable",
    "SetTable",
    "SetGlobalTable",
    "TumblingWindow",
    "HoppingWindow",
    "SlidingWindow",
    "Model",
    "EventT",
    "StreamT",
    "TopicT",
    "ChannelT",
    "AgentT",
    "TableT",
    "AgentStreamError",
    "ConfigError",
    "ImproperlyConfigured",
    "PartitionCountMismatch",
    "SerializationError",
    "TopologyError",
    "ValidationError",
    "SSLCredentials",
    "SASLCredentials",
    "GSSAPICredentials",
    "OAuthCredentials",
]
