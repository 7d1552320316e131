"""The runtime context: what a running worker built for an app, reachable without storing it on
the app's declarations (App, Table, Agent describe; the worker runs).

The bottom of the import graph: it imports nothing of agentstream's but the transport types, so
declarations (tables, topics) can reach their runtime without importing the worker. Two context
variables: :data:`current_task` (set by each agent instance's asyncio task: which stream task,
hence which transaction and partition, a send or table write belongs to) and the app's
:class:`Runtime` (set by the worker when it starts; asyncio tasks it creates inherit it). Code
outside those tasks (a test, a second worker in the same process) finds it by app.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any, Final, Protocol

from .clock import REAL_CLOCK, Clock, clock_for
from .transport.base import Delivery

__all__ = [
    "current_clock",
    "Runtime",
    "RunningTask",
    "FaultPoints",
    "current_task",
    "current_runtime",
    "runtime_for",
    "bind",
    "unbind",
]


class TaskSender(Protocol):
    """A task's transactional producer (exactly_once)."""

    async def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> Delivery: ...


class RunningTask(Protocol):
    """What sends and table writes need of the stream task they run in."""

    @property
    def id(self) -> Any: ...

    @property
    def agent(self) -> Any: ...

    @property
    def txn(self) -> TaskSender | None: ...


class FaultPoints(Protocol):
    """Tests only (agentstream.testing_faults.FaultInjector): named crash points in the worker."""

    def check(self, point: str) -> None: ...


current_task: ContextVar[RunningTask | None] = ContextVar("agentstream_current_task", default=None)
"""The stream task whose agent instance is running (None in timers, tasks and outside a worker)."""

_current: Final[ContextVar[Runtime | None]] = ContextVar("agentstream_runtime", default=None)
current_runtime: Final = _current  # read directly on hot paths (one get, then check .app)
_current_get: Final = _current.get  # bound once: runtime_for runs on every table read and write
_by_app: Final[weakref.WeakKeyDictionary[Any, Runtime]] = weakref.WeakKeyDictionary()


class Runtime:
    """One app's running state on this process: its worker, table manager and table partitions."""

    __slots__ = ("app", "worker", "tables", "partitions")

    def __init__(self, app: Any) -> None:
        self.app = app
        self.worker: Any = None  # agentstream.worker.Worker while one runs
        self.tables: Any = None  # agentstream.tables.manager.TableManager while the worker has tables
        self.partitions: dict[str, dict[int, Any]] = {}  # table name -> partition -> TablePartition

    def table_partitions(self, table_name: str) -> dict[int, Any]:
        parts = self.partitions.get(table_name)
        if parts is None:
            parts = self.partitions[table_name] = {}
        return parts


def runtime_for(app: Any) -> Runtime:
    """The app's runtime: the context's when it belongs to ``app``, else the process's (made on demand)."""
    rt = _current_get()
    if rt is not None and rt.app is app:
        return rt
    rt = _by_app.get(app)
    if rt is None:
        rt = _by_app[app] = Runtime(app)
    return rt


def current_clock() -> Clock:
    """The clock of the app whose worker runs this code (an agent, a timer), else real time."""
    rt = _current_get()
    return REAL_CLOCK if rt is None else clock_for(rt.app)


def bind(app: Any, worker: Any) -> Runtime:
    """A worker starts: its app's runtime becomes the context's (inherited by the tasks it starts).

    A second worker of the same app in this process (tests) gets a runtime of its own: its tasks
    find it through the context; code outside any worker's tasks finds the latest one."""
    rt = _by_app.get(app)
    if rt is None or (rt.worker is not None and rt.worker is not worker):
        rt = _by_app[app] = Runtime(app)
    rt.worker = worker
    _current.set(rt)
    return rt


def unbind(app: Any, worker: Any) -> None:
    """The worker stopped: nothing of it stays reachable (tables, partitions, worker)."""
    rt = _current.get()
    if rt is None or rt.worker is not worker:
        rt = _by_app.get(app)
    if rt is not None and rt.worker is worker:
        rt.worker = None
        rt.tables = None
        rt.partitions.clear()
