"""Every setting of Faust's ``Settings`` (faust-streaming 0.15) and what agentstream does with it.

A name is a promise: each Faust setting is **honoured** (it reaches the agentstream setting or
feature named here, and a test shows its effect), **refused** at start (``App(...)`` raises a
:class:`~agentstream.exceptions.ConfigError` naming it and why, before any worker joins a group),
or, for the few that cannot matter to agentstream, **not applicable** (accepted; the reason is in
the configuration reference). A refused setting given its Faust default is no request at all, so
it passes: only a value that asks for something agentstream does not do is refused.

``tests/unit/faust/test_faust_settings_table.py`` reads the names and defaults from
faust-streaming itself and checks this table against them; ``docs/faust-settings.md`` is
generated from it (``make faust-settings-doc``), and a test
keeps the page equal to the table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from .exceptions import ConfigError

__all__ = ["Status", "FaustSetting", "FAUST_SETTINGS", "refuse_unsupported", "render_markdown", "supervisor_name"]


class Status(enum.Enum):
    HONOURED = "honoured"
    REFUSED = "refused"
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class FaustSetting:
    name: str
    default: Any  # Faust's default (as faust-streaming 0.15.3 reports it); _UNSET: computed from others
    status: Status
    how: str  # honoured: the agentstream setting or feature; refused / n/a: why


_UNSET: Final = object()
H, R, NA = Status.HONOURED, Status.REFUSED, Status.NOT_APPLICABLE
_NO_THREADS = "agentstream runs everything on the worker's one event loop (no threads)"


def _s(name: str, default: Any, status: Status, how: str) -> FaustSetting:
    return FaustSetting(name, default, status, how)


_TABLE: Final = [
    # -- the app -------------------------------------------------------------------------------------
    _s("autodiscover", False, H, "autodiscover: the worker imports the modules before building the topology"),
    _s("datadir", "{conf.name}-data", H, "data_dir"),
    _s("tabledir", "tables", H, "tabledir: where table stores live, under data_dir/<id>/ unless absolute"),
    _s("debug", False, H, "debug: asyncio's debug mode on the worker's loop"),
    _s("env_prefix", None, H, "the prefix of Faust's environment variables (BROKER_URL...)"),
    _s("id_format", "{id}-v{self.version}", H, "id_format: read back as app.conf.id_format; a version > 1 names "
       "the app <id>-v<version> whatever it says, as faust-streaming 0.15 does (it formats the id given to App() "
       "before it reads id_format, so its group and topics carry that name; only a later app.conf.id = ... "
       "applies it there, and agentstream refuses assigning the id)"),
    _s("origin", None, H, "autodiscover's root package"),
    _s("timezone", _UNSET, H, "timezone: the default timezone of @app.crontab schedules"),
    _s("version", 1, H, "version: <id>-v<version> names a new, isolated app (group, changelogs, agent topics)"),
    _s("agent_supervisor", "mode.OneForOneSupervisor", H, "agent_supervisor: OneForOneSupervisor restarts the "
       "instance that failed (with backoff: agent_restart_max, agent_restart_backoff); CrashingSupervisor stops "
       "the worker on an agent's error (on_agent_error='stop' unless given); the others (OneForAll, Forfeit...) "
       "are refused at start: instances are restarted one by one, and a failed one always restarts"),
    _s("cython_optimizations", False, NA, "agentstream's hot path is compiled with mypyc when the build allows "
       "(AGENTSTREAM_PURE=1 turns it off); Faust's Cython switch has nothing to turn on"),
    _s("blocking_timeout", None, H, "blocking_timeout: a WARNING when the worker's event loop was blocked that "
       "long (how late a short sleep woke up; Faust's detector also needs --debug and dumps the stack)"),
    # -- the broker and its clients ------------------------------------------------------------------------
    _s("broker", None, H, "broker"),
    _s("url", None, H, "broker (Faust's old name for it)"),
    _s("broker_consumer", None, H, "broker_consumer: the consumers' cluster (the group, changelogs, topic "
       "declarations), in place of broker"),
    _s("broker_producer", None, H, "broker_producer: the producer's cluster when it is another (the worker declares "
       "the app's topics there too); refused with exactly_once, whose transactions commit the consumers' offsets"),
    _s("broker_api_version", "auto", NA, "the Kafka clients negotiate the API version (aiokafka deprecated api_version; Faust no longer passes it)"),
    _s("broker_check_crcs", True, H, "broker_check_crcs: passed to the consumers"),
    _s("broker_client_id", _UNSET, H, "broker_client_id: the client id of the producer and the consumers"),
    _s("broker_commit_every", 10000, H, "broker_commit_every: a commit also comes as soon as the worker's tasks "
       "have handled this many records since the last one (not given: every commit_interval seconds only)"),
    _s("broker_commit_interval", 2.8, H, "commit_interval"),
    _s("broker_commit_livelock_soft_timeout", 300.0, H, "broker_commit_livelock_soft_timeout: a WARNING when no "
       "offset was committed for this long while records wait (told once per stall)"),
    _s("broker_credentials", None, H, "broker_credentials (docs/security.md)"),
    _s("broker_heartbeat_interval", 3.0, H, "heartbeat_interval"),
    _s("broker_max_poll_interval", 1000.0, H, "broker_max_poll_interval: the consumer's max_poll_interval (agentstream's default 300 s)"),
    _s("broker_max_poll_records", None, H, "max_poll_records"),
    _s("broker_rebalance_timeout", 60.0, H, "rebalance_timeout"),
    _s("broker_request_timeout", 90.0, H, "broker_request_timeout: the consumers' request timeout"),
    _s("broker_session_timeout", 60.0, H, "session_timeout"),
    _s("ssl_context", None, H, "ssl_context (docs/security.md)"),
    _s("consumer_api_version", None, NA, "the consumer negotiates the API version (aiokafka deprecated api_version)"),
    _s("consumer_max_fetch_size", 1048576, H, "consumer_max_fetch_size: bytes per partition and fetch"),
    _s("consumer_auto_offset_reset", "earliest", H, "consumer_auto_offset_reset: earliest, latest or none for the app's group"),
    _s("consumer_group_instance_id", None, H, "consumer_group_instance_id: static membership (KIP-345)"),
    _s("consumer_metadata_max_age_ms", 300000, H, "consumer_metadata_max_age_ms: passed to the consumers"),
    _s("consumer_connections_max_idle_ms", 540000, H, "consumer_connections_max_idle_ms: passed to the consumers"),
    _s("key_serializer", "raw", H, "the app's default key serializer"),
    _s("value_serializer", "json", H, "the app's default value serializer"),
    _s("logging_config", None, H, "logging_config: dictConfig at worker start ('merge': True as in Faust)"),
    _s("loghandlers", None, H, "loghandlers: added to the root logger at worker start"),
    _s("producer_acks", -1, H, "producer_acks: -1/all, 1 or 0 (exactly_once needs all)"),
    _s("producer_api_version", None, NA, "the producer negotiates the API version (aiokafka deprecated api_version)"),
    _s("producer_compression_type", None, H, "producer_compression_type: gzip, snappy, lz4 or zstd"),
    _s("producer_linger", None, H, "producer_linger"),
    _s("producer_linger_ms", 0, H, "producer_linger (seconds)"),
    _s("producer_max_batch_size", 16384, H, "producer_max_batch_size"),
    _s("producer_max_request_size", 1000000, H, "producer_max_request_size: a larger record fails its send naming it"),
    _s("producer_partitioner", None, H, "producer_partitioner: the function (key_bytes, all_partitions, "
       "available_partitions) -> partition places each record sent without a partition (not callable, or an "
       "answer outside the partitions: ConfigError); tables read a key from its murmur2 partition, so a table "
       "fed through such a topic is told of the split (group_by re-keys it)"),
    _s("producer_request_timeout", 1200.0, H, "producer_request_timeout: a batch not delivered by then fails (agentstream's default 40 s)"),
    _s("producer_threaded", False, R, _NO_THREADS),
    _s("producer_metadata_max_age_ms", 300000, H, "producer_metadata_max_age_ms: passed to the producer"),
    _s("producer_connections_max_idle_ms", 540000, H, "producer_connections_max_idle_ms: passed to the producer"),
    # -- stores, tables, streams ----------------------------------------------------------------------------
    _s("recovery_consistency_check", True, R, "Faust's True (its default) stops with ConsistencyError when a "
       "store's offset is past its changelog's end, False keeps that store; agentstream does neither: it wipes the "
       "partition and restores it from the changelog, so the table never holds what the changelog lacks"),
    _s("store_check_exists", True, NA, "for Aerospike stores, which agentstream does not have (store= refuses them)"),
    _s("crash_app_on_aerospike_exception", True, NA, "for Aerospike stores, which agentstream does not have"),
    _s("aerospike_retries_on_exception", 60, NA, "for Aerospike stores, which agentstream does not have"),
    _s("aerospike_sleep_seconds_between_retries_on_exception", 1, NA, "for Aerospike stores, which agentstream "
       "does not have"),
    _s("reply_create_topic", False, H, "agent.ask() creates its reply topic <id>-replies-<hex> itself (as True asks; "
       "False, Faust's default, is no request)"),
    _s("reply_expires", 86400.0, H, "reply_expires: agent.ask()'s reply topic is created with this retention "
       "(not given: the broker's default retention)"),
    _s("reply_to", None, H, "reply_to: the name of this process's reply topic for agent.ask() (default "
       "<id>-replies-<hex>)"),
    _s("reply_to_prefix", "f-reply-", H, "reply_to_prefix: given, the reply topic is <prefix><32 hex> (not given: "
       "<id>-replies-<hex>)"),
    _s("processing_guarantee", "at_least_once", H, "processing_guarantee"),
    _s("stream_buffer_maxsize", 4096, H, "buffer_max_records"),
    _s("stream_processing_timeout", 300.0, H, "stream_processing_timeout: a record an agent has held this long is "
       "logged once as a WARNING naming the agent, its task and the record (0: no watchdog)"),
    _s("stream_publish_on_commit", False, H, "stream_publish_on_commit: what an agent sends while it handles a "
       "record is held and published at the next commit, before the offsets are committed (sends outside record "
       "handling go at once, as in Faust); under exactly_once the transaction does this already"),
    _s("stream_recovery_delay", 0.0, H, "stream_recovery_delay: after each assignment the worker waits this long "
       "before restoring tables and starting the tasks"),
    _s("stream_wait_empty", True, H, "stream_wait_empty: True, a stopping or rebalancing worker lets each agent "
       "finish its record (up to shutdown_timeout); False, it cancels them at once (the records are handled again)"),
    _s("store", "memory://", H, "store (agentstream's default is rocksdb://)"),
    _s("table_cleanup_interval", 30.0, H, "table_cleanup_interval: windows given expires= close by the wall clock"),
    _s("table_key_index_size", 1000, H, "table_key_index_size: the most keys each table remembers the partition "
       "of (its key -> partition cache; not given: 65536)"),
    _s("table_standby_replicas", 1, H, "table_standby_replicas"),
    _s("topic_allow_declare", True, H, "topic_allow_declare: False, the app creates no topic: the worker, "
       "topic.maybe_declare() and agent.ask() check each topic exists with the partitions the app needs and fail "
       "naming those missing or different"),
    _s("topic_disable_leader", False, H, "agentstream makes no leader topic (the consumer group's leader is the "
       "leader): True asks for what it does; False, Faust's default, is no request"),
    _s("topic_partitions", 8, H, "topic_partitions"),
    _s("topic_replication_factor", 1, H, "topic_replication_factor: -1 (the default) asks for the broker's default (KIP-464), falling back to min(3, brokers); app.topic(replicas=) per topic"),
    _s("cache", "memory://", H, "cache: the backend of app.cache (memory://, redis:// or rediscluster://, which "
       "need the redis package); another scheme is refused at start"),
    # -- web ------------------------------------------------------------------------------------------------
    _s("web", "aiohttp://", H, "web: a URL of scheme aiohttp is agentstream's web server; any other driver is "
       "refused at start (the server also routes table lookups between workers)"),
    _s("web_bind", "0.0.0.0", H, "web_bind: the address the web server listens on (default web_host, else 127.0.0.1: docs/deployment.md)"),
    _s("web_application_options", None, H, "web_application_options: passed to the aiohttp Application"),
    _s("web_cors_options", None, H, "web_cors_options: CORS headers for those origins (pages' own cors_options override); '*' with allow_credentials is refused"),
    _s("web_enabled", True, H, "web_enabled"),
    _s("web_stats_enabled", None, H, "web_stats_enabled: False turns off /status"),
    _s("web_graph_enabled", None, H, "web_graph_enabled: /graph/ serves the app's topology (topics, agents' stages) "
       "as a Graphviz graph (text/vnd.graphviz; Faust renders its service tree as a PNG); not given: follows debug, "
       "as in Faust"),
    _s("web_router_enabled", True, H, "web_router_enabled: False turns off /metadata (the table router)"),
    _s("web_tables_enabled", True, H, "web_tables_enabled: False turns off the table views"),
    _s("web_metrics_enabled", False, H, "web_metrics_enabled: /performance/ serves Faust's JSON (throughput, "
       "latency, consumer lag, tables, errors) from app.monitor, which counts from the worker's start"),
    _s("web_host", None, H, "web_host"),
    _s("web_in_thread", False, R, "the web server runs on the worker's event loop (no threads)"),
    _s("web_port", 6066, H, "web_port"),
    _s("web_ssl_context", None, H, "web_ssl_context: the web server speaks HTTPS with it (and advertises https)"),
    _s("web_transport", "tcp:", H, "web_transport: tcp:// or unix:///path (the server listens on that socket; other "
       "workers forward table lookups to canonical_url, a proxy in front of it); other schemes are refused"),
    _s("canonical_url", None, H, "canonical_url: the URL other workers are told (default http(s)://<web_host>:<port>)"),
    _s("worker_redirect_stdouts", True, H, "worker_redirect_stdouts: True, print() (sys.stdout and sys.stderr) goes "
       "to the log (logger agentstream.stdout) while the worker runs; False or not given: it is not redirected"),
    _s("worker_redirect_stdouts_level", "WARN", H, "worker_redirect_stdouts_level: the level of the redirected "
       "lines"),
    # -- classes --------------------------------------------------------------------------------------------
    _s("Agent", "faust:Agent", H, "agent_class"),
    _s("Stream", "faust:Stream", H, "stream_class"),
    _s("Topic", "faust:Topic", H, "topic_class"),
    _s("Event", "faust:Event", H, "the class of the events agents and streams get from topics and channels (and "
       "of app.create_event()): a subclass of agentstream.Event (or its 'module:Class' path), made as "
       "Event(key, value, message, tp); the pairs a join makes stay agentstream's Event"),
    _s("Schema", "faust:Schema", H, "the class of the default schema of a topic or channel declared without "
       "schema=: a subclass of agentstream.faust.Schema whose key_type, value_type, key_serializer and "
       "value_serializer fill in what the declaration leaves out (a subclass overriding the encode/decode hooks "
       "is refused when defined: topics decode with their codecs)"),
    _s("Table", "faust:Table", H, "the class app.Table() makes: a subclass of agentstream.Table (or its 'module:Class' path)"),
    _s("SetTable", "faust:SetTable", H, "the class app.SetTable() makes: a subclass of agentstream's SetTable"),
    _s("GlobalTable", "faust:GlobalTable", H, "the class app.GlobalTable() makes: a subclass of agentstream's GlobalTable"),
    _s("SetGlobalTable", "faust:SetGlobalTable", H, "the class app.SetGlobalTable() makes: a subclass of agentstream's "
       "SetGlobalTable"),
    _s("TableManager", "faust.tables:TableManager", H, "the class of the worker's table manager (it opens, "
       "restores and checkpoints the table partitions): a subclass of agentstream.tables.manager.TableManager "
       "(faust.tables.TableManager in the compat package); "
       "app.tables stays the mapping of tables by name"),
    _s("Serializers", "faust.serializers:Registry", H, "the class of app.serializers (a subclass of "
       "agentstream.faust.serializers.Registry, made with the app's key_serializer and value_serializer); given, "
       "the app's topics encode and decode keys and values through its dumps_key/loads_key/dumps_value/"
       "loads_value, as Faust's do (tables keep their codecs: the changelog format is fixed)"),
    _s("Worker", "faust.worker:Worker", H, "the class app.Worker() makes (default agentstream.Worker: Faust's arguments "
       "and execute_from_commandline())"),
    _s("PartitionAssignor", "faust.assignor:PartitionAssignor", H, "the class of the worker's group assignor "
       "(the leader's plan: assign(), the members' user data): a subclass of "
       "agentstream.worker.assignor.PartitionNumberAssignor (faust.assignor.PartitionAssignor), made with its keyword arguments (host, "
       "standby_replicas...), checked when the worker is made"),
    _s("LeaderAssignor", "faust.assignor:LeaderAssignor", H, "the class whose is_leader() answers app.is_leader() "
       "and decides the on_leader timers, tasks and crontabs: a subclass of agentstream.leader.LeaderAssignor "
       "(faust.assignor.LeaderAssignor), "
       "made as LeaderAssignor(app) (agentstream's reads the group's leader: it makes no leader topic)"),
    _s("Router", "faust.app.router:Router", R, "@app.table_route requests are forwarded by the web server to the "
       "worker holding the key's partition (the partition the table writes the key to); there is no "
       "app.router object to replace"),
    _s("HttpClient", "aiohttp.client:ClientSession", H, "the class of app.http_client (made on first use, closed "
       "with the app's clients): aiohttp's ClientSession or a subclass"),
    _s("Monitor", "faust.sensors:Monitor", H, "the class of app.monitor (a subclass of agentstream.sensors.Monitor), "
       "added to app.sensors on first use"),
    _s("ConsumerScheduler", "faust.transport.utils:DefaultSchedulingStrategy", R, "a task takes the buffered "
       "record with the lowest timestamp (Kafka Streams' partition group); the order is not pluggable"),
    _s("stream_ack_cancelled_tasks", True, NA, "deprecated in Faust since 1.0, where it has no effect (faust-streaming "
       "reads it nowhere); here a record whose agent was cancelled is never acknowledged (it is handled again)"),
    _s("stream_ack_exceptions", True, NA, "deprecated in Faust since 1.0, where it has no effect (faust-streaming "
       "reads it nowhere); here the records an agent raised on go where on_agent_error says"),
]  # fmt: skip

FAUST_SETTINGS: Final[dict[str, FaustSetting]] = {s.name: s for s in _TABLE}


def _same(value: Any, default: Any) -> bool:
    """Whether ``value`` asks for Faust's default (so refusing it would refuse nothing)."""
    if default is _UNSET:
        return value is None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if value is None or value == default:
        return True
    for v in (value, default):
        if isinstance(v, enum.Enum):
            return str(getattr(value, "value", value)) == str(getattr(default, "value", default))
    if isinstance(value, type):  # a class given for a class setting: Faust's own named by path
        return bool(f"{value.__module__}:{value.__qualname__}".replace("faust.", "faust:", 1) == default)
    return str(value) == str(default)


def supervisor_name(value: Any) -> str | None:
    """The class name of Faust's ``agent_supervisor`` (a mode class or its import path), or None."""
    if value is None:
        return None
    if isinstance(value, type):
        return value.__name__
    return str(value).replace(":", ".").rsplit(".", 1)[-1]


_SUPERVISORS = ("OneForOneSupervisor", "CrashingSupervisor")


def _check_value(app_id: str, name: str, value: Any) -> None:
    """An honoured setting whose value agentstream cannot do: ConfigError naming it and why."""
    if name == "agent_supervisor" and supervisor_name(value) not in _SUPERVISORS:
        raise ConfigError(
            name,
            f"app {app_id!r}: agent_supervisor={value!r} is not supported: agentstream restarts the agent instance "
            "that failed (OneForOneSupervisor) or stops the worker (CrashingSupervisor); it never restarts all "
            "instances at once nor leaves a failed one stopped",
            "use mode.OneForOneSupervisor (the default) or mode.CrashingSupervisor",
        )
    if name == "cache":
        import importlib.util
        from urllib.parse import urlsplit

        scheme = urlsplit(str(value)).scheme
        if scheme not in ("memory", "redis", "rediscluster"):
            raise ConfigError(
                name,
                f"app {app_id!r}: unknown cache backend {value!r}",
                "use memory://, redis://host:port/db or rediscluster://",
            )
        if scheme != "memory" and importlib.util.find_spec("redis") is None:
            raise ConfigError(name, f"app {app_id!r}: cache={value!r} needs the redis package", "pip install redis")
    if name == "producer_partitioner" and not callable(value):
        raise ConfigError(
            name,
            f"app {app_id!r}: {value!r} is not callable",
            "pass a function (key_bytes, all_partitions, available_partitions) -> partition",
        )
    if name == "table_key_index_size" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(name, f"app {app_id!r}: {value!r} is not a positive number of keys", "e.g. 1000")


def refuse_unsupported(app_id: str, given: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` for the first refused Faust setting given a value other than
    Faust's default, or an honoured one given a value agentstream cannot do: the app would
    otherwise run differently from what its settings say."""
    for name, value in given.items():
        entry = FAUST_SETTINGS.get(name)
        if entry is not None and entry.status is Status.HONOURED and value is not None:
            _check_value(app_id, name, value)
        if entry is None or entry.status is not Status.REFUSED or _same(value, entry.default):
            continue
        raise ConfigError(
            name,
            f"app {app_id!r}: Faust setting {name}={value!r} is not supported: {entry.how}",
            f"remove {name}= (or set it to Faust's default, {entry.default!r}) before starting the worker",
        )


def render_markdown() -> str:
    """The configuration reference's page of Faust settings (docs/faust-settings.md)."""
    counts = {s: sum(1 for e in _TABLE if e.status is s) for s in Status}
    lines = [
        "# Faust settings in agentstream",
        "",
        "<!-- generated from agentstream/faust_settings.py by `make faust-settings-doc`: do not edit -->",
        "",
        f"Every setting of faust-streaming's `Settings` ({len(_TABLE)}): **honoured** "
        f"({counts[Status.HONOURED]}: it reaches the agentstream setting or feature named), **refused** "
        f"({counts[Status.REFUSED]}: `App(...)` raises `ConfigError` naming it and why when it is given a value "
        f"other than Faust's default) or **not applicable** ({counts[Status.NOT_APPLICABLE]}: it cannot matter "
        "to agentstream, and why).",
        "",
        "| Faust setting | Faust's default | status | agentstream |",
        "|---|---|---|---|",
    ]
    for e in sorted(_TABLE, key=lambda e: e.name.lower()):
        default = "(computed)" if e.default is _UNSET else f"`{e.default!r}`"
        lines.append(f"| `{e.name}` | {default} | {e.status.value} | {e.how} |")
    return "\n".join(lines) + "\n"
