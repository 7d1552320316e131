"""What lower layers use of the objects above them, as Protocols (Faust's ``faust.types``).

Topics, tables, agents and the topology hold a reference to their :class:`~agentstream.app.App`,
but they must not import ``app.py`` at run time: it imports them (imports point down the layers;
tests/unit/test_import_graph.py and the import-linter contracts in pyproject.toml check it). They
annotate with these Protocols instead, and mypy checks that the real ``App`` satisfies them wherever
one is passed in. The members name the real classes of the layers above (topics, tables, agents,
the worker) by typing-only imports, which never run. :class:`TopicOptions` lists a topic's arguments
once, for ``app.topic`` and :class:`~agentstream.topics.Topic`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, TypeVar, Unpack

from .codecs import Codec
from .settings import Settings
from .transport.append import Appender
from .transport.base import Producer, Transport

if TYPE_CHECKING:
    from .agents.agent import Agent
    from .agents.replies import ReplyConsumer
    from .events import Event
    from .sensors import SensorDelegate
    from .signals import SyncSignal
    from .streams import SplitPoint
    from .tables.table import Table
    from .topics import Topic
    from .topology import FirstInstance, Topology
    from .worker.worker import Worker

_TableT = TypeVar("_TableT", bound="Table")

__all__ = ["AppT", "AssignmentT", "TopicOptions", "TopicDeclaration"]


class TopicOptions(TypedDict, total=False):
    """The arguments a topic is declared with, listed once: :meth:`App.topic` takes them and hands
    them to :class:`Topic`. Left out: no types (raw or the app's serializers), ``topic_partitions``
    partitions, not internal, not compacted, no extra config."""

    key_type: Any
    value_type: Any
    partitions: int | None
    key_serializer: str | Codec | None  # a codec name, or a codec object (a Faust schema's)
    value_serializer: str | Codec | None
    internal: bool
    compacted: bool
    config: dict[str, str] | None
    replicas: int | None  # Faust's: this topic's replication factor (None/0: topic_replication_factor)
    deleting: bool | None  # Faust's: cleanup.policy gets "delete" (with compacted: "compact,delete")
    allow_empty: bool | None  # Faust's: False makes a tombstone on a Record-typed topic a value decode error
    has_prefix: bool  # Faust's: the name carries the app id already (group_by's repartition topic adds none)


class TopicDeclaration(TopicOptions, total=False):
    """What ``app.topic`` takes besides a topic's own options: ``pattern`` (the existing topics whose
    names match, as one source) and Faust's arguments, which
    :func:`agentstream.faust_args.topic_options` translates (``schema``, ``compacting``,
    ``retention``) or logs once as ignored (the rest)."""

    pattern: str | None
    schema: Any
    compacting: bool | None
    retention: Any
    acks: bool
    maxsize: int | None
    loop: Any


class AppT(Protocol):
    """The App as declarations see it: settings, the registries and the shared clients."""

    settings: Settings
    key_serializer: str
    value_serializer: str
    reply_codec: Codec
    topics: dict[str, Topic]
    tables: dict[str, Table]
    startup_tasks: list[Callable[..., Awaitable[None]]]
    commands: dict[str, Any]

    @property
    def agents(self) -> Mapping[str, Agent]: ...  # by name (Faust's AgentManager)

    sensors: SensorDelegate  # Faust's sensor hooks
    on_produce_message: SyncSignal
    _producer: Producer | None
    _producer_started: bool
    _plain_producer: Appender | None

    @property
    def id(self) -> str: ...

    @property
    def worker(self) -> Worker | None: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def producer(self) -> Producer: ...

    async def start_producer(self) -> Producer: ...

    async def replies(self) -> ReplyConsumer: ...

    async def stop_clients(self) -> None: ...

    def consumer_settings(self) -> dict[str, Any]: ...

    def topic(self, name: str = "", *more: str, **options: Unpack[TopicDeclaration]) -> Topic: ...

    def agent(self, *args: Any, **kwargs: Any) -> Any: ...

    def stream(self, channel: Any, beacon: Any = None, **kwargs: Any) -> Any: ...

    def Table(self, name: str, **kwargs: Any) -> Table: ...

    def task(self, *args: Any, **kwargs: Any) -> Any: ...

    def crontab(self, *args: Any, **kwargs: Any) -> Any: ...

    def service(self, *args: Any, **kwargs: Any) -> Any: ...

    def table_route(self, *args: Any, **kwargs: Any) -> Any: ...

    def command(self, *args: Any, **kwargs: Any) -> Any: ...

    async def discover(self, keep: bool = False) -> dict[str, FirstInstance]: ...

    def is_leader(self) -> bool: ...

    def class_setting(self, name: str, base: type | None = None, base_name: str = "") -> Any: ...

    def codec_through_serializers(self, side: str, type_: Any, serializer: Any) -> Any: ...

    def create_event(self, key: Any, value: Any, headers: Any, message: Any) -> Event: ...

    def topology(self) -> Topology: ...

    def _resolve_split(self, agent: Agent, point: SplitPoint) -> None: ...

    def _add_table(self, table: _TableT) -> _TableT: ...


class AssignmentT(Protocol):
    """This worker's partition numbers after a rebalance (:class:`agentstream.worker.assignor.Assignment`)."""

    @property
    def active(self) -> Sequence[int]: ...

    @property
    def standby(self) -> Sequence[int]: ...
