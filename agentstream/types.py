"""What lower layers use of the objects above them, as Protocols (Faust's ``faust.types``).

Topics, tables, agents and the topology hold a reference to their :class:`~agentstream.app.App`
and the table manager to its worker, but they must not import ``app.py`` or ``worker/``: those
import them (imports point down the layers; tests/unit/test_import_graph.py and the import-linter
contracts in pyproject.toml check it). They annotate with these Protocols instead, and mypy checks
that the real ``App``/``Worker`` satisfy them wherever one is passed in. Members typed ``Any`` return
objects of the layers above (topics, tables, agents), which this module cannot name either.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Protocol, Sequence

from .codecs import Codec
from .runtime import FaultPoints
from .settings import Settings
from .transport.base import Producer, Transport

__all__ = ["AppT", "AssignmentT", "WorkerT"]


class AppT(Protocol):
    """The App as declarations see it: settings, the registries and the shared clients."""

    settings: Settings
    key_serializer: str
    value_serializer: str
    reply_codec: Codec
    topics: dict[str, Any]
    tables: dict[str, Any]
    startup_tasks: list[Callable[..., Awaitable[None]]]
    commands: dict[str, Any]
    agents: list[Any]
    sensors: Any  # agentstream.sensors.SensorDelegate: Faust's sensor hooks
    on_produce_message: Any  # agentstream.signals.SyncSignal
    _producer: Producer | None
    _producer_started: bool

    @property
    def id(self) -> str: ...

    @property
    def worker(self) -> Any: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def producer(self) -> Producer: ...

    async def start_producer(self) -> Producer: ...

    async def replies(self) -> Any: ...

    async def stop_clients(self) -> None: ...

    def consumer_settings(self) -> dict[str, Any]: ...

    def topic(self, name: str, *more: str, **kwargs: Any) -> Any: ...

    def agent(self, *args: Any, **kwargs: Any) -> Any: ...

    def Table(self, name: str, **kwargs: Any) -> Any: ...

    def task(self, *args: Any, **kwargs: Any) -> Any: ...

    def crontab(self, *args: Any, **kwargs: Any) -> Any: ...

    def service(self, *args: Any, **kwargs: Any) -> Any: ...

    def table_route(self, *args: Any, **kwargs: Any) -> Any: ...

    def command(self, *args: Any, **kwargs: Any) -> Any: ...

    async def discover(self) -> None: ...

    def topology(self) -> Any: ...

    def _resolve_split(self, agent: Any, point: Any) -> None: ...

    def _add_table(self, table: Any) -> Any: ...


class AssignmentT(Protocol):
    """This worker's partition numbers after a rebalance (:class:`agentstream.worker.assignor.Assignment`)."""

    @property
    def active(self) -> Sequence[int]: ...

    @property
    def standby(self) -> Sequence[int]: ...


class WorkerT(Protocol):
    """What the table manager needs of its worker: the crash points tests inject (else None)."""

    @property
    def faults(self) -> FaultPoints | None: ...
