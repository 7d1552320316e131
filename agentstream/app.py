"""The App: settings plus the registry of what the app declares (topics, agents, tables, timers,
tasks). Running it is the worker's job (:mod:`agentstream.worker`); the App only keeps the
shared clients (transport, producer, reply reader) that agents and topics send through."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from . import codecs, faust_args, faust_arguments, faust_settings, routes
from .agents.agent import Agent, AgentFun
from .agents.manager import AgentManager
from .agents.replies import ReplyConsumer
from .background import crontab_runner, leader_task, service_runner
from .cache import CacheBackend, backend_for
from .channels import Channel, ChannelAgent, stream_of
from .clock import clock_for
from .conf import Conf
from .crontab import CronSchedule
from .custom_partitioner import PartitionerProducer, check_partitioner
from .durations import Seconds, to_seconds
from .events import Event
from .exceptions import ConfigError, GroupFenced, ImproperlyConfigured, TopologyError
from .held_sends import HeldProducer
from .logging_setup import redirect_level
from .naming import agent_topic_name, legacy_agent_topic_name, repartition_topic_name
from .runtime import runtime_for
from .settings import Settings
from .streams import SplitPoint, Stream
from .topics import Topic
from .transport import get_transport
from .transport.append import Appender
from .transport.base import Producer, Transport
from .types import TopicDeclaration, TopicOptions

log = logging.getLogger(__name__)


def _caller_module() -> str | None:
    """The module that made the App (two frames up): ``autodiscover=True`` scans its package."""
    import sys

    try:
        return str(sys._getframe(2).f_globals.get("__name__"))
    except ValueError:
        return None


F = TypeVar("F", bound=Callable[..., Any])
_S = TypeVar("_S")  # app.web_server: the service given, returned as it is

if TYPE_CHECKING:
    from .tables.kinds import GlobalTable, SetGlobalTable, SetTable
    from .tables.table import Table
    from .topology import FirstInstance, Topology
    from .worker.worker import Worker

_TableT = TypeVar("_TableT", bound="Table")
_AGENT_TOPIC_ARGS = ("key_type", "value_type", "key_serializer", "value_serializer")  # make @app.agent()'s own topic

__all__ = ["App"]


def command_line() -> Callable[..., int]:
    """The ``agentstream`` command's entry function, as the package registers it (its console
    script). The command line sits above the App (it loads apps and runs workers), so ``App.main()``
    finds it the way a shell does, by the installed command's name, instead of importing it."""
    from importlib.metadata import entry_points

    for entry in entry_points(group="console_scripts", name="agentstream"):
        if entry.value.split(":")[0] == "agentstream.cli":
            main: Callable[..., int] = entry.load()
            return main
    raise ConfigError(
        "App.main",
        "the agentstream command is not installed in this environment (no console script 'agentstream')",
        "pip install the package (pip install agentstream, or pip install -e . in a checkout), "
        "or run `python -m agentstream -A <module> ...`",
    )


def _check_class_setting(name: str, value: Any, base: type, base_name: str = "") -> None:
    """Faust's class settings (``App(..., Stream=MyStream)``): a subclass of ``base`` or None."""
    if value is not None and not (isinstance(value, type) and issubclass(value, base)):
        shown = base_name or f"agentstream.{base.__name__}"
        raise ConfigError(
            name,
            f"must be a subclass of {shown}, got {value!r}",
            f"pass the class itself: App(..., {name}=My{base.__name__}) with class My{base.__name__}({shown})",
        )


# Faust's class settings agentstream honours beyond Agent/Stream/Topic (settings fields): kept in
# settings.extra as given (a class, or a "module:attr" path as Faust's symbol_by_name takes it)
_CLASS_SETTINGS = (
    *("Table", "SetTable", "GlobalTable", "SetGlobalTable", "Monitor", "Worker", "Event", "Schema"),
    *("Serializers", "TableManager", "LeaderAssignor", "PartitionAssignor"),
)
_RUNTIME_WORKER = "agentstream.faust.worker:Worker"  # Faust's Worker setting, by path: it sits above the App


def _class_setting(settings: Settings, name: str, base: type | None, base_name: str = "") -> Any:
    """The class the app's Faust class setting ``name`` names (None: Faust's default, so ours)."""
    value = settings.extra.get(name)
    if value is None or (isinstance(value, str) and value == faust_settings.FAUST_SETTINGS[name].default):
        return None
    if isinstance(value, str):
        from .settings import import_object

        try:
            value = import_object(value)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(
                name, f"cannot import {value!r}: {exc}", "name the class as 'module:Class', or pass the class"
            ) from exc
    if base is not None:
        _check_class_setting(name, value, base, base_name)
    elif not isinstance(value, type):
        raise ConfigError(name, f"must be a class, got {value!r}", f"pass the class itself: App(..., {name}=MyClass)")
    return value


def _class_base(name: str) -> tuple[type | None, str]:
    """The agentstream class a class setting's value must subclass, and how to name it (imported
    only when the setting is given: the table manager is not needed to declare an app)."""
    if name == "Table":
        from .tables.table import Table

        return Table, ""
    if name in ("SetTable", "GlobalTable", "SetGlobalTable"):
        from .tables import kinds

        return getattr(kinds, name), ""
    if name == "Monitor":
        from .sensors import Monitor

        return Monitor, "agentstream.sensors.Monitor"
    if name == "Event":
        return Event, ""
    if name == "Schema":
        from .schemas import Schema

        return Schema, "agentstream.faust.Schema"
    if name == "Serializers":
        from .serializer_registry import Registry

        return Registry, "agentstream.faust.serializers.Registry"
    if name == "TableManager":
        from .tables.manager import TableManager

        return TableManager, "agentstream.tables.manager.TableManager"
    if name == "LeaderAssignor":
        from .leader import LeaderAssignor

        return LeaderAssignor, "agentstream.leader.LeaderAssignor"
    # Worker, PartitionAssignor: checked by the runtime that makes them (it sits above the App)
    return None, ""


def _check_event_signature(cls: type) -> None:
    """The Event setting's class is made as agentstream's Event is, ``cls(key, value, message, tp)``:
    a subclass whose ``__init__`` takes Faust's ``(app, key, value, headers, message)`` would fail on
    the first record, so it is refused at start."""
    import inspect

    try:
        signature = inspect.signature(cls)
    except ValueError:  # a compiled __init__ without a signature: agentstream's own, which takes them
        return
    try:
        signature.bind(None, None, None, None)
    except TypeError as exc:
        raise ConfigError(
            "Event",
            f"{cls.__qualname__}.__init__ cannot be called as {cls.__qualname__}(key, value, message, tp): {exc}",
            "take agentstream.Event's arguments (key, value, message, tp=None) and pass them to super().__init__ "
            "(Faust's Event(app, key, value, headers, message) signature differs)",
        ) from exc


def _check_class_settings(settings: Settings) -> None:
    """Every class setting names a class of the right kind: checked when the App is made."""
    for name in _CLASS_SETTINGS:
        if settings.extra.get(name) is not None:
            _class_setting(settings, name, *_class_base(name))
    event_class = _class_setting(settings, "Event", Event) if settings.extra.get("Event") is not None else None
    if event_class is not None:
        _check_event_signature(event_class)
    if settings.extra.get("HttpClient") is not None:  # aiohttp is imported only when an app names one
        from aiohttp import ClientSession

        _class_setting(settings, "HttpClient", ClientSession)
    _check_class_setting("Stream", settings.stream_class, Stream)
    _check_class_setting("Agent", settings.agent_class, Agent)
    _check_class_setting("Topic", settings.topic_class, Topic)


class Timer:
    """An ``@app.timer``: the function, its interval, and how far a late wake-up may shorten the
    next sleep (Faust's ``max_drift_correction``), so the calls keep to the interval on average."""

    def __init__(
        self,
        fun: Callable[..., Awaitable[None]],
        interval: float,
        on_leader: bool,
        max_drift_correction: float = 0.1,
    ) -> None:
        self.fun = fun
        self.interval = interval
        self.on_leader = on_leader
        self.name = getattr(fun, "__qualname__", repr(fun))
        # Faust's timers correct only when the interval is longer than the correction
        self.max_drift_correction = max_drift_correction if interval > max_drift_correction else 0.0

    def next_sleep(self, slept: float) -> float:
        """The next sleep after one that lasted ``slept`` seconds: the interval, less the lateness
        (or plus the earliness), within the interval +- max_drift_correction."""
        correction = self.max_drift_correction
        wanted = 2 * self.interval - slept
        return min(max(wanted, self.interval - correction), self.interval + correction)


class FlowControl:
    """Faust's ``app.flow_control`` (its ``FlowControlEvent``): ``suspend()``, ``resume()``,
    ``clear()``, ``is_active()`` and ``await acquire()`` (returns once flow is resumed).

    Faust gates its in-memory stream queues with it; agentstream's tasks pull records from their
    partitions' buffers instead (there is no queue to hold or clear), so it starts active, and
    ``clear()`` runs the callbacks given to :meth:`on_clear`. Code that waits on it works as in Faust."""

    def __init__(self) -> None:
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._on_clear: list[Callable[[], None]] = []

    def suspend(self) -> None:
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()
        self.clear()  # as Faust's resume(): queues start empty

    def is_active(self) -> bool:
        return self._resumed.is_set()

    def clear(self) -> None:
        for callback in list(self._on_clear):
            callback()

    def on_clear(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on every :meth:`clear` (and so on every :meth:`resume`)."""
        self._on_clear.append(callback)

    async def acquire(self) -> None:
        """Wait until flow is resumed."""
        await self._resumed.wait()


class App:
    """A Faust-style application: ``app = agentstream.App("wordcount", broker="kafka://...")``."""

    def __init__(self, id: str, *, monitor: Any = None, config_source: Any = None, **options: Any) -> None:
        self._given: tuple[str, dict[str, Any]] = (id, dict(options))  # what config_from_object rebuilds from
        if config_source is not None:  # Faust's App(config_source=...): config_from_object's source, over the options
            from .settings import options_from_object

            options = {**options, **(options_from_object(config_source) or {})}
            self._given = (id, dict(options))
        options = faust_args.translate_settings(options)  # Faust names, timedelta durations
        self.settings = Settings.build(id, options)
        faust_settings.refuse_unsupported(id, self.settings.extra)  # before any worker joins a group
        faust_args.log_unknown_settings(id, self.settings.extra)
        if "worker_redirect_stdouts_level" in self.settings.extra:  # a bad level fails here, not at start
            redirect_level(self.settings.extra["worker_redirect_stdouts_level"])
        _check_class_settings(self.settings)
        self.key_serializer: str = options.get("key_serializer", "raw")
        self.value_serializer: str = options.get("value_serializer", "json")
        self.reply_codec = codecs.get("json")
        self.topics: dict[str, Topic] = {}
        self.agents: AgentManager = AgentManager()  # Faust's: by name, in declaration order
        self.tables: dict[str, Table] = {}
        self.timers: list[Timer] = []
        self.startup_tasks: list[Callable[..., Awaitable[None]]] = []
        self.pages: dict[str, Any] = {}  # path -> view function or agentstream.web.View subclass
        self.legacy_agent_topics: dict[str, str] = {}  # topic of an agent without one -> its pre-Faust name
        self.page_cors: dict[str, Any] = {}  # path -> Faust's cors_options of that page (over web_cors_options)
        self.page_bases: dict[str, type] = {}  # path -> Faust's base= of a function page (a View subclass)
        self.page_names: dict[str, str] = {}  # path -> Faust's name= of the page (its route's name)
        self.commands: dict[str, Any] = {}  # name -> commands.CommandSpec (@app.command)
        self.web_server_service: Any = None  # app.web_server(...): serves HTTP in place of the aiohttp server
        self._transport: Transport | None = None
        self._producer_object: Producer | None = None
        self._producer_is_started = False
        # The started producer while a plain send needs nothing but its synchronous append (no
        # sensor or on_produce_message receiver to tell, no transaction to send into): what
        # Topic.send reads once per record. Kept current by _refresh_plain_sends.
        self._plain_producer: Appender | None = None
        self._producer_lock: asyncio.Lock | None = None
        self._replies: ReplyConsumer | None = None
        self._declared_in = _caller_module()  # autodiscover=True imports this module's package
        # Faust's signals (declarations: the receivers are user code; the worker sends them)
        from .sensors import Monitor, SensorDelegate
        from .signals import app_signals

        for signal_name, signal in app_signals(self).items():
            setattr(self, signal_name, signal)
        self.sensors = SensorDelegate()
        self.sensors.on_change = self._refresh_plain_sends
        self.on_produce_message.on_change = self._refresh_plain_sends
        self._monitor: Monitor | None = None
        if monitor is not None:  # Faust's App(monitor=...): app.monitor, added to app.sensors
            self.monitor = monitor

    # Faust's signals, set per app in __init__ (typed here for mypy)
    on_before_configured: Any
    on_configured: Any
    on_after_configured: Any
    on_worker_init: Any
    on_produce_message: Any
    on_partitions_assigned: Any
    on_partitions_revoked: Any
    on_rebalance_start: Any
    on_rebalance_complete: Any
    on_rebalance_return: Any
    on_before_shutdown: Any

    @property
    def monitor(self) -> Any:
        """Faust's ``app.monitor``: a :class:`agentstream.sensors.Monitor` added to ``app.sensors``
        on first use, counting what the worker does (messages, sends, commits, rebalances)."""
        if self._monitor is None:
            from .sensors import Monitor

            self._monitor = (_class_setting(self.settings, "Monitor", Monitor) or Monitor)()
            self.sensors.add(self._monitor)
        return self._monitor

    @monitor.setter
    def monitor(self, monitor: Any) -> None:
        if self._monitor is not None:
            self.sensors.remove(self._monitor)
        self._monitor = monitor
        self.sensors.add(monitor)

    @property
    def rebalancing(self) -> bool:
        """True while this process's worker is in a rebalance (Faust's ``app.rebalancing``)."""
        worker = self.worker
        return worker is not None and getattr(worker.state, "name", "") == "REBALANCING"

    @property
    def should_stop(self) -> bool:
        """True once this process's worker is stopping (Faust's ``app.should_stop``): loops in
        timers and tasks check it to end early."""
        worker = self.worker
        return worker is not None and (bool(worker.stopping) or worker._stop_requested.is_set())

    async def sleep(self, seconds: Seconds) -> None:
        """Sleep, but return early when the worker starts stopping (Faust's ``app.sleep``)."""
        secs = to_seconds(seconds)
        worker = self.worker
        clock = clock_for(self)
        if worker is None:
            await clock.sleep(secs)
            return
        try:
            await clock.wait_for(worker._stop_requested.wait(), secs)
        except TimeoutError:
            pass

    @property
    def worker(self) -> Worker | None:
        """The worker running this app in this process, or None (runtime state: kept in the runtime
        context, :mod:`agentstream.runtime`, not on the declaration)."""
        worker: Worker | None = runtime_for(self).worker  # the runtime keeps it untyped: it sits below
        return worker

    @property
    def id(self) -> str:
        return self.settings.id

    @property
    def conf(self) -> Conf:
        """Faust's ``app.conf``: the settings by Faust's names and agentstream's, read and assigned
        (an assignment is checked as ``App(...)`` checks its arguments: :mod:`agentstream.conf`)."""
        conf: Conf | None = self.__dict__.get("_conf")
        if conf is None:
            conf = self.__dict__["_conf"] = Conf(self)
        return conf

    def config_from_object(self, obj: Any, *, silent: bool = False, force: bool = False) -> None:
        """Faust's ``app.config_from_object``: settings read from a module, class, object or mapping,
        or the import path of one (``"proj.settings"``, ``"proj.settings:Config"``).

        As in Faust they override the App's arguments and environment variables override them. The
        settings are rebuilt and checked at once (``force`` is accepted: agentstream never defers
        them); call it before declaring topics, agents and tables, which read the settings when
        declared (a warning says so otherwise). ``silent``: a source that cannot be imported changes
        nothing; otherwise it is a ConfigError naming ``config_from_object``."""
        from .settings import options_from_object

        changes = options_from_object(obj, silent=silent)
        if changes is None:
            return
        if self.topics or self.agents or self.tables:
            log.warning(
                "app %s: config_from_object(%r) after topics, agents or tables were declared: they keep "
                "the names and partition counts the earlier settings gave them",
                self.id,
                obj,
            )
        id, given = self._given
        options = {**faust_args.translate_settings(given), **faust_args.translate_settings(changes)}
        settings = Settings.build(id, options)
        faust_settings.refuse_unsupported(id, settings.extra)
        faust_args.log_unknown_settings(id, settings.extra)
        _check_class_settings(settings)
        self.settings = settings
        self._given = (id, options)  # translated: a second call merges over these
        self.key_serializer = options.get("key_serializer", "raw")
        self.value_serializer = options.get("value_serializer", "json")

    # -- declarations --------------------------------------------------------------------------
    def topic(self, name: str = "", *more: str, **options: Unpack[TopicDeclaration]) -> Topic:
        """Declare a topic (created with ``partitions`` or ``topic_partitions`` when missing); its
        options are :class:`~agentstream.types.TopicOptions`.

        Faust's other arguments (``compacting``, ``retention``, ``schema``...) are translated by
        :func:`agentstream.faust_args.topic_options`; the rest are honoured, refused or logged as
        not applicable as :mod:`agentstream.faust_arguments` says (``acks=False``: TypeError).
        ``app.topic("a", "b")`` stands for several topics and ``app.topic(pattern="^a-.*")`` for the
        existing topics whose names match when the worker starts; an agent over either reads them all."""
        given: dict[str, Any] = dict(options)
        pattern = given.pop("pattern", None)
        if more or pattern is not None:
            from .topics import TopicGroup

            names = (name, *more) if name else tuple(more)
            members = [self.topic(n, **given) for n in names] if pattern is None else []
            return TopicGroup(self, names, members, pattern=pattern, options=given)
        schema_class = self.class_setting("Schema")
        if schema_class is not None and given.get("schema") is None:  # Faust's default schema: the class's
            given["schema"] = schema_class(  # attributes fill in what the declaration leaves out
                **{k: given.get(k) for k in ("key_type", "value_type", "key_serializer", "value_serializer")}
            )
        faust = {key: given.pop(key) for key in list(given) if key not in TopicOptions.__optional_keys__}
        if faust:
            extra = faust_args.topic_options(name, more, faust)
            faust_arguments.check("app.topic", **faust)  # what topic_options left: refused, or does not apply
            given.update(
                {
                    key: extra[key]
                    for key in ("key_type", "value_type", "key_serializer", "value_serializer")
                    if key in extra
                }
            )
            given["compacted"] = bool(given.get("compacted")) or bool(extra.get("compacted"))
            given["config"] = {**extra.get("config", {}), **(given.get("config") or {})} or None
        key_type, value_type, partitions = given.get("key_type"), given.get("value_type"), given.get("partitions")
        existing = self.topics.get(name)
        if existing is not None and (key_type is not None or value_type is not None or partitions is not None):
            if (existing.key_type, existing.value_type) != (key_type, value_type) or (
                partitions is not None and existing._partitions not in (None, partitions)
            ):
                raise TopologyError(
                    f"topic {name!r} is declared twice with different types or partition counts; "
                    "declare it once and share the Topic object"
                )
        if existing is not None:
            return existing
        topic = (self.settings.topic_class or Topic)(self, name, **given)
        self.topics[name] = topic
        return topic

    def agent(
        self,
        channel: Topic | str | Channel | Sequence[Topic | str] | None = None,
        *,
        name: str | None = None,
        sink: Sequence[Any] | None = None,
        concurrency: int | None = None,
        isolated_partitions: bool = False,
        **kwargs: Any,
    ) -> Callable[[AgentFun], Agent]:
        """Decorate ``async def agent(stream)``: one instance per task over ``channel``'s partitions.

        ``concurrency=N`` is Faust's: N instances of the body run in the worker, sharing its
        partitions, so at most N records are in the agent's hands at once. Without it (or with
        ``isolated_partitions=True``, which needs concurrency=1) each task, so each partition, has
        its own instance. ``help`` (default: the docstring) is what ``agentstream agents`` shows, and
        ``key_type``/``value_type``/``key_serializer``/``value_serializer`` declare the agent's own topic
        (no channel: Faust's ``<id>-<module>.<function>``, or ``<id>-<name>`` with ``name=``) or the
        named one (a topic name), as in Faust. Faust's other arguments are
        refused as :mod:`agentstream.faust_arguments` says (``supervisor_strategy``: TypeError)."""
        help = kwargs.pop("help", None)
        types = {k: kwargs.pop(k) for k in _AGENT_TOPIC_ARGS if k in kwargs}
        faust_arguments.check("app.agent", **kwargs)
        if isolated_partitions and concurrency not in (None, 1):
            raise TopologyError("agent(isolated_partitions=True) needs concurrency=1 (one instance per partition)")

        def _decorate(fun: AgentFun) -> Agent:
            agent_name = str(name or getattr(fun, "__name__", "agent"))
            if agent_name in self.agents:
                raise TopologyError(f"two agents are named {agent_name!r}; pass name= to tell them apart")
            if isinstance(channel, Channel):  # in-memory: a worker background task, not in the topology
                local = ChannelAgent(
                    self, fun, channel=channel, name=agent_name, sink=list(sink or ()), concurrency=concurrency or 1
                )
                self.startup_tasks.append(local.run_instances)
                return local
            if channel is None:  # Faust: @app.agent(key_type=..., value_type=...) makes its own topic
                own = agent_topic_name(self.settings, fun, name)
                if not name:  # what agentstream called it before following Faust: a worker warns if it exists
                    self.legacy_agent_topics[own] = legacy_agent_topic_name(self.settings, fun)
                topics = [
                    self.topic(
                        own,
                        key_type=types.get("key_type"),
                        value_type=types.get("value_type"),
                        key_serializer=types.get("key_serializer"),
                        value_serializer=types.get("value_serializer"),
                    )
                ]
            elif isinstance(channel, str) and types:  # Faust: the named topic gets the agent's types
                topics = [self.topic(channel, **types)]
            elif isinstance(channel, (Topic, str)):
                topics = self._as_topics(channel)
            else:
                topics = [t for c in channel for t in self._as_topics(c)]
            patterns = [
                t
                for t in (
                    [channel] if isinstance(channel, Topic) else channel if isinstance(channel, (list, tuple)) else []
                )
                if getattr(t, "pattern", None) is not None
            ]
            agent = (self.settings.agent_class or Agent)(
                self,
                fun,
                topics=topics,
                name=agent_name,
                sink=list(sink or ()),
                concurrency=concurrency,
                patterns=patterns,
                isolated_partitions=isolated_partitions,
            )
            agent.help = help or (fun.__doc__ or "").strip()
            self.agents[agent.name] = agent
            return agent

        return _decorate

    def _as_topic(self, t: Topic | str) -> Topic:
        if isinstance(t, str):
            return self.topic(t)
        if t.name and t.name not in self.topics:  # made directly (Faust's MyTopic(app, topics=[...])): declare it
            self.topics[t.name] = t
        return t

    def _as_topics(self, t: Topic | str) -> list[Topic]:
        """A topic, a topic name, or a group of several names (a pattern's are found at start)."""
        members = getattr(t, "members", None)
        if members is not None:
            return list(members)
        return [self._as_topic(t)]

    def timer(
        self,
        interval: Seconds,
        on_leader: bool = False,
        traced: bool | None = None,
        name: str | None = None,
        max_drift_correction: float | None = None,
    ) -> Callable[[F], F]:
        """Run ``async def fun()`` every ``interval`` seconds (or a timedelta) while a worker runs.

        ``max_drift_correction`` (Faust's, default 0.1 s): a sleep that ends late shortens the next
        one by as much, up to this. ``traced`` does not apply (no OpenTracing tracer; OpenTelemetry traces records)."""
        faust_arguments.check("app.timer", traced=traced)
        secs = to_seconds(interval)
        if secs <= 0:
            raise TopologyError(f"timer interval must be > 0 seconds, got {interval}")
        correction = 0.1 if max_drift_correction is None else float(max_drift_correction)
        if correction < 0:
            raise TopologyError(f"timer max_drift_correction must be >= 0 seconds, got {max_drift_correction}")

        def _decorate(fun: F) -> F:
            timer = Timer(fun, secs, on_leader, correction)
            if name:
                timer.name = name
            self.timers.append(timer)
            return fun

        return _decorate

    def crontab(
        self, cron_format: str, *, timezone: Any = None, on_leader: bool = False, traced: bool | None = None
    ) -> Callable[[F], F]:
        """Run ``async def fun()`` at the times of a 5-field cron expression (``timezone``: name or
        tzinfo, default: the app's ``timezone`` setting, UTC unless set); see :mod:`agentstream.crontab`."""
        faust_arguments.check("app.crontab", traced=traced)
        schedule = CronSchedule(cron_format)  # a bad expression fails here, at import, naming the field

        def _decorate(fun: F) -> F:
            self.startup_tasks.append(crontab_runner(self, fun, schedule, timezone, on_leader))
            return fun

        return _decorate

    def task(self, fun: F | None = None, *, on_leader: bool = False, traced: bool | None = None) -> Any:
        """Run ``async def fun()`` (or ``fun(app)``) once when the worker has started
        (``on_leader=True``: once the first assignment made this worker the group leader)."""
        faust_arguments.check("app.task", traced=traced)

        def _decorate(f: F) -> F:
            if on_leader:
                self.startup_tasks.append(leader_task(self, f))
            else:
                self.startup_tasks.append(f)
            return f

        return _decorate(fun) if fun is not None else _decorate

    def service(self, cls: F) -> F:
        """Start an :class:`agentstream.Service` subclass (or instance) with every worker; stop it with it."""
        self.startup_tasks.append(service_runner(cls))
        return cls

    def web_server(self, service: _S) -> _S:
        """Faust 0.15's ``app.web_server(service)``: ``service`` (an :class:`agentstream.Service`
        subclass or instance, e.g. ``faust.contrib.asgi.serve_asgi``'s) is this app's web server in
        every worker, started and stopped with it in place of agentstream's aiohttp server (so
        ``@app.page`` views and the table endpoints are not served); ``web_enabled=False`` starts
        neither. Usable as a class decorator; a second, different service is refused."""
        current = self.web_server_service
        if current is not None and current is not service:
            raise ImproperlyConfigured(
                "web_server",
                f"app {self.id!r} already has a web server registered ({current!r})",
                "register one web server per app",
            )
        self.web_server_service = service
        return service

    def channel(
        self,
        *,
        schema: Any = None,
        key_type: Any = None,
        value_type: Any = None,
        maxsize: int | None = None,
        loop: Any = None,
    ) -> Channel:
        """An in-memory channel: ``@app.agent(channel)`` handles what ``channel.send()`` puts in
        (Faust's ``loop`` does not apply: logged once)."""
        faust_arguments.check("app.channel", loop=loop)
        schema_class = self.class_setting("Schema")
        if schema is None and schema_class is not None:  # Faust's default schema (the Schema setting)
            schema = schema_class(key_type=key_type, value_type=value_type)
        if schema is not None:
            key_type = key_type or getattr(schema, "key_type", None)
            value_type = value_type or getattr(schema, "value_type", None)
        return Channel(self, key_type=key_type, value_type=value_type, maxsize=maxsize)

    def stream(self, channel: Any, beacon: Any = None, **kwargs: Any) -> Stream:
        """Faust's ``app.stream(source)``: a stream over a topic, channel, stream or (async)
        iterable, for code outside agents (a task, a timer). A topic read this way is read whole
        by this process, without a consumer group (see :func:`agentstream.channels.stream_of`)."""
        faust_arguments.check("app.stream", beacon=beacon, **kwargs)  # Faust's Stream options: TypeError
        return stream_of(channel)

    def command(
        self, *options: Any, base: Any = None, name: str | None = None, help: str | None = None, **kwargs: Any
    ) -> Callable[[F], F]:
        """A CLI command of this app: ``agentstream -A module <name> [options]`` (Faust's ``@app.command``
        with ``agentstream.cli.option``/``argument``). ``base=`` (an ``agentstream.faust.cli.AppCommand``
        subclass) makes the command a subclass of it whose ``run`` is the function, with Faust's other
        keyword arguments as its class attributes, as in Faust; without it they are refused."""
        if hasattr(base, "from_handler"):
            return base.from_handler(*options, name=name, help=help, **kwargs)  # type: ignore[no-any-return,union-attr]
        if base is not None:
            raise TypeError(
                f"app.command(base={base!r}): base must be an agentstream.faust.cli.AppCommand subclass "
                "(import AppCommand from agentstream.faust.cli)"
            )
        faust_arguments.check("app.command", **kwargs)
        from .commands import register  # on first use: click is heavy, and only commands need it

        return register(self, tuple(options), name, help)

    def topic_route(
        self,
        topic: Any,
        shard_param: str | None = None,
        *,
        query_param: str | None = None,
        match_info: str | None = None,
        exact_key: str | None = None,
    ) -> Callable[[F], F]:
        """Like :meth:`table_route`, for a topic: the page runs on the worker that owns the key's
        partition of ``topic`` (others forward the request there)."""
        return routes.table_route(
            topic, shard_param, query_param=query_param, match_info=match_info, exact_key=exact_key
        )

    def table_route(
        self,
        table: Any,
        shard_param: str | None = None,
        *,
        query_param: str | None = None,
        match_info: str | None = None,
        exact_key: str | None = None,
    ) -> Callable[[F], F]:
        """Decorate a page handler so it runs on the worker owning the key's partition of ``table``
        (others forward the request there)."""
        return routes.table_route(
            table, shard_param, query_param=query_param, match_info=match_info, exact_key=exact_key
        )

    def page(
        self, path: str, *, base: Any = None, cors_options: Any = None, name: str | None = None
    ) -> Callable[[F], F]:
        """Serve a view at ``path`` on every worker's web server (Faust's ``@app.page``):
        ``async def view(web, request, **path_params)`` or a :class:`agentstream.web.View` subclass.
        ``cors_options`` (Faust's ``{origin: ResourceOptions}``) override ``web_cors_options`` for
        this page, origin by origin. ``base`` (an :class:`agentstream.web.View` subclass) is the class
        a function view becomes a subclass of, and ``name`` names the route, so that
        ``web.url_for(name, **params)`` builds its URL (both Faust's)."""
        if not path.startswith("/"):
            raise TopologyError(f"page path {path!r} must start with '/'")
        if cors_options:
            from .settings import check_cors_options

            check_cors_options(cors_options, f"app.page({path!r}, cors_options=...)")

        if name is not None and any(n == name for n in self.page_names.values()):
            raise TopologyError(f"two pages are named {name!r}; page names must be unique")

        def _decorate(view: F) -> F:
            if path in self.pages:
                raise TopologyError(f"two pages are registered at {path!r}")
            self.pages[path] = view
            if base is not None:
                if not isinstance(base, type):
                    raise TypeError(f"app.page({path!r}, base={base!r}): base must be a View class")
                self.page_bases[path] = base  # the web server checks it is an agentstream.web.View
            if name is not None:
                self.page_names[path] = name
            if cors_options:
                self.page_cors[path] = cors_options
            return view

        return _decorate

    def Table(self, name: str, **kwargs: Any) -> Table:
        """A partitioned, changelog-backed table (``<app>-<name>-changelog``). Faust's
        ``is_global=True`` makes it a :meth:`GlobalTable`, and ``on_recover=`` registers a callback
        as ``@table.on_recover``; its other arguments are as :mod:`agentstream.faust_arguments` says."""
        from .tables.table import Table

        options, on_recover, is_global = _table_arguments(kwargs)
        if is_global:
            return self.GlobalTable(name, **options, on_recover=on_recover)
        cls = _class_setting(self.settings, "Table", Table) or Table  # Faust's Table setting
        return self._recovering(self._add_table(cls(self, name, **options)), on_recover)

    def GlobalTable(self, name: str, **kwargs: Any) -> GlobalTable:
        """A table every worker holds in full."""
        from .tables.kinds import GlobalTable

        options, on_recover, _ = _table_arguments(kwargs)
        cls = _class_setting(self.settings, "GlobalTable", GlobalTable) or GlobalTable
        return self._recovering(self._add_table(cls(self, name, **options)), on_recover)

    def SetTable(self, name: str, **kwargs: Any) -> SetTable:
        """A table of sets (``is_global=True``: a :meth:`SetGlobalTable`)."""
        from .tables.kinds import SetTable

        options, on_recover, is_global = _table_arguments(kwargs)
        if is_global:
            return self.SetGlobalTable(name, **options, on_recover=on_recover)
        cls = _class_setting(self.settings, "SetTable", SetTable) or SetTable
        return self._recovering(self._add_table(cls(self, name, **options)), on_recover)

    def SetGlobalTable(self, name: str, **kwargs: Any) -> SetGlobalTable:
        """A table of sets that every worker holds in full."""
        from .tables.kinds import SetGlobalTable

        options, on_recover, _ = _table_arguments(kwargs)
        cls = _class_setting(self.settings, "SetGlobalTable", SetGlobalTable) or SetGlobalTable
        return self._recovering(self._add_table(cls(self, name, **options)), on_recover)

    @staticmethod
    def _recovering(table: _TableT, on_recover: Any) -> _TableT:
        """Faust's ``Table(on_recover=fun)``: the same as ``@table.on_recover`` on ``fun``."""
        if on_recover is not None:
            table.on_recover(on_recover)
        return table

    def _add_table(self, table: _TableT) -> _TableT:
        if table.name in self.tables:
            raise TopologyError(f"two tables are named {table.name!r}; table names must be unique in an app")
        self.tables[table.name] = table
        from .tables.hooks import observer

        table._sensed = observer(table, None)  # Faust's on_key_get/set/del hooks of a subclass
        return table

    def _resolve_split(self, agent: Agent, point: SplitPoint) -> None:
        """Give a discovered split point its topic (``<app>-<name>-repartition`` for group_by)."""
        src = agent.topics[0] if not agent.splits else agent.splits[-1].topic
        assert src is not None
        if point.kind == "through":
            if point.topic is None:
                point.topic = self.topic(point.name)
            return
        if point.topic is not None:  # group_by(topic=...): the user's topic is the repartition topic
            return
        topic_name = repartition_topic_name(self.settings, src.name, point.name, point.faust_name, src.has_prefix)
        partitions = point.partitions or max(t.partitions for t in agent.topics)
        topic = self.topics.get(topic_name)
        if topic is None:
            topic = self.topic(topic_name, partitions=partitions, key_serializer=point.key_serializer, internal=True)
            topic.value_codec = src.value_codec  # values are forwarded as bytes, unchanged
            topic.value_type = src.value_type
        point.topic = topic

    async def discover(self, keep: bool = False) -> dict[str, FirstInstance]:
        """Find every agent's split points (idempotent); done before the topology is built.

        Each agent's first instance is started and runs up to its first ``async for``
        (:func:`agentstream.topology.discover_splits`). ``keep`` (the worker): every agent's, returned
        by agent name for the worker's tasks to adopt (the preamble then runs once per instance);
        otherwise only the agents not found yet, and their first instances are stopped here."""
        from .topology import discover_splits

        found: dict[str, FirstInstance] = {}
        for agent in self.agents.values():
            # a worker (keep) starts every topic agent's first instance, found before or not: a
            # second worker of the app in this process has instances of its own (channel agents
            # have no topology: they are discovered from the start)
            if not agent.discovered or (keep and (agent.topics or agent.patterns)):
                agent.splits = []
                try:
                    first = await discover_splits(self, agent)
                except BaseException:
                    for started in found.values():  # the start fails: no task will adopt them
                        await started.close()
                    raise
                agent.splits = list(first.input.points)
                agent.discovered = True
                found[agent.name] = first
        if not keep:
            for first in found.values():
                await first.close()
            return {}
        return found

    def topology(self) -> Topology:
        from .topology import Topology

        return Topology.build(list(self.agents.values()))

    # -- clients ---------------------------------------------------------------------------------
    @property
    def transport(self) -> Transport:
        if self._transport is None:
            self._transport = get_transport(self.settings.broker, self.settings)
        return self._transport

    @property
    def producer_transport(self) -> Transport | None:
        """Faust's ``broker_producer`` naming another cluster than the consumers' (``broker``): the
        transport the app's producer sends through (the worker declares the app's topics there
        too); None when the producer uses ``broker``."""
        url = self.settings.extra.get("broker_producer")
        if not url:
            return None
        transport: Transport | None = self.__dict__.get("_producer_transport")
        if transport is None:
            transport = self.__dict__["_producer_transport"] = get_transport(url, self.settings)
        return transport

    def consumer_settings(self, *, group: bool = False) -> dict[str, Any]:
        """The consumers' arguments from the app's settings (agentstream.client_settings);
        ``group=True`` for the worker's group member (offset reset, static membership)."""
        from .client_settings import consumer_settings

        return consumer_settings(self.settings, group=group)

    def producer_settings(self) -> dict[str, Any]:
        """The producers' arguments from the app's settings (agentstream.client_settings)."""
        from .client_settings import producer_settings

        return producer_settings(self.settings)

    @property
    def _producer(self) -> Producer | None:
        return self._producer_object

    @_producer.setter
    def _producer(self, producer: Producer | None) -> None:
        self._producer_object = producer
        self._refresh_plain_sends()

    @property
    def _producer_started(self) -> bool:
        return self._producer_is_started

    @_producer_started.setter
    def _producer_started(self, started: bool) -> None:
        self._producer_is_started = started
        self._refresh_plain_sends()

    def _refresh_plain_sends(self) -> None:
        """Whether Topic.send may append a record to the producer directly, and to which."""
        producer = self._producer_object
        plain = (
            producer is not None
            and self._producer_is_started
            and self.settings.processing_guarantee != "exactly_once"  # sends go into the task's transaction
            and not self.sensors
            and not self.on_produce_message.receivers
        )
        self._plain_producer = producer if plain and isinstance(producer, Appender) else None
        for topic in self.topics.values():  # each topic's send reads its own copy (one attribute)
            topic.plain_producer = self._plain_producer

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            transport = self.producer_transport or self.transport
            producer = transport.producer(**self.producer_settings())
            partitioner = self.settings.extra.get("producer_partitioner")
            if partitioner is not None:  # Faust's: the app's function places records sent without a partition
                producer = PartitionerProducer(producer, check_partitioner(partitioner))  # type: ignore[assignment]
            if (
                self.settings.extra.get("stream_publish_on_commit")
                and self.settings.processing_guarantee != "exactly_once"
            ):
                producer = HeldProducer(producer)  # type: ignore[assignment]  # Faust's: agents' sends go out at the commit
            self._producer = producer
        return self._producer

    async def start_producer(self) -> Producer:
        """The started producer (started on first use, so scripts can just ``await topic.send``)."""
        if self._producer_started:
            return self.producer
        if self._producer_lock is None:
            self._producer_lock = asyncio.Lock()
        async with self._producer_lock:
            if not self._producer_started:
                await self.producer.start()
                self._producer_started = True
        return self.producer

    async def replies(self) -> ReplyConsumer:
        if self._replies is None:
            self._replies = ReplyConsumer(self)
        await self._replies.start()
        return self._replies

    async def stop_clients(self) -> None:
        """Stop the producer, reply reader and transport (the worker calls this last)."""
        if self._replies is not None:
            await self._replies.stop()
            self._replies = None
        client = self.__dict__.pop("_http_client", None)
        if client is not None and hasattr(client, "close"):
            await client.close()
        try:
            if self._producer is not None and self._producer_started:
                try:
                    await self._producer.flush()
                except GroupFenced as exc:  # its unsent records were dropped on purpose (worker/fencing.py)
                    log.info("the producer is fenced, so nothing is left to flush: %s", exc)
                finally:
                    await self._producer.stop()
        finally:
            self._producer = None
            self._producer_started = False
            producer_transport = self.__dict__.pop("_producer_transport", None)
            if producer_transport is not None:
                await producer_transport.close()
            if self._transport is not None:
                await self._transport.close()
                self._transport = None

    # -- Faust's app-level API: finalize, flow control, send, leadership, client-only mode ----------
    finalized: bool = False
    client_only: bool = False

    def finalize(self) -> None:
        """Faust's ``app.finalize()``: the configuration is complete (settings are already built
        when the App is made, so this only marks it, as Faust's CLI does before running)."""
        if not self.settings.id:
            raise ConfigError("id", "the app has no id", 'name the app: App("myapp", ...)')
        self.finalized = True

    @property
    def http_client(self) -> Any:
        """Faust's ``app.http_client``: an HTTP client session for the app's own calls, made on first
        use (in the event loop) from the ``HttpClient`` setting's class (aiohttp's ClientSession
        unless the app names a subclass); closed with the app's clients. Assign one to replace it."""
        client = self.__dict__.get("_http_client")
        if client is None:
            from aiohttp import ClientSession

            cls = _class_setting(self.settings, "HttpClient", ClientSession) or ClientSession
            client = self.__dict__["_http_client"] = cls()
        return client

    @http_client.setter
    def http_client(self, client: Any) -> None:
        self.__dict__["_http_client"] = client

    @property
    def cache(self) -> CacheBackend:
        """Faust's ``app.cache``: the backend ``@cache.view()`` web views keep their answers in when
        their Cache names none; ``memory://`` (this process) unless the app's ``cache`` setting names
        another (``redis://`` needs the redis package). Assign a backend to replace it."""
        backend: CacheBackend | None = self.__dict__.get("_cache")
        if backend is None:
            backend = self.__dict__["_cache"] = backend_for(self.settings.extra.get("cache") or "memory://")
        return backend

    @cache.setter
    def cache(self, backend: CacheBackend) -> None:
        self.__dict__["_cache"] = backend

    @property
    def flow_control(self) -> FlowControl:
        """Faust's ``app.flow_control`` (see :class:`FlowControl`)."""
        flow: FlowControl | None = self.__dict__.get("_flow_control")
        if flow is None:
            flow = self.__dict__["_flow_control"] = FlowControl()
        return flow

    async def send(
        self,
        channel: Any,
        key: Any = None,
        value: Any = None,
        partition: int | None = None,
        timestamp: float | None = None,
        headers: Any = None,
        schema: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        callback: Any = None,
    ) -> Any:
        """Faust's ``app.send``: send to a topic (by name or object), channel or agent; returns the
        record's delivery (await it for the metadata). ``headers`` a mapping or ``(name, value)``
        pairs; ``key_serializer``/``value_serializer`` (a codec name) replace the topic's codecs for
        this record; ``callback(delivery)`` is called once the record is delivered. ``schema``
        (Faust's Schema) gives the serializers not given."""
        target = channel
        if isinstance(channel, str):
            known = channel in self.topics
            target = self.topic(channel)
            if not known:  # a name first used here: created as a declared topic would be (Faust
                await target.maybe_declare()  # leaves it to the broker's auto-creation, often off)
        if isinstance(target, (Topic, Agent)):
            return await target.send(
                key=key,
                value=value,
                partition=partition,
                timestamp=timestamp,
                headers=headers,
                schema=schema,
                key_serializer=key_serializer,
                value_serializer=value_serializer,
                callback=callback,
            )
        if schema is not None or key_serializer is not None or value_serializer is not None or callback is not None:
            raise TypeError(
                f"app.send: schema/key_serializer/value_serializer/callback need a topic or an agent, got {target!r}"
            )
        return await target.send(key=key, value=value, partition=partition, timestamp=timestamp, headers=headers)

    def is_leader(self) -> bool:
        """Faust's ``app.is_leader()``: True in the worker the last rebalance made the group
        leader (False outside a running worker; Faust raises there), as the ``LeaderAssignor``
        setting's object says (:mod:`agentstream.leader`)."""
        return bool(self.leader_assignor.is_leader())

    @property
    def leader_assignor(self) -> Any:
        """The object that answers :meth:`is_leader` (Faust's ``app._leader_assignor``): the
        ``LeaderAssignor`` setting's class, else :class:`agentstream.leader.LeaderAssignor`."""
        assignor = self.__dict__.get("_leader_assignor")
        if assignor is None:
            from .leader import LeaderAssignor

            cls = self.class_setting("LeaderAssignor") or LeaderAssignor
            assignor = self.__dict__["_leader_assignor"] = cls(self)
        return assignor

    def class_setting(self, name: str, base: type | None = None, base_name: str = "") -> Any:
        """The class Faust's class setting ``name`` names (``Event``, ``TableManager``...), imported
        from its ``'module:Class'`` path if need be and checked against ``base`` (by default the
        agentstream class it must subclass); None when the app keeps agentstream's own."""
        if self.settings.extra.get(name) is None:
            return None
        if base is None:
            base, base_name = _class_base(name)
        return _class_setting(self.settings, name, base, base_name)

    @property
    def serializers(self) -> Any:
        """Faust's ``app.serializers``: the registry that encodes and decodes keys and values by type
        and serializer (``dumps_key``, ``loads_value``...), made from the ``Serializers`` setting's
        class with the app's default serializers. Given that setting, the app's topics and tables
        encode and decode through it (:mod:`agentstream.serializer_registry`)."""
        registry = self.__dict__.get("_serializers")
        if registry is None:
            from .serializer_registry import Registry

            cls = self.class_setting("Serializers") or Registry
            registry = cls(key_serializer=self.key_serializer, value_serializer=self.value_serializer)
            self.__dict__["_serializers"] = registry
        return registry

    def codec_through_serializers(self, side: str, type_: Any, serializer: Any) -> Any:
        """A codec that encodes and decodes one side (``"key"``/``"value"``) through
        :attr:`serializers`, when the ``Serializers`` setting names a class; else None (the caller
        keeps its own codec, with no call in between)."""
        if self.class_setting("Serializers") is None:
            return None
        from .serializer_registry import RegistryCodec

        return RegistryCodec(self.serializers, side, type_, serializer)

    def create_event(self, key: Any, value: Any, headers: Any, message: Any) -> Event:
        """Faust's ``app.create_event``: an event of the ``Event`` setting's class (a subclass of
        :class:`agentstream.Event`), else an :class:`~agentstream.Event`. ``headers`` (a mapping or
        pairs) become the event's headers when given; otherwise the message's are read."""
        cls = self.class_setting("Event") or Event
        event: Event = cls(key, value, message)
        if headers is not None:
            event.headers = dict(headers)
        return event

    async def start_client(self) -> None:
        """Faust's client-only mode: start the producer and the reply reader only (no agents,
        tables or group membership), so a script can ``send``, ``ask`` and ``ask_nowait``; stop with
        :meth:`stop_clients` (or ``await app.stop()``)."""
        self.client_only = True
        await self.start_producer()
        await self.replies()

    async def maybe_start_producer(self) -> Producer:
        """Faust's ``app.maybe_start_producer()``: the producer, started unless it already is."""
        return await self.start_producer()

    async def commit(self, topics: Any = None) -> bool:
        """Faust's ``app.commit(topics)``: commit now. agentstream commits every task's handled
        offsets at once (the commit unit: tables, sends and offsets together), so ``topics`` only
        has to be given as in Faust; False when no worker runs this app in this process."""
        worker = self.worker
        return bool(await worker.commit()) if worker is not None else False

    @property
    def consumer(self) -> Any:
        """Faust's ``app.consumer``: the running worker's group consumer (None outside a worker)."""
        worker = self.worker
        return None if worker is None else worker.consumer

    @property
    def web(self) -> Any:
        """Faust's ``app.web``: the running worker's web server (None outside a worker or with
        ``web_enabled=False``)."""
        worker = self.worker
        return next(iter(worker.servers), None) if worker is not None else None

    def Worker(self, *services: Any, **kwargs: Any) -> Any:
        """Faust's ``app.Worker(...)``: a worker for this app of the ``Worker`` setting's class
        (default :class:`agentstream.Worker`, with Faust's arguments and ``execute_from_commandline()``)."""
        from .settings import import_object

        cls = _class_setting(self.settings, "Worker", None) or import_object(_RUNTIME_WORKER)
        return cls(self, *services, **kwargs)

    async def maybe_start_client(self) -> None:
        """Start client-only mode unless a worker runs this app in this process."""
        if self.worker is None and not (self.client_only and self._producer_started):
            await self.start_client()

    async def stop(self) -> None:
        """Stop what :meth:`start_client` started (Faust's ``app.stop()`` for a client)."""
        await self.stop_clients()

    # -- running ---------------------------------------------------------------------------------
    def main(self, argv: Sequence[str] | None = None) -> None:
        """Faust's ``app.main()``: the CLI with this app preselected."""
        raise SystemExit(command_line()(list(argv) if argv is not None else None, app=self))

    def __repr__(self) -> str:
        return f"<App {self.id} broker={self.settings.broker}>"


# Faust's Table arguments with no same-named Table option (agentstream/faust_arguments.py): the
# call site acts on the honoured ones (on_recover, is_global), check() on the rest
_TABLE_FAUST_ARGUMENTS = tuple(a.name for a in faust_arguments.ARGUMENTS if a.call == "app.Table")


def _table_arguments(kwargs: dict[str, Any]) -> tuple[dict[str, Any], Any, bool]:
    """``(table options, on_recover, is_global)`` of ``app.Table(**kwargs)``."""
    faust = {key: kwargs.pop(key) for key in _TABLE_FAUST_ARGUMENTS if key in kwargs}
    on_recover, is_global = faust.pop("on_recover", None), bool(faust.pop("is_global", False))
    faust_arguments.check("app.Table", **faust)
    return kwargs, on_recover, is_global
