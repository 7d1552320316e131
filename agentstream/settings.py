"""App settings: App arguments, overridden by ``AGENTSTREAM_*`` environment variables, overridden
by CLI flags. Validated once at start-up so a bad value fails with the setting's name and the fix."""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Any

from ._version import __version__
from .client_settings import check_client_settings
from .credentials import SASL_MECHANISMS, Secret, broker_security, reveal
from .exceptions import ConfigError

log = logging.getLogger("agentstream.settings")
ENV_PREFIX = "AGENTSTREAM_"
# AGENTSTREAM_* variables that are not settings (read by tools and tests), never "unknown".
NON_SETTING_VARIABLES = frozenset(
    {"AGENTSTREAM_ARTIFACTS", "AGENTSTREAM_FAULT_SENTENCES", "AGENTSTREAM_PURE", "AGENTSTREAM_COMPILE"}
)
STORE_SCHEMES = ("rocksdb", "memory")
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
    "logging_config",
    "loghandlers",
)
"""Settings only an App argument can give (objects, not text): no environment variable sets them."""


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
    table_cleanup_interval: float = 30.0  # Faust's: windows with expires= close by the wall clock this often
    buffer_max_records: int = 1000
    max_poll_records: int = 1000
    session_timeout: float = 10.0
    heartbeat_interval: float = 2.0
    rebalance_timeout: float = 10.0
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
    processing_guarantee: str = "at_least_once"
    table_standby_replicas: int = 0
    table_cache_size: int = 10_000
    web_enabled: bool = True
    web_port: int = 6066
    web_host: str = "127.0.0.1"
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
        default=30.0, metadata={"help": ("seconds a request may take to send its body and be answered")}
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
                "table's stream time (Kafka's max.message.time.difference); 0 disables the bound"
            )
        },
    )
    topic_naming: str = field(
        default="agentstream",
        metadata={
            "help": (
                "'agentstream' or 'faust': with 'faust' the app uses Faust's internal topic names and table "
                "record formats (group and topic prefix <id>[-v<version>], agent topics <id>-<module>.<agent>, "
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
        if isinstance(self.data_dir, (str, os.PathLike)):
            self.data_dir = Path(self.data_dir)
        for f in dataclasses.fields(self):
            if f.metadata.get("secret") and isinstance(getattr(self, f.name), str):
                setattr(self, f.name, Secret(reveal(getattr(self, f.name)) or ""))
        self.validate()
        if self.version > 1 and not self.id.endswith(f"-v{self.version}"):
            # Faust's conf.id: a new version is a new app, its own consumer group and internal topics
            # (changelogs, agent, repartition, reply and dead-letter topics), in either naming
            self.id = f"{self.id}-v{self.version}"
        if not self.dead_letter_topic:
            self.dead_letter_topic = f"{self.id}-dead-letters"

    def validate(self) -> None:
        """Raise ConfigError for the first bad value, naming the setting and how to fix it."""
        if not self.id or not isinstance(self.id, str):
            raise ConfigError("id", f"app id must be a non-empty string, got {self.id!r}", 'App("myapp", ...)')
        self._check_types()
        if "://" not in self.broker:
            raise ConfigError("broker", f"{self.broker!r} has no scheme", "use kafka://host:port or memory://")
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
        if self.processing_guarantee not in GUARANTEES:
            raise ConfigError(
                "processing_guarantee",
                f"unknown guarantee {self.processing_guarantee!r}",
                f"use one of {', '.join(GUARANTEES)}",
            )
        if self.table_standby_replicas < 0:
            raise ConfigError("table_standby_replicas", "must be >= 0", "use 0 for no standby replicas")
        if self.table_cache_size < 0:
            raise ConfigError("table_cache_size", "must be >= 0", "use 0 to write every table update through")
        if not (0 <= self.web_port < 65536):
            raise ConfigError(
                "web_port", f"{self.web_port} is not a TCP port", "use a port in 1..65535 (0 picks a free one)"
            )
        self._check_web_host()
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
        self._check_store()
        check_client_settings(self)
        self._check_logging()
        broker_security(self)  # builds the TLS context: bad files fail here, naming the setting

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

    def _check_web_host(self) -> None:
        host = self.web_host
        ok = host == "" or bool(_HOSTNAME.match(host))
        if not ok:
            try:
                import ipaddress

                ipaddress.ip_address(host.strip("[]"))
                ok = True
            except ValueError:
                ok = False
        if not ok:
            raise ConfigError(
                "web_host",
                f"{host!r} is not a host name or IP address",
                "use e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface), without scheme or port",
            )

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
        values.update(faust_environment(env, options, fields))
        for name, _f in fields.items():
            raw = env.get(f"{ENV_PREFIX}{name.upper()}")
            if raw is not None and name not in APP_ONLY:
                values[name] = _coerce(name, raw, fields[name].type)
        warn_unknown_variables(env)
        return cls(id=id, extra=extra, **values)


# Faust's environment variables (faust.types.settings: each setting's env_name) -> agentstream's
# setting. As in Faust they override the App's arguments; AGENTSTREAM_* variables override them.
FAUST_VARIABLES = {
    "BROKER_URL": "broker",
    "APP_DATADIR": "data_dir",
    "APP_STORE": "store",
    "BROKER_COMMIT_INTERVAL": "commit_interval",
    "BROKER_HEARTBEAT_INTERVAL": "heartbeat_interval",
    "BROKER_MAX_POLL_RECORDS": "max_poll_records",
    "BROKER_REBALANCE_TIMEOUT": "rebalance_timeout",
    "BROKER_SESSION_TIMEOUT": "session_timeout",
    "PRODUCER_LINGER": "producer_linger",
    "PRODUCER_MAX_BATCH_SIZE": "producer_max_batch_size",
    "PROCESSING_GUARANTEE": "processing_guarantee",
    "STREAM_BUFFER_MAXSIZE": "buffer_max_records",
    "TABLE_STANDBY_REPLICAS": "table_standby_replicas",
    "TOPIC_PARTITIONS": "topic_partitions",
    "WEB_BIND": "web_host",
    "WEB_PORT": "web_port",
    "APP_WEB_ENABLED": "web_enabled",
    # Kafka client settings and logging (agentstream.client_settings, agentstream.logging_setup)
    "BROKER_CLIENT_ID": "broker_client_id",
    "BROKER_CHECK_CRCS": "broker_check_crcs",
    "BROKER_MAX_POLL_INTERVAL": "broker_max_poll_interval",
    "BROKER_REQUEST_TIMEOUT": "broker_request_timeout",
    "CONSUMER_AUTO_OFFSET_RESET": "consumer_auto_offset_reset",
    "CONSUMER_GROUP_INSTANCE_ID": "consumer_group_instance_id",
    "CONSUMER_MAX_FETCH_SIZE": "consumer_max_fetch_size",
    "CONSUMER_METADATA_MAX_AGE_MS": "consumer_metadata_max_age_ms",
    "CONSUMER_CONNECTIONS_MAX_IDLE_MS": "consumer_connections_max_idle_ms",
    "PRODUCER_ACKS": "producer_acks",
    "PRODUCER_COMPRESSION_TYPE": "producer_compression_type",
    "PRODUCER_MAX_REQUEST_SIZE": "producer_max_request_size",
    "PRODUCER_REQUEST_TIMEOUT": "producer_request_timeout",
    "PRODUCER_METADATA_MAX_AGE_MS": "producer_metadata_max_age_ms",
    "PRODUCER_CONNECTIONS_MAX_IDLE_MS": "producer_connections_max_idle_ms",
    "TIMEZONE": "timezone",
}


def faust_environment(env: Mapping[str, str], options: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """The settings Faust's environment variables give, each read with Faust's ``env_prefix``
    (``APP_ENV_PREFIX`` or the App's ``env_prefix=``): ``<PREFIX>_BROKER_URL``..."""
    prefix = env.get("APP_ENV_PREFIX") or options.get("env_prefix") or ""
    head = f"{str(prefix).rstrip('_')}_" if prefix else ""
    out: dict[str, Any] = {}
    for variable, name in FAUST_VARIABLES.items():
        raw = env.get(head + variable)
        if raw is None:
            continue
        if name == "broker":  # Faust's broker list: ';' or ',' separated, kafka:// when no scheme is given
            urls = [u.strip() for u in raw.replace(",", ";").split(";") if u.strip()]
            out[name] = ";".join(u if "://" in u else f"kafka://{u}" for u in urls)
        else:
            out[name] = _coerce(name, raw, fields[name].type, head + variable)
    ms = env.get(head + "PRODUCER_LINGER_MS")
    if ms is not None and "producer_linger" not in out:
        out["producer_linger"] = _coerce("producer_linger", ms, "float", head + "PRODUCER_LINGER_MS") / 1000.0
    return out


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
        if t in ("bool", "<class 'bool'>"):
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
