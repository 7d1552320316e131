"""App settings: App arguments, overridden by ``AGENTSTREAM_*`` environment variables, overridden
by CLI flags. Validated once at start-up so a bad value fails with the setting's name and the fix."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ._version import __version__
from .broker_urls import normalize_broker
from .client_settings import check_client_settings
from .credentials import SASL_MECHANISMS, Secret, broker_security, reveal
from .exceptions import ConfigError
from .faust_settings import supervisor_name

log = logging.getLogger("agentstream.settings")
ENV_PREFIX = "AGENTSTREAM_"
# AGENTSTREAM_* variables that are not settings (read by tools and tests), never "unknown".
NON_SETTING_VARIABLES = frozenset(
    {"AGENTSTREAM_ARTIFACTS", "AGENTSTREAM_FAULT_SENTENCES", "AGENTSTREAM_PURE", "AGENTSTREAM_COMPILE"}
)
STORE_SCHEMES = ("rocksdb", "memory")
# rocksdb_memory_mb (agentstream/tables/rocksdb_memory.py): the one memory budget of all RocksDB stores
ROCKSDB_MEMORY_DEFAULT_MB = 64
ROCKSDB_MEMORY_MIN_MB = 32  # half of it memtables: 16 MB for every store's, 1 MB memtables at least
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")

POLICIES = ("skip", "stop", "dead-letter")
GUARANTEES = ("at_least_once", "exactly_once")
TOPIC_NAMINGS = ("agentstream", "faust")
LOG_FORMATS = ("text", "json")


APP_ONLY = (
    "id",
    "extra",
    "broker_credentials",
    "ssl_context",
    "stream_class",
    "agent_class",
    "topic_class",
    "web_ssl_context",
    "web_cors_options",
    "web_application_options",
    "logging_config",
    "loghandlers",
    "processing_exception_handler",
    "production_exception_handler",
)
"""Settings only an App argument can give (objects, not text): no environment variable sets them."""


def path_component_problem(name: str) -> str | None:
    """Why ``name`` cannot be used as ONE directory name under the data dir, or None when it can."""
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} is not a directory of its own (the directory itself or its parent)"
    for bad in ("/", "\\", os.sep, os.altsep or "/"):
        if bad in name:
            return f"it contains {bad!r}, a path separator"
    if "\0" in name:
        return "it contains a NUL character"
    return None


@dataclass
class Settings:
    """Everything a worker needs to know; durations are in seconds (floats), like Faust."""

    id: str
    broker: str = "kafka://127.0.0.1:9092"
    store: str = "rocksdb://"
    data_dir: Path = field(default_factory=lambda: Path("data"))
    topic_partitions: int = 8
    commit_interval: float = 1.0
    max_task_idle: float = 0.0
    tabledir: str = "tables"  # Faust's: table stores under data_dir/<id>/<tabledir> (absolute: <tabledir>/<id>)
    debug: bool = False  # Faust's: asyncio's debug mode on the worker's loop
    table_cleanup_interval: float = 30.0  # Faust's: windows with expires= close by the wall clock this often
    buffer_max_records: int = 1000
    max_poll_records: int = 1000
    # production defaults (docs/configuration.md, "Production defaults"): Kafka's 45 s session and 3 s heartbeat
    # (an agent blocking the loop for 10 s must not cost a rebalance), Faust's 60 s rebalance timeout
    session_timeout: float = 45.0
    heartbeat_interval: float = 3.0
    rebalance_timeout: float = 60.0
    shutdown_timeout: float = 10.0
    restore_timeout: float = 300.0  # a table restore without progress for this long fails (RestoreTimeout)
    producer_linger: float = 0.005
    producer_max_batch_size: int = 16384
    consumer_fetch_max_wait: float = 0.5
    on_decode_error: str = "skip"
    on_agent_error: str = "skip"
    agent_restart_max: int = 10  # restarts in a row of an agent that fails before handling a record
    agent_restart_backoff: float = 0.1  # first restart delay (doubles each time, at most 30 s)
    dead_letter_topic: str = ""
    # -- exception handlers (docs/errors.md; Kafka Streams' KIP-1033 / KIP-1034) ----------------------
    processing_exception_handler: Any = field(
        default=None,
        metadata={
            "help": (
                "fn(ErrorContext) -> 'continue' | 'fail' | 'dead-letter' | None, asked about a record that failed "
                "to decode or made its agent raise; None leaves it to on_decode_error / on_agent_error "
                "(App argument only)"
            )
        },
    )
    production_exception_handler: Any = field(
        default=None,
        metadata={
            "help": (
                "fn(ErrorContext) -> 'continue' | 'fail' | 'dead-letter' | None, asked about a send that failed "
                "for good (not serialisable, too large, not authorised); None or no handler: fail "
                "(App argument only)"
            )
        },
    )
    agent_retries: int = field(
        default=0,
        metadata={
            "help": (
                "times an agent runs again on the record it raised on before the error goes to the handler or "
                "on_agent_error; the partition waits (in order, nothing committed past the record)"
            )
        },
    )
    agent_retry_backoff: float = field(
        default=1.0,
        metadata={
            "help": "seconds before the first agent retry; each further retry waits twice as long (at most 60 s)"
        },
    )
    processing_guarantee: str = "at_least_once"
    table_standby_replicas: int = 1  # Faust's default: a warm copy on another worker (no effect on a lone worker)
    # -- scaling out without a restore stall (KIP-441; docs/deployment.md) ---------------------------
    acceptable_recovery_lag: int = field(
        default=10_000,
        metadata={
            "help": (
                "changelog records a worker's copy of a table partition may lag by and still take the active "
                "task (Kafka Streams' acceptable.recovery.lag); further behind, it gets a warm-up replica first"
            )
        },
    )
    max_warmup_replicas: int = field(
        default=2,
        metadata={
            "help": (
                "warm-up replicas in the whole group at once: copies restored on a worker that is to take "
                "the partition over once caught up (Kafka Streams' max.warmup.replicas); 0: move at once"
            )
        },
    )
    probing_rebalance_interval: float = field(
        default=10.0,
        metadata={
            "help": (
                "seconds between a worker's checks of its warm-ups; once they are caught up it asks for a "
                "(probing) rebalance that hands it the active tasks (Kafka Streams' default 10 min is for "
                "long-lived clusters)"
            )
        },
    )
    rack_id: str = field(
        default="",
        metadata={
            "help": (
                "this worker's rack or host for standby placement: standbys go to another rack first "
                "(Kafka Streams' client.rack); empty: the worker's web address"
            )
        },
    )
    table_cache_size: int = 10_000
    rocksdb_memory_mb: int = field(
        default=ROCKSDB_MEMORY_DEFAULT_MB,
        metadata={
            "help": (
                "MiB of memory all RocksDB stores of the worker process share (actives, standbys, global "
                "tables, restores): one block cache holding index and filter blocks too, half of it for "
                "memtables (Kafka Streams' BoundedMemoryRocksDBConfig); docs/deployment.md says how to size it"
            )
        },
    )
    web_enabled: bool = True
    web_port: int = 6066
    # -- the web server for deployments (docs/deployment.md): Faust's web_bind / web_host / canonical_url --
    web_bind: str = field(
        default="",
        metadata={
            "help": (
                "address the web server listens on; empty: web_host when that is given, else 127.0.0.1 "
                "(loopback: the server has no authentication unless web_token is set); 0.0.0.0 listens on "
                "every interface (Faust's default)"
            )
        },
    )
    web_host: str = field(
        default="",
        metadata={
            "help": (
                "host name other workers and clients reach this web server by (advertised in the group for "
                "table lookups); empty: web_bind, or this machine's host name when web_bind is a wildcard"
            )
        },
    )
    canonical_url: str = field(
        default="",
        metadata={
            "help": (
                "the URL advertised to the other workers, http(s)://host[:port] (Faust's canonical_url); "
                "empty: <scheme>://<web_host>:<bound port>, https when web_ssl_context is set"
            )
        },
    )
    web_transport: str = field(
        default="tcp://",
        metadata={
            "help": "how the web server listens: tcp:// or unix:///path (other workers forward to canonical_url)"
        },
    )
    web_in_thread: bool = field(
        default=False,
        metadata={"help": "Faust's web server thread: refused when true (the server runs on the worker's loop)"},
    )
    web: str = field(
        default="aiohttp://",
        metadata={"help": "Faust's web driver: a URL of scheme aiohttp (the only one; others are refused)"},
    )
    web_tables_enabled: bool = field(
        default=True, metadata={"help": "serve the table endpoints (/tables/..., Faust's /table/...): table data"}
    )
    web_router_enabled: bool = field(
        default=True, metadata={"help": "serve /metadata: which worker owns each partition (the cluster's addresses)"}
    )
    web_stats_enabled: bool = field(
        default=True,
        metadata={
            "help": (
                "serve /status, /status.json and /status.html (the worker's counters); on by default "
                "(Faust's follows debug)"
            )
        },
    )
    web_metrics_enabled: bool = field(
        default=False,
        metadata={"help": "serve Faust's /performance/ (JSON from app.monitor: throughput, latency, lag, tables)"},
    )
    web_graph_enabled: bool | None = field(
        default=None,
        metadata={"help": "serve Faust's /graph/ (the topology as a Graphviz graph); not given: follows debug"},
    )
    web_application_options: Any = field(
        default=None,
        metadata={
            "help": (
                "keyword arguments for the aiohttp web.Application (client_max_size, middlewares run after "
                "agentstream's guard...; App argument only)"
            )
        },
    )
    web_ssl_context: Any = field(
        default=None,
        metadata={"help": "an ssl.SSLContext: the web server speaks HTTPS (App argument only)"},
    )
    web_cors_options: Any = field(
        default=None,
        metadata={
            "help": (
                "CORS: {origin or '*': ResourceOptions(allow_credentials, expose_headers, allow_headers, "
                "max_age, allow_methods)} for every web endpoint (App argument only)"
            )
        },
    )
    loglevel: str = "INFO"
    # -- security (docs/security.md) -------------------------------------------------------------
    broker_credentials: Any = field(
        default=None,
        metadata={
            "help": (
                "Faust-style credentials object: SSLCredentials, SASLCredentials, GSSAPICredentials or "
                "OAuthCredentials (App argument only)"
            )
        },
    )
    agent_class: Any = field(
        default=None,
        metadata={
            "help": (
                "the Agent subclass @app.agent makes (Faust's Agent setting; App argument only, "
                "App(..., Agent=MyAgent))"
            )
        },
    )
    stream_class: Any = field(
        default=None,
        metadata={
            "help": (
                "the Stream subclass agents iterate (Faust's Stream setting; App argument only, "
                "App(..., Stream=MyStream))"
            )
        },
    )
    topic_class: Any = field(
        default=None,
        metadata={
            "help": (
                "the Topic subclass app.topic() makes (Faust's Topic setting; App argument only, "
                "App(..., Topic=MyTopic))"
            )
        },
    )
    ssl_context: Any = field(
        default=None,
        metadata={
            "help": ("an ssl.SSLContext for TLS to the broker (App argument only); wins over the broker_ssl_* files")
        },
    )
    broker_ssl: bool = field(
        default=False,
        metadata={"help": ("TLS to the broker, verified against the system CAs unless broker_ssl_cafile is set")},
    )
    broker_ssl_cafile: str = field(
        default="", metadata={"help": "PEM file of the CA(s) that signed the broker's certificate"}
    )
    broker_ssl_certfile: str = field(default="", metadata={"help": "PEM client certificate (mutual TLS)"})
    broker_ssl_keyfile: str = field(default="", metadata={"help": "PEM private key of the client certificate"})
    broker_ssl_check_hostname: bool = field(
        default=True, metadata={"help": ("verify that the broker's certificate names the host connected to")}
    )
    broker_sasl_mechanism: str = field(
        default="", metadata={"help": (f"SASL mechanism: {', '.join(SASL_MECHANISMS)} (empty: no SASL)")}
    )
    broker_sasl_username: str = field(default="", metadata={"help": "SASL username (PLAIN, SCRAM-*)"})
    broker_sasl_password: str = field(
        default="", repr=False, metadata={"help": ("SASL password (PLAIN, SCRAM-*); never logged"), "secret": True}
    )
    broker_sasl_oauth_token: str = field(
        default="",
        repr=False,
        metadata={
            "help": ("a fixed OAUTHBEARER token; for refreshing tokens pass OAuthCredentials(token_provider)"),
            "secret": True,
        },
    )
    web_token: str = field(
        default="",
        repr=False,
        metadata={
            "help": (
                "bearer token every web request must carry (Authorization: Bearer <token>), except /livez; "
                "empty: no authentication (bind to localhost only)"
            ),
            "secret": True,
        },
    )
    web_forward_credentials: bool = field(
        default=False,
        metadata={
            "help": (
                "pass the client's Cookie and Authorization headers on when a request is forwarded to the owner "
                "of a key (routed pages that check users themselves); off: the owner, whose address any member "
                "of the consumer group can advertise, gets neither. The web_token is never forwarded: owners "
                "get a signature bound to their address instead"
            )
        },
    )
    web_allowed_hosts: str = field(
        default="",
        metadata={
            "help": (
                "comma-separated Host header names (without port) the web server answers; empty: on a loopback "
                "bind without web_token, only localhost, loopback addresses, web_host and canonical_url's host "
                "(against DNS rebinding), any host otherwise; '*': any host; a list is enforced on every bind"
            )
        },
    )
    web_max_connections: int = field(
        default=512, metadata={"help": ("open HTTP connections served at once; more are closed at accept")}
    )
    web_header_timeout: float = field(
        default=10.0,
        metadata={
            "help": (
                "seconds a client has to send a complete request head (slow or partial-header clients are dropped)"
            )
        },
    )
    web_body_timeout: float = field(
        default=30.0,
        metadata={
            "help": (
                "seconds a request may take to send its body; also how long a client may leave an answer "
                "unread (its connection is then dropped)"
            )
        },
    )
    web_idle_timeout: float = field(default=30.0, metadata={"help": "seconds an idle keep-alive connection is kept"})
    reply_topics: str = field(
        default="",
        metadata={
            "help": (
                "comma-separated topics (fnmatch patterns) a Faust-Ag-ReplyTo header may name besides "
                "the app's own reply topics"
            )
        },
    )
    max_message_time_difference: float = field(
        default=86400.0,
        metadata={
            "help": (
                "seconds a record's timestamp may lie ahead of the wall clock and still advance a windowed "
                "table's or a stream-stream join's stream time (Kafka's max.message.time.difference); "
                "a windowed table refuses such a record (error policy), a join drops and counts it; "
                "0 disables the bound"
            )
        },
    )
    topic_naming: str = field(
        default="agentstream",
        metadata={
            "help": (
                "'agentstream' or 'faust': with 'faust' the app uses Faust's internal topic names and table "
                "record formats (group and topic prefix <id>[-v<version>], "
                "repartition topics <id>-<topic>-<Model.field>-repartition, JSON table keys) so it can take over "
                "a running Faust app (docs/migrating-from-faust.md)"
            )
        },
    )
    version: int = field(
        default=1,
        metadata={
            "help": (
                "Faust's app version: with version > 1 the app id becomes <id>-v<version>, so the consumer group "
                "and every internal topic are new (a new version starts from scratch, as in Faust)"
            )
        },
    )
    # -- topics as Kafka Streams and Faust create them (agentstream.topic_configs) ------------------
    topic_replication_factor: int = field(
        default=-1,
        metadata={
            "help": (
                "replication factor of the topics the app creates (changelogs, repartition, agent and reply "
                "topics); -1: the broker's default.replication.factor (KIP-464), or min(3, brokers) on brokers "
                "older than Kafka 2.4. app.topic(..., replicas=N) sets one topic's"
            )
        },
    )
    repartition_purge_interval: float = field(
        default=30.0,
        metadata={
            "help": (
                "seconds between deletions of consumed records from repartition topics after a commit "
                "(Kafka Streams' repartition.purge.interval.ms, DeleteRecords); 0: never purge"
            )
        },
    )
    # -- Kafka client settings (Faust's names; agentstream/client_settings.py passes them on) -----------
    consumer_auto_offset_reset: str = field(
        default="earliest",
        metadata={
            "help": (
                "where the app's consumer group starts on a partition without a committed offset (or past the "
                "log's ends): earliest, latest, or none (the worker stops naming the partition)"
            )
        },
    )
    consumer_group_instance_id: str | None = field(
        default=None,
        metadata={
            "help": (
                "static group membership (KIP-345): a unique, stable id per worker; a restart within "
                "session_timeout keeps the worker's partitions without a rebalance"
            )
        },
    )
    consumer_isolation_level: str | None = field(
        default=None,
        metadata={
            "help": (
                "read_committed or read_uncommitted; default: read_committed under exactly_once, else read_uncommitted"
            )
        },
    )
    consumer_max_fetch_size: int = field(
        default=1024**2, metadata={"help": "bytes the broker returns per partition and fetch at most"}
    )
    consumer_metadata_max_age_ms: int = field(
        default=300_000, metadata={"help": "milliseconds after which consumers refresh cluster metadata"}
    )
    consumer_connections_max_idle_ms: int = field(
        default=540_000, metadata={"help": "milliseconds after which consumers close idle broker connections"}
    )
    broker_client_id: str = field(
        default=f"agentstream-{__version__}",
        metadata={"help": "client id the producer and consumers send with every request (broker logs and quotas)"},
    )
    broker_max_poll_interval: float = field(
        default=300.0,
        metadata={
            "help": (
                "seconds between polls before the consumer leaves the group (KIP-62); a worker polls "
                "continuously, so this bounds a stalled fetch loop"
            )
        },
    )
    broker_request_timeout: float = field(
        default=90.0,
        metadata={"help": "seconds a consumer request to the broker may take (not below session_timeout)"},
    )
    broker_check_crcs: bool = field(default=True, metadata={"help": "check the CRC32 of fetched record batches"})
    producer_acks: int | str = field(
        default=-1,
        metadata={
            "help": (
                "acknowledgements a produce request waits for: -1 or 'all' (every in-sync replica), "
                "1 (the leader), 0 (none); exactly_once needs all"
            )
        },
    )
    producer_compression_type: str | None = field(
        default=None, metadata={"help": "compression of produced batches: gzip, snappy, lz4 or zstd (default none)"}
    )
    producer_max_request_size: int = field(
        default=1_000_000, metadata={"help": "bytes of one produce request at most (and of one record)"}
    )
    producer_request_timeout: float = field(
        default=40.0,
        metadata={"help": "seconds a produce request may take; a batch not delivered by then fails the flush"},
    )
    producer_metadata_max_age_ms: int = field(
        default=300_000, metadata={"help": "milliseconds after which the producer refreshes cluster metadata"}
    )
    producer_connections_max_idle_ms: int = field(
        default=540_000, metadata={"help": "milliseconds after which the producer closes idle broker connections"}
    )
    # -- logging (agentstream/logging_setup.py applies them when a worker starts) ----------------------
    log_format: str = field(
        default="text",
        metadata={"help": "worker log lines: text, or json (one JSON object per line)"},
    )
    logging_config: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": (
                "a logging.config.dictConfig dictionary applied at worker start, replacing agentstream's "
                "logging (merged into it with 'merge': True, as in Faust) (App argument only)"
            )
        },
    )
    loghandlers: list[Any] | None = field(
        default=None,
        metadata={"help": "logging.Handler objects added to the root logger at worker start (App argument only)"},
    )
    timezone: str | tzinfo = field(
        default="UTC",
        metadata={"help": "default timezone of @app.crontab schedules (a zoneinfo name such as Europe/Paris)"},
    )
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.topic_replication_factor is None:  # type: ignore[comparison-overlap]  # Faust's "default"
            self.topic_replication_factor = -1
        if isinstance(self.data_dir, (str, os.PathLike)):
            self.data_dir = Path(_expand_datadir(str(self.data_dir), self))
        # Faust's broker forms (a list, ';'/','-separated, kafka:// on each part or none) -> one URL
        self.broker = normalize_broker(self.broker)
        for name in ("canonical_url", "web_transport", "web"):  # Faust takes yarl URLs too
            if type(getattr(self, name)).__name__ == "URL":
                setattr(self, name, str(getattr(self, name)))
        for f in dataclasses.fields(self):
            if f.metadata.get("secret") and isinstance(getattr(self, f.name), str):
                setattr(self, f.name, Secret(reveal(getattr(self, f.name)) or ""))
        self.validate()
        if self.version > 1 and not self.id.endswith(f"-v{self.version}"):
            # Faust's conf.id: a new version is a new app, its own consumer group and internal topics
            # (changelogs, agent, repartition, reply and dead-letter topics), in either naming. Named
            # with Faust's default id_format even when the app gives another: faust-streaming formats
            # the id before it reads id_format, so its group and topics carry <id>-v<version>
            self.id = f"{self.id}-v{self.version}"
        if not self.dead_letter_topic:
            self.dead_letter_topic = f"{self.id}-dead-letters"

    def validate(self) -> None:
        """Raise ConfigError for the first bad value, naming the setting and how to fix it."""
        if not self.id or not isinstance(self.id, str):
            raise ConfigError("id", f"app id must be a non-empty string, got {self.id!r}", 'App("myapp", ...)')
        self._check_types()
        for name in ("topic_partitions", "buffer_max_records", "max_poll_records", "producer_max_batch_size"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(
                    name, f"must be >= 1, got {getattr(self, name)!r}", f"set {name} to a positive integer"
                )
        for name in (
            "commit_interval",
            "session_timeout",
            "heartbeat_interval",
            "rebalance_timeout",
            "table_cleanup_interval",
        ):
            if float(getattr(self, name)) <= 0:
                raise ConfigError(
                    name,
                    f"must be > 0 seconds, got {getattr(self, name)!r}",
                    f"set {name} to a positive number of seconds",
                )
        if not (math.isfinite(float(self.restore_timeout)) and float(self.restore_timeout) > 0):
            raise ConfigError(
                "restore_timeout",
                f"must be a finite number of seconds > 0, got {self.restore_timeout!r}",
                "set restore_timeout to how long a table restore may go without progress, e.g. 300",
            )
        if self.producer_linger < 0:
            raise ConfigError(
                "producer_linger",
                f"must be >= 0 seconds, got {self.producer_linger!r}",
                "use 0 to send each batch as soon as the sender is free",
            )
        if not 0 <= self.consumer_fetch_max_wait <= 30:
            raise ConfigError(
                "consumer_fetch_max_wait",
                f"must be 0..30 seconds, got {self.consumer_fetch_max_wait!r}",
                "use e.g. 0.5 (the default), or less for lower latency at more fetch requests",
            )
        if not isinstance(self.agent_restart_max, int) or self.agent_restart_max < 0:
            raise ConfigError(
                "agent_restart_max",
                f"must be an integer >= 0, got {self.agent_restart_max!r}",
                "set how many times in a row an agent failing before its first record is restarted "
                "(0: stop the worker at the first such failure)",
            )
        if not self.agent_restart_backoff > 0:
            raise ConfigError(
                "agent_restart_backoff",
                f"must be > 0 seconds, got {self.agent_restart_backoff!r}",
                "set the first restart delay in seconds, e.g. 0.1 (it doubles, up to 30 s)",
            )
        if self.max_task_idle < 0:
            raise ConfigError(
                "max_task_idle", f"must be >= 0, got {self.max_task_idle}", "use 0 to never wait for lagging inputs"
            )
        if self.heartbeat_interval >= self.session_timeout:
            raise ConfigError(
                "heartbeat_interval",
                f"{self.heartbeat_interval}s is not below session_timeout={self.session_timeout}s",
                "make heartbeat_interval about a third of session_timeout",
            )
        for name in ("on_decode_error", "on_agent_error"):
            if getattr(self, name) not in POLICIES:
                raise ConfigError(name, f"unknown policy {getattr(self, name)!r}", f"use one of {', '.join(POLICIES)}")
        self._check_error_handling()
        if self.processing_guarantee not in GUARANTEES:
            raise ConfigError(
                "processing_guarantee",
                f"unknown guarantee {self.processing_guarantee!r}",
                f"use one of {', '.join(GUARANTEES)}",
            )
        if self.table_standby_replicas < 0:
            raise ConfigError("table_standby_replicas", "must be >= 0", "use 0 for no standby replicas")
        if self.acceptable_recovery_lag < 0:
            raise ConfigError(
                "acceptable_recovery_lag", "must be >= 0", "use 0 to move tasks only to copies fully caught up"
            )
        if self.max_warmup_replicas < 0:
            raise ConfigError("max_warmup_replicas", "must be >= 0", "use 0 to move tasks at once, with a restore")
        if self.probing_rebalance_interval <= 0:
            raise ConfigError(
                "probing_rebalance_interval", "must be > 0 seconds", "use e.g. 10 (seconds between warm-up checks)"
            )
        if self.table_cache_size < 0:
            raise ConfigError("table_cache_size", "must be >= 0", "use 0 to write every table update through")
        if self.rocksdb_memory_mb < ROCKSDB_MEMORY_MIN_MB:
            raise ConfigError(
                "rocksdb_memory_mb",
                f"must be >= {ROCKSDB_MEMORY_MIN_MB} (MiB), got {self.rocksdb_memory_mb!r}",
                f"give the RocksDB stores at least {ROCKSDB_MEMORY_MIN_MB} MiB (default {ROCKSDB_MEMORY_DEFAULT_MB})",
            )
        if not (0 <= self.web_port < 65536):
            raise ConfigError(
                "web_port", f"{self.web_port} is not a TCP port", "use a port in 1..65535 (0 picks a free one)"
            )
        self._check_web()
        for name in ("web_max_connections",):
            if getattr(self, name) < 1:
                raise ConfigError(
                    name, f"must be >= 1, got {getattr(self, name)!r}", f"set {name} to a positive integer"
                )
        for name in ("web_header_timeout", "web_body_timeout", "web_idle_timeout", "shutdown_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(
                    name,
                    f"must be > 0 seconds, got {getattr(self, name)!r}",
                    f"set {name} to a positive number of seconds",
                )
        if self.max_message_time_difference < 0:
            raise ConfigError(
                "max_message_time_difference",
                f"must be >= 0 seconds, got {self.max_message_time_difference!r}",
                "use e.g. 86400 (one day), or 0 to not bound stream time by the wall clock",
            )
        if self.topic_naming not in TOPIC_NAMINGS:
            raise ConfigError(
                "topic_naming",
                f"unknown naming {self.topic_naming!r}",
                "use 'agentstream' (the default) or 'faust' (to take over a running Faust app)",
            )
        if self.version < 1:
            raise ConfigError(
                "version",
                f"must be >= 1, got {self.version!r}",
                "use the version the Faust app ran with (1 when it set none)",
            )
        self._check_topic_settings()
        self._check_store()
        check_client_settings(self)
        self._check_logging()
        broker_security(self)  # builds the TLS context: bad files fail here, naming the setting

    def _check_error_handling(self) -> None:
        for name in ("processing_exception_handler", "production_exception_handler"):
            handler = getattr(self, name)
            if handler is not None and not callable(handler):
                raise ConfigError(
                    name,
                    f"must be a function of an ErrorContext, got {type(handler).__name__} {handler!r}",
                    f"pass {name}=fn where fn(ctx) returns 'continue', 'fail', 'dead-letter' or None",
                )
        if self.agent_retries < 0:
            raise ConfigError(
                "agent_retries", f"must be >= 0, got {self.agent_retries!r}", "use 0 for no retries, e.g. 3"
            )
        if not self.agent_retry_backoff > 0:
            raise ConfigError(
                "agent_retry_backoff",
                f"must be > 0 seconds, got {self.agent_retry_backoff!r}",
                "set the first retry delay in seconds, e.g. 1.0 (it doubles, up to 60 s)",
            )

    def _check_topic_settings(self) -> None:
        if self.topic_replication_factor == 0 or self.topic_replication_factor < -1:
            raise ConfigError(
                "topic_replication_factor",
                f"must be -1 or >= 1, got {self.topic_replication_factor!r}",
                "use -1 for the broker's default, or the number of copies of each partition (e.g. 3)",
            )
        if self.repartition_purge_interval < 0:
            raise ConfigError(
                "repartition_purge_interval",
                f"must be >= 0 seconds, got {self.repartition_purge_interval!r}",
                "use e.g. 30 (Kafka Streams' default), or 0 to never purge repartition topics",
            )

    def _check_types(self) -> None:
        """Numbers are numbers of the right kind and finite (NaN and infinity pass every comparison)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = str(f.type)
            if kind in ("int", "float"):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(
                        f.name, f"must be a number, got {type(value).__name__} {value!r}", f"set {f.name} to a {kind}"
                    )
                if not math.isfinite(value):
                    raise ConfigError(
                        f.name,
                        f"must be a finite number, got {value!r}",
                        f"set {f.name} to a finite {kind} (NaN and infinity are not allowed)",
                    )
                if kind == "int" and not float(value).is_integer():
                    raise ConfigError(f.name, f"must be a whole number, got {value!r}", f"set {f.name} to an integer")
                if kind == "int":
                    setattr(self, f.name, int(value))
            elif kind == "bool" and not isinstance(value, bool):
                raise ConfigError(f.name, f"must be true or false, got {value!r}", f"set {f.name} to True or False")
            elif kind == "str" and not isinstance(value, str):
                raise ConfigError(
                    f.name, f"must be a string, got {type(value).__name__} {value!r}", f"set {f.name} to a string"
                )
        if not isinstance(self.data_dir, Path):
            raise ConfigError("data_dir", f"must be a path, got {self.data_dir!r}", "set data_dir to a directory path")

    def _check_logging(self) -> None:
        """log_format, logging_config and timezone: refused here, not when the worker first logs or
        a crontab first fires."""
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(
                "log_format", f"unknown format {self.log_format!r}", f"use one of {', '.join(LOG_FORMATS)}"
            )
        if self.logging_config is not None and not isinstance(self.logging_config, Mapping):
            raise ConfigError(
                "logging_config",
                f"must be a dictConfig dictionary, got {type(self.logging_config).__name__}",
                "pass a dict as logging.config.dictConfig takes it, e.g. {'version': 1, 'root': {...}}",
            )
        if self.loghandlers is not None and not all(isinstance(h, logging.Handler) for h in self.loghandlers):
            raise ConfigError("loghandlers", "must be a list of logging.Handler objects", "pass [handler, ...]")
        if isinstance(self.timezone, str):
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo("UTC" if self.timezone.lower() == "utc" else self.timezone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ConfigError(
                    "timezone",
                    f"{self.timezone!r} is not a known timezone",
                    "use a zoneinfo name such as UTC, Europe/Paris or America/New_York, or pass a tzinfo",
                ) from None
        elif not isinstance(self.timezone, tzinfo):
            raise ConfigError(
                "timezone", f"must be a timezone name or tzinfo, got {self.timezone!r}", "e.g. timezone='Europe/Paris'"
            )

    def _check_web(self) -> None:
        """web_bind / web_host / canonical_url / web_transport / web_in_thread / TLS / CORS (Faust's names)."""
        for name in ("web_bind", "web_host"):
            _check_host(name, getattr(self, name))
        if self.canonical_url:
            _check_canonical_url(self.canonical_url)
        transport = str(self.web_transport)
        if transport.rstrip("/") != "tcp:" and not (transport.startswith("unix://") and len(transport) > 7):
            raise ConfigError(
                "web_transport",
                f"{self.web_transport!r}: the web server listens on TCP (tcp://) or a unix socket (unix:///path)",
                "use tcp:// (the default) or unix:///path/to/socket",
            )
        if urlsplit(str(self.web)).scheme != "aiohttp":  # Faust picks the driver by the URL's scheme
            raise ConfigError(
                "web",
                f"{self.web!r}: agentstream's web server is aiohttp (the web driver's URL scheme); it also routes "
                "table lookups between workers, so no other driver can take its place",
                "use aiohttp:// or leave it out (an ASGI app runs beside the worker: faust.contrib.asgi)",
            )
        if self.web_graph_enabled is not None and not isinstance(self.web_graph_enabled, bool):
            raise ConfigError(
                "web_graph_enabled", f"must be true or false, got {self.web_graph_enabled!r}", "set it to True or False"
            )
        opts = self.web_application_options
        if opts is not None and not (isinstance(opts, Mapping) and all(isinstance(k, str) for k in opts)):
            raise ConfigError(
                "web_application_options",
                f"must be a mapping of aiohttp web.Application keyword arguments, got {opts!r}",
                "pass e.g. {'client_max_size': 20 * 1024**2}",
            )
        if self.web_in_thread:
            raise ConfigError(
                "web_in_thread",
                "True: the web server runs on the worker's event loop (it only reads published snapshots "
                "and the tables' public face, and table lookups must see the worker's stores)",
                "remove web_in_thread",
            )
        if self.web_ssl_context is not None and not isinstance(self.web_ssl_context, ssl.SSLContext):
            raise ConfigError(
                "web_ssl_context",
                f"must be an ssl.SSLContext, got {type(self.web_ssl_context).__name__}",
                "ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH); ctx.load_cert_chain(cert, key)",
            )
        if self.web_cors_options is not None:
            check_cors_options(self.web_cors_options)
        for host in allowed_hosts(self.web_allowed_hosts):
            if host != "*":
                _check_host("web_allowed_hosts", host)

    def web_bind_address(self) -> str:
        """The address the web server listens on: ``web_bind``, else ``web_host`` (listen exactly
        where others are told to connect), else loopback (safe without ``web_token``)."""
        return self.web_bind or self.web_host or "127.0.0.1"

    def web_advertised_host(self) -> str:
        """The host name others reach this web server by (Faust's ``web_host``): given, else the bind
        address, or this machine's host name for a wildcard bind (nobody can connect to 0.0.0.0)."""
        host = self.web_host or self.web_bind_address()
        return socket.gethostname() if host in _WILDCARDS else host

    def _check_store(self) -> None:
        scheme, sep, _ = self.store.partition("://")
        if not sep or scheme.lower() not in STORE_SCHEMES:
            raise ConfigError(
                "store",
                f"unsupported store URL {self.store!r}",
                "use 'rocksdb://' (persistent, the default) or 'memory://' (rebuilt from the changelog)",
            )

    def check_data_dir(self) -> None:
        """The data dir exists as a writable directory, or can be created (no side effects).

        Not part of :meth:`validate`: the App's settings are built when the app module is
        imported, before CLI flags such as ``--data-dir`` apply; the worker calls this once the
        settings are final, before it joins the group."""
        path = self.data_dir
        fix = "pass --data-dir (AGENTSTREAM_DATA_DIR) naming a directory this user can write, or create it"
        if path.exists():
            if not path.is_dir():
                raise ConfigError("data_dir", f"{str(path)!r} exists and is not a directory", fix)
            if not os.access(path, os.W_OK | os.X_OK):
                raise ConfigError("data_dir", f"directory {str(path)!r} is not writable", fix)
            return
        parent = path.absolute().parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            raise ConfigError("data_dir", f"cannot create {str(path)!r}: {str(parent)!r} is not a directory", fix)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ConfigError("data_dir", f"cannot create {str(path)!r}: {str(parent)!r} is not writable", fix)

    def table_root(self) -> Path:
        """Where the app's table stores live: ``<data_dir>/<id>/<tabledir>``, or ``<tabledir>/<id>``
        when ``tabledir`` is absolute (Faust's ``tabledir``, relative to its data dir).

        Raises ConfigError naming ``id`` when the id cannot be one directory's name (``/x`` would
        make the path absolute, ``..`` leave the data dir: ``reset --yes`` deletes this path)."""
        problem = path_component_problem(self.id)
        if problem is not None:
            raise ConfigError(
                "id",
                f"{self.id!r} names the directory of the app's table stores, but {problem}",
                "use an id of letters, digits, '.', '_' and '-' (not '.' or '..')",
            )
        tabledir = Path(self.tabledir)
        return tabledir / self.id if tabledir.is_absolute() else Path(self.data_dir) / self.id / tabledir

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied and validated (for CLI flags)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            name = sorted(unknown)[0]
            raise ConfigError(name, "is not an agentstream setting", f"use one of {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def build(cls, id: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Settings:
        """App arguments first, then Faust's environment variables (``BROKER_URL``...: a Faust app's
        deployment keeps working), then ``AGENTSTREAM_<NAME>`` environment variables on top."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in options.items():
            if key in fields:
                values[key] = value
            else:
                extra[key] = value
        env = os.environ if environ is None else environ
        for key, value in faust_environment(env, options, fields).items():
            if key in fields:
                values[key] = value
            else:
                extra[key] = value
        for name, _f in fields.items():
            raw = env.get(f"{ENV_PREFIX}{name.upper()}")
            if raw is not None and name not in APP_ONLY:
                values[name] = _coerce(name, raw, fields[name].type)
        warn_unknown_variables(env)
        if "on_agent_error" not in values and supervisor_name(extra.get("agent_supervisor")) == "CrashingSupervisor":
            values["on_agent_error"] = "stop"  # Faust's CrashingSupervisor: an agent's error stops the worker
        _split_brokers(values, extra)
        return cls(id=id, extra=extra, **values)


def _split_brokers(values: dict[str, Any], extra: dict[str, Any]) -> None:
    """Faust's ``broker_consumer`` / ``broker_producer`` (each defaults to ``broker``): the consumer's
    cluster becomes ``broker`` (the group, changelogs, admin), the producer's ``extra['broker_producer']``
    (left out when it is the same cluster)."""
    consumer, producer = extra.pop("broker_consumer", None), extra.pop("broker_producer", None)
    if consumer is None and producer is None:
        return
    main = values.get("broker", Settings.broker)
    consumer_url = normalize_broker(consumer) if consumer is not None else main
    producer_url = normalize_broker(producer) if producer is not None else normalize_broker(main)
    values["broker"] = consumer_url
    if producer_url != normalize_broker(consumer_url):
        if values.get("processing_guarantee") == "exactly_once":
            raise ConfigError(
                "broker_producer",
                f"the producer's cluster {producer_url!r} is not the consumer's {consumer_url!r}: under exactly_once "
                "the offsets are committed in the producer's transactions, on the consumer group's cluster",
                "use one cluster (broker=) with exactly_once",
            )
        extra["broker_producer"] = producer_url


# -- Faust's environment variables and the web checks (docs/deployment.md) --------------------------------

# Every environment variable faust-streaming's Settings reads (each setting's ``env_name``) -> the
# Faust setting it sets. As in Faust they override the App's arguments (AGENTSTREAM_* variables
# override them); each value goes through the same translation as the App argument of that name,
# so it is honoured, or refused at start, exactly as the argument would be.
FAUST_VARIABLES = {
    "APP_DATADIR": "datadir",
    "APP_TABLEDIR": "tabledir",
    "APP_DEBUG": "debug",
    "APP_ID_FORMAT": "id_format",
    "TIMEZONE": "timezone",
    "APP_VERSION": "version",
    "AGENT_SUPERVISOR": "agent_supervisor",
    "CYTHON_OPTIMIZATIONS": "cython_optimizations",
    "BLOCKING_TIMEOUT": "blocking_timeout",
    "BROKER_URL": "broker",
    "BROKER_CONSUMER_URL": "broker_consumer",
    "BROKER_PRODUCER_URL": "broker_producer",
    "BROKER_API_VERSION": "broker_api_version",
    "BROKER_CHECK_CRCS": "broker_check_crcs",
    "BROKER_CLIENT_ID": "broker_client_id",
    "BROKER_COMMIT_EVERY": "broker_commit_every",
    "BROKER_COMMIT_INTERVAL": "broker_commit_interval",
    "BROKER_COMMIT_LIVELOCK_SOFT_TIMEOUT": "broker_commit_livelock_soft_timeout",
    "BROKER_CREDENTIALS": "broker_credentials",
    "BROKER_HEARTBEAT_INTERVAL": "broker_heartbeat_interval",
    "BROKER_MAX_POLL_INTERVAL": "broker_max_poll_interval",
    "BROKER_MAX_POLL_RECORDS": "broker_max_poll_records",
    "BROKER_REBALANCE_TIMEOUT": "broker_rebalance_timeout",
    "BROKER_REQUEST_TIMEOUT": "broker_request_timeout",
    "BROKER_SESSION_TIMEOUT": "broker_session_timeout",
    "CONSUMER_API_VERSION": "consumer_api_version",
    "CONSUMER_MAX_FETCH_SIZE": "consumer_max_fetch_size",
    "CONSUMER_AUTO_OFFSET_RESET": "consumer_auto_offset_reset",
    "CONSUMER_GROUP_INSTANCE_ID": "consumer_group_instance_id",
    "CONSUMER_METADATA_MAX_AGE_MS": "consumer_metadata_max_age_ms",
    "CONSUMER_CONNECTIONS_MAX_IDLE_MS": "consumer_connections_max_idle_ms",
    "APP_KEY_SERIALIZER": "key_serializer",
    "APP_VALUE_SERIALIZER": "value_serializer",
    "PRODUCER_ACKS": "producer_acks",
    "PRODUCER_API_VERSION": "producer_api_version",
    "PRODUCER_COMPRESSION_TYPE": "producer_compression_type",
    "PRODUCER_LINGER": "producer_linger",
    "PRODUCER_LINGER_MS": "producer_linger_ms",
    "PRODUCER_MAX_BATCH_SIZE": "producer_max_batch_size",
    "PRODUCER_MAX_REQUEST_SIZE": "producer_max_request_size",
    "PRODUCER_REQUEST_TIMEOUT": "producer_request_timeout",
    "PRODUCER_THREADED": "producer_threaded",
    "PRODUCER_METADATA_MAX_AGE_MS": "producer_metadata_max_age_ms",
    "PRODUCER_CONNECTIONS_MAX_IDLE_MS": "producer_connections_max_idle_ms",
    "RECOVERY_CONSISTENCY_CHECK": "recovery_consistency_check",
    "STORE_CHECK_EXISTS": "store_check_exists",
    "CRASH_APP_ON_AEROSPIKE_EXCEPTION": "crash_app_on_aerospike_exception",
    "AEROSPIKE_RETRIES_ON_EXCEPTION": "aerospike_retries_on_exception",
    "AEROSPIKE_SLEEP_SECONDS_BETWEEN_RETRIES_ON_EXCEPTION": "aerospike_sleep_seconds_between_retries_on_exception",
    "APP_REPLY_CREATE_TOPIC": "reply_create_topic",
    "APP_REPLY_EXPIRES": "reply_expires",
    "APP_REPLY_TO_PREFIX": "reply_to_prefix",
    "PROCESSING_GUARANTEE": "processing_guarantee",
    "STREAM_BUFFER_MAXSIZE": "stream_buffer_maxsize",
    "STREAM_PROCESSING_TIMEOUT": "stream_processing_timeout",
    "STREAM_RECOVERY_DELAY": "stream_recovery_delay",
    "STREAM_WAIT_EMPTY": "stream_wait_empty",
    "APP_STORE": "store",
    "TABLE_CLEANUP_INTERVAL": "table_cleanup_interval",
    "TABLE_KEY_INDEX_SIZE": "table_key_index_size",
    "TABLE_STANDBY_REPLICAS": "table_standby_replicas",
    "TOPIC_ALLOW_DECLARE": "topic_allow_declare",
    "TOPIC_DISABLE_LEADER": "topic_disable_leader",
    "TOPIC_PARTITIONS": "topic_partitions",
    "TOPIC_REPLICATION_FACTOR": "topic_replication_factor",
    "CACHE_URL": "cache",
    "WEB_BIND": "web_bind",
    "APP_WEB_ENABLED": "web_enabled",
    "APP_WEB_STATS_ENABLED": "web_stats_enabled",
    "APP_WEB_GRAPH_ENABLED": "web_graph_enabled",
    "APP_WEB_ROUTER_ENABLED": "web_router_enabled",
    "APP_WEB_TABLES_ENABLED": "web_tables_enabled",
    "APP_WEB_METRICS_ENABLED": "web_metrics_enabled",
    "WEB_HOST": "web_host",
    "WEB_PORT": "web_port",
    "NODE_CANONICAL_URL": "canonical_url",
    "WORKER_REDIRECT_STDOUTS": "worker_redirect_stdouts",
    "WORKER_REDIRECT_STDOUTS_LEVEL": "worker_redirect_stdouts_level",
}
# The type Faust parses each non-text variable to (its Param's), for settings agentstream has no
# field of: the value then reaches settings.extra as the App argument would (False, not "false").
FAUST_BOOL_SETTINGS = frozenset(
    {
        *("debug", "cython_optimizations", "broker_check_crcs", "producer_threaded", "recovery_consistency_check"),
        *("store_check_exists", "crash_app_on_aerospike_exception", "reply_create_topic", "stream_wait_empty"),
        *("topic_allow_declare", "topic_disable_leader", "web_enabled", "web_stats_enabled", "web_graph_enabled"),
        *("web_router_enabled", "web_tables_enabled", "web_metrics_enabled", "worker_redirect_stdouts"),
    }
)
FAUST_SECONDS_SETTINGS = frozenset(
    {
        *("blocking_timeout", "broker_commit_interval", "broker_commit_livelock_soft_timeout"),
        *("broker_heartbeat_interval", "broker_max_poll_interval", "broker_rebalance_timeout"),
        *("broker_request_timeout", "broker_session_timeout", "producer_linger", "producer_request_timeout"),
        *("reply_expires", "stream_processing_timeout", "stream_recovery_delay", "table_cleanup_interval"),
    }
)
FAUST_INT_SETTINGS = frozenset(
    {
        *("version", "broker_commit_every", "broker_max_poll_records", "consumer_max_fetch_size"),
        *("consumer_metadata_max_age_ms", "consumer_connections_max_idle_ms", "producer_acks"),
        *("producer_max_batch_size", "producer_max_request_size", "producer_metadata_max_age_ms"),
        *("producer_connections_max_idle_ms", "aerospike_retries_on_exception"),
        *("aerospike_sleep_seconds_between_retries_on_exception", "stream_buffer_maxsize", "table_key_index_size"),
        *("table_standby_replicas", "topic_partitions", "topic_replication_factor", "web_port", "producer_linger_ms"),
    }
)
# Not a setting's value: Faust reads APP_ENV_PREFIX (env_prefix's own env_name) first, to find the others.
FAUST_PREFIX_VARIABLE = "APP_ENV_PREFIX"
_WILDCARDS = ("", "0.0.0.0", "::", "[::]")
_CORS_FIELDS = ("allow_credentials", "expose_headers", "allow_headers", "max_age", "allow_methods")


def faust_environment(env: Mapping[str, str], options: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The settings Faust's environment variables give (agentstream names), each read with Faust's
    ``env_prefix`` (``APP_ENV_PREFIX`` or the App's ``env_prefix=``): ``<PREFIX>_BROKER_URL``...

    A variable of a setting agentstream has is converted to that setting's type (an unparsable
    value is a ConfigError naming the variable); the others keep their text and land in
    ``settings.extra`` like the App argument of that name (logged, or refused, by faust_args)."""
    from .faust_args import translate_settings

    prefix = env.get(FAUST_PREFIX_VARIABLE) or options.get("env_prefix") or ""
    head = f"{str(prefix).rstrip('_')}_" if prefix else ""
    given: dict[str, tuple[str, str]] = {}  # Faust setting -> (variable, text)
    for variable, faust_name in FAUST_VARIABLES.items():
        raw = env.get(head + variable)
        if raw is not None:
            given[faust_name] = (head + variable, raw)
    if "producer_linger" in given:  # Faust: producer_linger (seconds) wins over the older producer_linger_ms
        given.pop("producer_linger_ms", None)
    out: dict[str, Any] = {}
    for faust_name, (variable, raw) in given.items():
        value: Any = raw
        if faust_name == "broker":  # Faust's broker list: ';' or ',' separated, kafka:// when no scheme is given
            value = normalize_broker(raw)
        elif faust_name == "producer_linger_ms":
            value = _coerce("producer_linger", raw, "float", variable)
        ((name, value),) = translate_settings({faust_name: value}).items()
        if name in APP_ONLY:
            raise ConfigError(
                name,
                f"environment variable {variable} cannot set it: it takes an object (App argument only)",
                "pass it to App(...), or use the AGENTSTREAM_BROKER_SASL_* / AGENTSTREAM_BROKER_SSL_* variables",
            )
        if name in fields and isinstance(value, str) and faust_name != "broker":
            value = _coerce(name, value, fields[name].type, variable)
        elif name not in fields and isinstance(value, str):
            kind = {**dict.fromkeys(FAUST_BOOL_SETTINGS, "bool"), **dict.fromkeys(FAUST_INT_SETTINGS, "int")}.get(
                faust_name, "float" if faust_name in FAUST_SECONDS_SETTINGS else "str"
            )
            value = _coerce(name, value, kind, variable)
        out[name] = value
    return out


def allowed_hosts(raw: str) -> list[str]:
    """``web_allowed_hosts`` as a list of lower-case names (empty: the default policy)."""
    return [h.strip().lower() for h in str(raw).split(",") if h.strip()]


class _ConfFields:
    """What Faust's ``datadir`` may name as ``{conf.x}``: the settings, ``name`` the id as given."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def __getattr__(self, name: str) -> Any:
        if name == "name":
            return self._settings.id
        return getattr(self._settings, {"datadir": "data_dir"}.get(name, name))


def _expand_datadir(path: str, settings: Settings) -> str:
    """Faust's datadir is a format string over the settings (its default is ``{conf.name}-data``):
    expanded once, when the settings are made (before ``-v<version>`` is added to the id)."""
    if "{" not in path:
        return path
    try:
        return path.format(conf=_ConfFields(settings))
    except (KeyError, AttributeError, IndexError, ValueError) as exc:
        raise ConfigError(
            "data_dir",
            f"{path!r} cannot be expanded: {type(exc).__name__}: {exc}",
            "name settings as {conf.name} or {conf.id} (Faust's datadir format), or give a plain path",
        ) from None


def _check_host(name: str, host: str) -> None:
    """A host name or an IP address (IPv6 with or without brackets), nothing else."""
    ok = host == "" or bool(_HOSTNAME.match(host))
    if not ok:
        import ipaddress

        try:
            ipaddress.ip_address(host[1:-1] if host.startswith("[") and host.endswith("]") else host)
            ok = True
        except ValueError:
            ok = False
    if not ok:
        raise ConfigError(
            name,
            f"{host!r} is not a host name or IP address",
            "use e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface), without scheme or port",
        )


def _check_canonical_url(raw: str) -> None:
    """http(s)://host[:port] only: workers forward table lookups to the host and port it names."""
    from urllib.parse import urlsplit

    fix = "use http://<host>:<port> or https://<host>:<port>, e.g. http://worker-1.internal:6066"
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise ConfigError("canonical_url", f"{raw!r} is not a URL: {exc}", fix) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("canonical_url", f"{raw!r} is not an http:// or https:// URL with a host", fix)
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(
            "canonical_url",
            f"{raw!r} has a path, query or user info: workers reach each other at host:port only",
            fix,
        )
    if port == 0:
        raise ConfigError("canonical_url", f"{raw!r} names port 0", fix)
    _check_host("canonical_url", parts.hostname)


def check_cors_options(options: Any, setting: str = "web_cors_options") -> None:
    """Faust's ``{origin: ResourceOptions}`` (faust.web / aiohttp_cors ResourceOptions, or a dict of
    their fields): string origins (or ``*``), known fields, lists of names or ``*``."""
    fix = "pass {'https://app.example.com': faust.web.ResourceOptions(allow_methods='*', ...)}"
    if not isinstance(options, Mapping):
        raise ConfigError(setting, f"must be a mapping of origin -> options, got {options!r}", fix)
    for origin, opts in options.items():
        if not isinstance(origin, str) or not origin or (origin != "*" and "://" not in origin):
            raise ConfigError(setting, f"origin {origin!r} is not '*' or scheme://host[:port]", fix)
        values = dict(opts) if isinstance(opts, Mapping) else {}
        if not isinstance(opts, Mapping):
            if not all(hasattr(opts, f) for f in _CORS_FIELDS):
                raise ConfigError(setting, f"options for {origin!r} are not ResourceOptions: {opts!r}", fix)
            values = {f: getattr(opts, f) for f in _CORS_FIELDS}
        unknown = sorted(set(values) - set(_CORS_FIELDS))
        if unknown:
            raise ConfigError(setting, f"unknown CORS option {unknown[0]!r} for {origin!r}", fix)
        for f in ("expose_headers", "allow_headers", "allow_methods"):
            v = values.get(f)
            if not (v is None or v == "*" or (not isinstance(v, str) and all(isinstance(x, str) for x in v))):
                raise ConfigError(setting, f"{f} for {origin!r} must be '*' or a list of names", fix)
        max_age = values.get("max_age")
        if max_age is not None and (isinstance(max_age, bool) or not isinstance(max_age, int) or max_age < 0):
            raise ConfigError(setting, f"max_age for {origin!r} must be seconds >= 0", fix)
        if origin == "*" and values.get("allow_credentials"):
            raise ConfigError(
                setting,
                "origin '*' with allow_credentials=True would let any web page read answers with its "
                "visitors' cookies (the server reflects the page's origin)",
                "list the origins that may send credentials, e.g. {'https://app.example.com': "
                "ResourceOptions(allow_credentials=True, ...)}, and keep '*' without credentials",
            )


# faust-streaming 0.15.3's setting names (``faust.types.settings.Settings.SETTINGS``) and the older
# names its App still maps: what config_from_object reads from a module or object (Faust ignores the
# other attributes, such as the module's imports).
FAUST_SETTING_NAMES = frozenset(
    {
        *("Agent", "ConsumerScheduler", "Event", "GlobalTable", "HttpClient", "LeaderAssignor", "Monitor"),
        *("PartitionAssignor", "Router", "Schema", "Serializers", "SetGlobalTable", "SetTable", "Stream"),
        *("Table", "TableManager", "Topic", "Worker", "aerospike_retries_on_exception"),
        *("aerospike_sleep_seconds_between_retries_on_exception", "agent_supervisor", "autodiscover"),
        *("blocking_timeout", "broker", "broker_api_version", "broker_check_crcs", "broker_client_id"),
        *("broker_commit_every", "broker_commit_interval", "broker_commit_livelock_soft_timeout"),
        *("broker_consumer", "broker_credentials", "broker_heartbeat_interval", "broker_max_poll_interval"),
        *("broker_max_poll_records", "broker_producer", "broker_rebalance_timeout", "broker_request_timeout"),
        *("broker_session_timeout", "cache", "canonical_url", "consumer_api_version"),
        *("consumer_auto_offset_reset", "consumer_connections_max_idle_ms", "consumer_group_instance_id"),
        *("consumer_max_fetch_size", "consumer_metadata_max_age_ms", "crash_app_on_aerospike_exception"),
        *("cython_optimizations", "datadir", "debug", "env_prefix", "id_format", "key_serializer"),
        *("logging_config", "loghandlers", "origin", "processing_guarantee", "producer_acks"),
        *("producer_api_version", "producer_compression_type", "producer_connections_max_idle_ms"),
        *("producer_linger", "producer_linger_ms", "producer_max_batch_size", "producer_max_request_size"),
        *("producer_metadata_max_age_ms", "producer_partitioner", "producer_request_timeout"),
        *("producer_threaded", "recovery_consistency_check", "reply_create_topic", "reply_expires"),
        *("reply_to", "reply_to_prefix", "ssl_context", "store", "store_check_exists"),
        *("stream_ack_cancelled_tasks", "stream_ack_exceptions", "stream_buffer_maxsize"),
        *("stream_processing_timeout", "stream_publish_on_commit", "stream_recovery_delay"),
        *("stream_wait_empty", "table_cleanup_interval", "table_key_index_size", "table_standby_replicas"),
        *("tabledir", "timezone", "topic_allow_declare", "topic_disable_leader", "topic_partitions"),
        *("topic_replication_factor", "url", "value_serializer", "version", "web", "web_application_options"),
        *("web_bind", "web_cors_options", "web_enabled", "web_graph_enabled", "web_host", "web_in_thread"),
        *("web_metrics_enabled", "web_port", "web_router_enabled", "web_ssl_context", "web_stats_enabled"),
        *("web_tables_enabled", "web_transport", "worker_redirect_stdouts", "worker_redirect_stdouts_level"),
        # App(...)'s older names (faust.App._prepare_compat_settings)
        *("client_id", "commit_interval", "create_reply_topic", "num_standby_replicas", "default_partitions"),
        "replication_factor",
    }
)


def options_from_object(source: Any, *, silent: bool = False) -> dict[str, Any] | None:
    """Faust's ``config_from_object`` source -> App options: a mapping (all its keys), or a module,
    class or object (its attributes named like a Faust or agentstream setting), or the import path
    of one (``"proj.settings"``, ``"proj.settings:Config"``, ``"proj.settings.Config"``), imported
    with the working directory on the path as Faust does. ``silent``: None when it cannot be imported."""
    if isinstance(source, str):
        try:
            source = import_object(source)
        except (ImportError, AttributeError) as exc:
            if silent:
                return None
            raise ConfigError(
                "config_from_object",
                f"cannot import {source!r}: {type(exc).__name__}: {exc}",
                "name a module importable from the working directory, e.g. 'proj.settings' or 'proj.settings:Config'",
            ) from exc
    if isinstance(source, Mapping):
        return dict(source)
    known = FAUST_SETTING_NAMES | {f.name for f in dataclasses.fields(Settings)} - {"id", "extra"}
    return {name: getattr(source, name) for name in sorted(known) if hasattr(source, name)}


def import_object(path: str) -> Any:
    """``'module:attr'`` or ``'module.attr'`` (Faust's symbol_by_name), imported from the working directory."""
    import importlib
    import sys

    module_name, sep, attr = path.partition(":")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError:
            if sep or "." not in module_name:
                raise
            module_name, _, attr = module_name.rpartition(".")  # proj.settings.Config
            obj = importlib.import_module(module_name)
    finally:
        if added:
            sys.path.remove(cwd)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


# -- end of the web / environment block ------------------------------------------------------------------


def setting_variables() -> list[str]:
    """Every ``AGENTSTREAM_*`` variable that sets a setting."""
    return [f"{ENV_PREFIX}{f.name.upper()}" for f in dataclasses.fields(Settings) if f.name not in APP_ONLY]


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """``(variable, closest setting variable or None)`` for each AGENTSTREAM_* name that sets nothing."""
    known = setting_variables()
    out: list[tuple[str, str | None]] = []
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and name not in known and name not in NON_SETTING_VARIABLES:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            out.append((name, close[0] if close else None))
    return out


_warned: set[str] = set()


def warn_unknown_variables(environ: Mapping[str, str]) -> None:
    """Log each unknown AGENTSTREAM_* variable once, with the closest match (a typo is never silent)."""
    for name, close in unknown_variables(environ):
        if name in _warned:
            continue
        _warned.add(name)
        hint = f"did you mean {close}?" if close else "see docs for the list of settings"
        log.warning("environment variable %s is not an agentstream setting and is ignored; %s", name, hint)


def _coerce(name: str, raw: str, type_: Any, variable: str | None = None) -> Any:
    """Turn an environment string into the setting's type, with a ConfigError naming the variable."""
    t = str(type_)
    variable = variable or f"{ENV_PREFIX}{name.upper()}"
    try:
        if t in ("int", "<class 'int'>"):
            return int(raw)
        if t in ("float", "<class 'float'>"):
            value = float(raw)
            if not math.isfinite(value):
                raise ConfigError(
                    name,
                    f"environment variable {variable}={raw!r} is not a finite number",
                    "set it to a finite number of seconds (NaN and infinity are not allowed)",
                )
            return value
        if t in ("bool", "<class 'bool'>", "bool | None"):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if t in ("Path", "<class 'pathlib.Path'>"):
            return Path(raw)
    except ValueError:
        raise ConfigError(
            name, f"environment variable {variable}={raw!r} is not a valid {t}", f"set it to a {t}"
        ) from None
    return raw
