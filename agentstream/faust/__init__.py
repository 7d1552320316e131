"""``agentstream.faust``: the Faust compatibility package, with Faust's module layout.

The rewrite a Faust app needs is one word per import line (docs/migrating-from-faust.md):
``import faust`` -> ``import agentstream as faust`` (or ``import agentstream.faust as faust``) and
``from faust.X import Y`` -> ``from agentstream.faust.X import Y``. This package holds Faust's
top-level names (agentstream's classes, plus Faust's aliases ``Model``, ``StreamT``..., ``uuid`` and
Faust's ``Settings``, ``Schema``, ``Codec``, ``ModelOptions``, ``Window``; the exception classes are
in ``faust.exceptions`` and answered here too) and its submodules (``types``, ``web``, ``cli``, ``sensors``, ``models.fields``,
``tables``, ``streams``, ``agents``, ``serializers``, ``windows``, ``topics``, ``channels``,
``events``, ``exceptions``, ``app``, ``worker``, ``utils``) hold the names Faust has there.

Compat sits on top of the package: it imports the core, nothing in the core imports it (the
translation of Faust's *arguments*, which the App needs while it is constructed, is
:mod:`agentstream.faust_args` in the foundation). ``import agentstream`` imports this package for
the one :class:`Worker` class and to answer Faust's names on ``agentstream`` itself.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentstream._version import __version__  # noqa: F401  (faust.__version__)
from agentstream.agents.agent import Agent
from agentstream.app import App
from agentstream.channels import Channel
from agentstream.credentials import GSSAPICredentials, OAuthCredentials, SASLCredentials, SSLCredentials
from agentstream.events import Event, current_event
from agentstream.models import Record
from agentstream.sensors import Monitor, Sensor
from agentstream.service import Service
from agentstream.signals import Signal, SyncSignal
from agentstream.streams import Stream
from agentstream.tables.final_results import WindowFinal
from agentstream.tables.kinds import GlobalTable, SetGlobalTable, SetTable
from agentstream.tables.table import Table
from agentstream.tables.windows import HoppingWindow, SlidingWindow, TumblingWindow
from agentstream.topics import Topic, TopicGroup

from . import events as _events  # noqa: F401  (faust.events)
from . import exceptions as _exceptions
from .models import Model, ModelOptions
from .serializers import Codec, Schema
from .types import AgentT, ChannelT, EventT, ServiceT, Settings, StreamT, TableT, TopicT
from .utils import uuid
from .windows import Window
from .worker import Worker

__all__ = [
    "App",
    "Record",
    "Stream",
    "Topic",
    "TopicGroup",
    "Event",
    "current_event",
    "Agent",
    "Channel",
    "Service",
    "Worker",
    "Sensor",
    "Monitor",
    "Signal",
    "SyncSignal",
    "Table",
    "GlobalTable",
    "SetTable",
    "SetGlobalTable",
    "TumblingWindow",
    "HoppingWindow",
    "SlidingWindow",
    "WindowFinal",
    "SSLCredentials",
    "SASLCredentials",
    "GSSAPICredentials",
    "OAuthCredentials",
    # Faust's own spellings (agentstream answers them too, outside its __all__)
    "Model",
    "EventT",
    "StreamT",
    "TopicT",
    "ChannelT",
    "AgentT",
    "TableT",
    "ServiceT",
    "uuid",
    "ModelOptions",
    "Codec",
    "Schema",
    "Settings",
    "Window",
]

_SUBMODULES = (
    "types",
    "web",
    "cli",
    "sensors",
    "models",
    "tables",
    "assignor",
    "streams",
    "agents",
    "serializers",
    "windows",
    "topics",
    "channels",
    "events",
    "exceptions",
    "app",
    "worker",
    "utils",
)


def __getattr__(name: str) -> Any:
    """``faust.web``, ``faust.serializers``...: this package's submodules, imported on first use;
    the exception classes (``faust.ImproperlyConfigured``) from ``faust.exceptions``."""
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if isinstance(getattr(_exceptions, name, None), type):
        return getattr(_exceptions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
