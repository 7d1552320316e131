"""agentstream: Faust-style stream processing on Kafka Streams' architecture.

Declare an :class:`App`, its topics, :class:`Record` models, agents and tables; run workers with
``agentstream -A module worker``. See the README for a tour.
"""

from __future__ import annotations

from .app import App
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

__version__ = "0.1.0"

__all__ = [
    "App",
    "Record",
    "Stream",
    "Topic",
    "Event",
    "current_event",
    "AgentStreamError",
    "ConfigError",
    "ImproperlyConfigured",
    "PartitionCountMismatch",
    "SerializationError",
    "TopologyError",
    "ValidationError",
]
