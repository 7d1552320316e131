"""App settings: App arguments, overridden by ``AGENTSTREAM_*`` environment variables, overridden
by CLI flags. Validated once at start-up so a bad value fails with the setting's name and the fix."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .exceptions import ConfigError

POLICIES = ("skip", "stop", "dead-letter")
GUARANTEES = ("at_least_once", "exactly_once")


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
    dead_letter_topic: str = ""
    processing_guarantee: str = "at_least_once"
    table_standby_replicas: int = 0
    table_cache_size: int = 10_000
    web_enabled: bool = True
    web_port: int = 6066
    web_host: str = "127.0.0.1"
    loglevel: str = "INFO"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if not self.dead_letter_topic:
            self.dead_letter_topic = f"{self.id}-dead-letters"
        self.validate()

    def validate(self) -> None:
        """Raise ConfigError for the first bad value, naming the setting and how to fix it."""
        if not self.id or not isinstance(self.id, str):
            raise ConfigError("id", f"app id must be a non-empty string, got {self.id!r}", 'App("myapp", ...)')
        if "://" not in self.broker:
            raise ConfigError(
                "broker", f"{self.broker!r} has no scheme", "use kafka://host:port or memory://"
            )
        for name in ("topic_partitions", "buffer_max_records", "max_poll_records", "producer_max_batch_size"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(name, f"must be >= 1, got {getattr(self, name)!r}", f"set {name} to a positive integer")
        for name in ("commit_interval", "session_timeout", "heartbeat_interval", "rebalance_timeout"):
            if float(getattr(self, name)) <= 0:
                raise ConfigError(name, f"must be > 0 seconds, got {getattr(self, name)!r}", f"set {name} to a positive number of seconds")
        if not (math.isfinite(float(self.restore_timeout)) and float(self.restore_timeout) > 0):
            raise ConfigError("restore_timeout", f"must be a finite number of seconds > 0, got {self.restore_timeout!r}",
                              "set restore_timeout to how long a table restore may go without progress, e.g. 300")
        if self.producer_linger < 0:
            raise ConfigError("producer_linger", f"must be >= 0 seconds, got {self.producer_linger!r}",
                              "use 0 to send each batch as soon as the sender is free")
        if not 0 <= self.consumer_fetch_max_wait <= 30:
            raise ConfigError("consumer_fetch_max_wait", f"must be 0..30 seconds, got {self.consumer_fetch_max_wait!r}",
                              "use e.g. 0.5 (the default), or less for lower latency at more fetch requests")
        if self.max_task_idle < 0:
            raise ConfigError("max_task_idle", f"must be >= 0, got {self.max_task_idle}", "use 0 to never wait for lagging inputs")
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
                "processing_guarantee", f"unknown guarantee {self.processing_guarantee!r}", f"use one of {', '.join(GUARANTEES)}"
            )
        if self.table_standby_replicas < 0:
            raise ConfigError("table_standby_replicas", "must be >= 0", "use 0 for no standby replicas")
        if self.table_cache_size < 0:
            raise ConfigError("table_cache_size", "must be >= 0", "use 0 to write every table update through")
        if not (0 <= self.web_port < 65536):
            raise ConfigError("web_port", f"{self.web_port} is not a TCP port", "use a port in 1..65535 (0 picks a free one)")

    def replace(self, **changes: Any) -> "Settings":
        """A copy with ``changes`` applied and validated (for CLI flags)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            name = sorted(unknown)[0]
            raise ConfigError(name, "is not an agentstream setting", f"use one of {', '.join(sorted(known))}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def build(cls, id: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> "Settings":
        """App arguments first, then ``AGENTSTREAM_<NAME>`` environment variables on top."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in options.items():
            if key in fields:
                values[key] = value
            else:
                extra[key] = value
        env = os.environ if environ is None else environ
        for name, f in fields.items():
            raw = env.get(f"AGENTSTREAM_{name.upper()}")
            if raw is not None and name not in ("id", "extra"):
                values[name] = _coerce(name, raw, fields[name].type)
        return cls(id=id, extra=extra, **values)


def _coerce(name: str, raw: str, type_: Any) -> Any:
    """Turn an environment string into the setting's type, with a ConfigError naming the variable."""
    t = str(type_)
    try:
        if t in ("int", "<class 'int'>"):
            return int(raw)
        if t in ("float", "<class 'float'>"):
            return float(raw)
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
            name, f"environment variable AGENTSTREAM_{name.upper()}={raw!r} is not a valid {t}", f"set it to a {t}"
        ) from None
    return raw
