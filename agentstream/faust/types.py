"""``faust.types``: Faust's abstract type names; here each is the concrete agentstream class or
interface (agentstream has one implementation per concept, so the ``...T`` names are aliases), and
Faust's type aliases (``K``, ``V``, ``CodecArg``, ``HeadersArg``...) are the same shapes here.

One name cannot be honoured: ``FixupT`` (Faust's Django/framework fix-ups); creating one raises
an error saying so.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from agentstream import settings as _settings
from agentstream.agents.agent import Agent as AgentT
from agentstream.agents.manager import AgentManager
from agentstream.app import App as AppT
from agentstream.channels import Channel as ChannelT
from agentstream.events import Event as EventT
from agentstream.faust_args import translate_settings
from agentstream.joins.core import Joiner as JoinT
from agentstream.models import Record as ModelT
from agentstream.models import Record as RecordT
from agentstream.models import RecordOptions as ModelOptions
from agentstream.models.fields import Field as FieldDescriptorT
from agentstream.sensors import Sensor as SensorT
from agentstream.service import Service as ServiceT
from agentstream.streams import Stream as JoinableT
from agentstream.streams import Stream as StreamT
from agentstream.tables.store import Store as StoreT
from agentstream.tables.table import Table as TableT
from agentstream.tables.windows import HoppingWindow as WindowT
from agentstream.tables.windows import WindowRange
from agentstream.topics import Topic as TopicT
from agentstream.transport.base import TP, Delivery, Message, RecordMetadata
from agentstream.transport.base import Consumer as ConsumerT
from agentstream.transport.base import Producer as ProducerT
from agentstream.transport.base import Transport as TransportT
from agentstream.worker.commit import ExactlyOnceCommit as TransactionManagerT

from .serializers.codecs import Codec as CodecT
from .serializers.codecs import CodecArg
from .serializers.registry import Registry as RegistryT
from .serializers.schemas import Schema as SchemaT


class Settings(_settings.Settings):
    """``faust.Settings(id, **options)``: agentstream's settings built from Faust's names (translated
    as ``App(id, **options)`` translates them; ``AGENTSTREAM_*`` variables on top)."""

    def __init__(self, id: str, **options: Any) -> None:
        extra = options.pop("extra", None) or {}  # dataclasses.replace() passes every field back
        built = _settings.Settings.build(id, translate_settings({**extra, **options}))
        super().__init__(**{f.name: getattr(built, f.name) for f in dataclasses.fields(built)})


CollectionT = TableT
AgentManagerT = AgentManager  # ``app.agents``: the app's agents by name, in declaration order
ConsumerMessage = Message
FutureMessage = Delivery  # what ``topic.send()`` returns: await it for the RecordMetadata

K = TypeVar("K")
V = TypeVar("V")
HeadersArg = Sequence[tuple[str, bytes]] | Mapping[str, bytes]
ModelArg = type[ModelT] | type[bytes] | type[str]
Processor = Callable[[Any], Any]
ConsumerCallback = Callable[[Message], Awaitable[None]]
MessageSentCallback = Callable[[FutureMessage], None | Awaitable[None]]


class ProcessingGuarantee(enum.StrEnum):
    """``processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE`` is the string setting's value."""

    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class PendingMessage(NamedTuple):
    """A record on its way to the producer, as Faust describes it (``FutureMessage.message``)."""

    channel: Any
    key: Any
    value: Any
    partition: int | None = None
    timestamp: float | None = None
    headers: Any = None
    key_serializer: Any = None
    value_serializer: Any = None
    callback: MessageSentCallback | None = None
    topic: str | None = None
    offset: int | None = None
    generation_id: int | None = None


class FixupT:
    """Faust's framework fix-ups (its Django integration) have no agentstream counterpart."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            "Faust fix-ups (FixupT, the Django integration) are not supported by agentstream: "
            "set the framework up in the app's module before the App is created instead"
        )


__all__ = [
    "AgentManagerT",
    "AgentT",
    "AppT",
    "ChannelT",
    "CodecArg",
    "CodecT",
    "CollectionT",
    "ConsumerCallback",
    "ConsumerMessage",
    "ConsumerT",
    "EventT",
    "FieldDescriptorT",
    "FixupT",
    "FutureMessage",
    "HeadersArg",
    "JoinT",
    "JoinableT",
    "K",
    "Message",
    "MessageSentCallback",
    "ModelArg",
    "ModelOptions",
    "ModelT",
    "PendingMessage",
    "ProcessingGuarantee",
    "Processor",
    "ProducerT",
    "RecordMetadata",
    "RecordT",
    "RegistryT",
    "SchemaT",
    "SensorT",
    "ServiceT",
    "Settings",
    "StoreT",
    "StreamT",
    "TP",
    "TableT",
    "TopicT",
    "TransactionManagerT",
    "TransportT",
    "V",
    "WindowRange",
    "WindowT",
]
