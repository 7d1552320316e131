"""The worker's logging: agentstream's handler (text or JSON lines), or the app's own
``logging_config`` (Faust's setting: a ``logging.config.dictConfig`` dictionary), plus
``loghandlers``.

agentstream's own configuration is itself a dictConfig dictionary, so ``logging_config`` with
``"merge": True`` is merged into it section by section as Faust (mode) does; without ``merge`` the
app's dictionary replaces it.
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .exceptions import ConfigError

__all__ = [
    "LOG_FORMAT",
    "RebalanceNoise",
    "JsonFormatter",
    "default_config",
    "setup_logging",
    "redirect_stdouts",
    "redirect_level",
]

LOG_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"
_SECTIONS = ("formatters", "filters", "handlers", "loggers", "root")

REBALANCE_NOISE = re.compile(
    r"because it is rebalancing|generation id is not\s+current|member_id was not recognized"
    r"|OffsetCommit failed .*(rebalanc|generation)|Marking the coordinator dead"
)


class RebalanceNoise(logging.Filter):
    """aiokafka logs every normal rebalance as a WARNING ("Heartbeat failed ... rebalancing"): the
    worker logs the rebalance itself, so those lines are demoted to DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.name.startswith("aiokafka")
            and record.levelno <= logging.WARNING
            and REBALANCE_NOISE.search(record.getMessage())
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


# LogRecord attributes that are not a caller's ``extra=`` fields
_RECORD_FIELDS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, process, message, the
    exception's traceback when there is one, and the fields a caller passed with ``extra=``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc_info"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        if record.stack_info:
            entry["stack_info"] = record.stack_info
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and key not in entry:
                entry[key] = value
        return json.dumps(entry, default=repr, ensure_ascii=False)


def _level(level: str | int) -> int:
    number = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(number, int):
        raise ConfigError("loglevel", f"unknown level {level!r}", "use debug, info, warning or error")
    return number


def default_config(level: str | int, logfile: str | None = None, log_format: str = "text") -> dict[str, Any]:
    """agentstream's logging as a dictConfig dictionary: one handler (stderr or ``logfile``)."""
    formatter: dict[str, Any] = {"()": JsonFormatter} if log_format == "json" else {"format": LOG_FORMAT}
    handler: dict[str, Any] = {"formatter": "default", "filters": ["rebalance_noise"]}
    if logfile:
        handler.update({"class": "logging.FileHandler", "filename": logfile})
    else:
        handler.update({"class": "logging.StreamHandler", "stream": sys.stderr})
    number = _level(level)
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "filters": {"rebalance_noise": {"()": RebalanceNoise}},
        "handlers": {"default": handler},
        "root": {"level": number, "handlers": ["default"]},
        "loggers": {"aiokafka": {"level": max(number, logging.WARNING)}},
    }


def _merged(base: dict[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Faust's ``"merge": True``: the app's sections on top of agentstream's, key by key."""
    out = {**base, **config}
    for section in _SECTIONS:
        out[section] = {**base.get(section, {}), **config.get(section, {})}
    return out


def setup_logging(
    level: str | int,
    logfile: str | None = None,
    *,
    log_format: str = "text",
    logging_config: Mapping[str, Any] | None = None,
    loghandlers: Sequence[logging.Handler] | None = None,
) -> None:
    """Configure the root logger for a worker or a command (replacing earlier handlers).

    Without ``logging_config`` the handler is installed directly (dictConfig would also close every
    handler the process ever made, an embedding program's included)."""
    if logging_config:
        wanted = dict(logging_config)
        base = default_config(level, logfile, log_format)
        config = _merged(base, wanted) if wanted.pop("merge", False) else wanted
        logging.getLogger().handlers.clear()
        try:
            logging.config.dictConfig(config)
        except (ValueError, TypeError, AttributeError, ImportError) as exc:
            raise ConfigError(
                "logging_config",
                f"logging.config.dictConfig refused it: {exc}",
                "fix the dictionary (see the logging.config dictionary schema in the Python docs)",
            ) from exc
    else:
        number = _level(level)
        handler: logging.Handler = logging.FileHandler(logfile) if logfile else logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(LOG_FORMAT))
        handler.addFilter(RebalanceNoise())
        root = logging.getLogger()
        root.handlers[:] = [handler]
        root.setLevel(number)
        logging.getLogger("aiokafka").setLevel(max(number, logging.WARNING))
    if loghandlers:
        logging.getLogger().handlers.extend(loghandlers)


class _LogLines:
    """A text stream whose lines become log records (Faust's ``worker_redirect_stdouts``)."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, logger: logging.Logger, level: int, fallback: Any) -> None:
        self._logger = logger
        self._level = level
        self._fallback = fallback  # what a handler writing to sys.stderr itself reaches (no loop)
        self._partial = ""
        self._busy = False

    def write(self, text: str) -> int:
        if self._busy:  # a handler that writes to the current sys.stderr (logging's last resort)
            return int(self._fallback.write(text))
        lines = (self._partial + str(text)).split("\n")
        self._partial = lines.pop()
        self._busy = True
        try:
            for line in lines:
                if line.strip():
                    self._logger.log(self._level, "%s", line.rstrip())
        finally:
            self._busy = False
        return len(text)

    def writelines(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        partial, self._partial = self._partial, ""
        if partial.strip():
            self.write(partial + "\n")

    def isatty(self) -> bool:
        return False


def redirect_level(value: Any) -> int:
    """Faust's ``worker_redirect_stdouts_level`` (a level name such as ``WARN``, or a number)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    level = logging.getLevelName(str(value).upper())
    if not isinstance(level, int):
        raise ConfigError(
            "worker_redirect_stdouts_level",
            f"{value!r} is not a logging level",
            "use DEBUG, INFO, WARN (Faust's default), ERROR or CRITICAL",
        )
    return level


def redirect_stdouts(level: Any = "WARN") -> Any:
    """Send ``print()`` (sys.stdout and sys.stderr) to the log at ``level`` (logger
    ``agentstream.stdout``), as Faust's worker does; returns the function that puts them back."""
    saved = sys.stdout, sys.stderr
    proxy = _LogLines(logging.getLogger("agentstream.stdout"), redirect_level(level), saved[1])
    sys.stdout = sys.stderr = proxy  # type: ignore[assignment]

    def restore() -> None:
        proxy.flush()
        if sys.stdout is proxy:
            sys.stdout = saved[0]
        if sys.stderr is proxy:
            sys.stderr = saved[1]

    return restore
