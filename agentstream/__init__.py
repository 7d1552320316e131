"""agentstream: Faust-style stream processing on Kafka Streams' architecture.

Declare an :class:`App`, its topics, :class:`Record` models, agents and tables; run workers with
``agentstream -A module worker`` (or :class:`Worker` from a script). See the README for a tour.

``__all__`` is the public API, pinned by tests/unit/test_public_api.py. Faust's own spellings
(``Model``, ``StreamT`` and the other ``...T`` aliases, ``uuid``) are answered too, from the
:mod:`agentstream.faust` compat package, so ``import agentstream as faust`` runs Faust apps; they
are not part of ``__all__``.
"""

import importlib
import typing as _typing

# isort: off
# First: chooses between the compiled hot path and its pure-Python source before either is imported.
from . import compiled as _compiled  # noqa: F401
# isort: on

from ._version import __version__
from .agents.agent import Agent
from .app import App
from .channels import Channel
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
from .sensors import Monitor, Sensor
from .service import Service
from .signals import Signal, SyncSignal
from .streams import Stream
from .tables.final_results import WindowFinal
from .tables.kinds import GlobalTable, SetGlobalTable, SetTable
from .tables.table import Table
from .tables.windows import HoppingWindow, SlidingWindow, TumblingWindow
from .topics import Topic, TopicGroup

__all__ = [
    # declarations
    "App",
    "Agent",
    "Topic",
    "TopicGroup",
    "Channel",
    "Record",
    "Stream",
    "Event",
    "current_event",
    "Table",
    "GlobalTable",
    "SetTable",
    "SetGlobalTable",
    "TumblingWindow",
    "HoppingWindow",
    "SlidingWindow",
    "WindowFinal",
    "Service",
    # running and observing
    "Worker",
    "Sensor",
    "Monitor",
    "Signal",
    "SyncSignal",
    # broker credentials
    "SSLCredentials",
    "SASLCredentials",
    "GSSAPICredentials",
    "OAuthCredentials",
    # errors
    "AgentStreamError",
    "ConfigError",
    "ImproperlyConfigured",
    "PartitionCountMismatch",
    "SerializationError",
    "TopologyError",
    "ValidationError",
    "__version__",
]

if _typing.TYPE_CHECKING:
    from .faust.worker import Worker

_LAZY_MODULES = {
    "web": ".web",
    "cli": ".cli",
    "crontab": ".crontab",
    "testing": ".testing",
    "serializers": ".faust.serializers",
}


def __getattr__(name: str) -> object:
    """What declarations do not need, imported on first use so that ``import agentstream`` stays
    light: ``Worker`` (the runtime, with Faust's start-up), ``web``/``cli``/``testing``... (aiohttp,
    click and the memory broker are heavy), and Faust's names (``faust.StreamT``, ``faust.uuid()``...)
    from the compat package."""
    if name == "Worker":
        from .faust.worker import Worker

        return Worker
    if name in _LAZY_MODULES:
        return importlib.import_module(_LAZY_MODULES[name], __name__)
    if name.startswith("_"):  # no Faust name is private; probes (pytest's `_mock_name`, `__wrapped__`) stay light
        raise AttributeError(f"module 'agentstream' has no attribute {name!r}")
    faust = importlib.import_module(".faust", __name__)
    if name in faust.__all__:  # what agentstream has itself is found before __getattr__ is asked
        return getattr(faust, name)
    raise AttributeError(f"module 'agentstream' has no attribute {name!r}")
