"""Worker logging settings: ``--log-format json`` (one JSON object per line), Faust's
``logging_config`` (a dictConfig dictionary, replacing or with ``merge`` joining agentstream's)
and ``loghandlers``, applied when ``agentstream worker`` starts."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentstream import App
from agentstream.cli import main
from agentstream.exceptions import ConfigError
from agentstream.logging_setup import setup_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = root.handlers[:], root.level, logging.getLogger("aiokafka").level
    yield
    root.handlers[:], root.level = saved[0], saved[1]
    logging.getLogger("aiokafka").setLevel(saved[2])
    logging.getLogger("agentstream.test").setLevel(logging.NOTSET)  # a logging_config may have set it


@pytest.fixture(autouse=True)
def _process_gc_restored() -> Iterator[None]:
    """``agentstream worker`` tunes the process's collector (bulk_gc.worker_gc): undone for the
    tests that follow in this process."""
    import gc

    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def run_worker(app: App, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    """``agentstream worker`` with a stand-in Worker that logs two lines and returns."""

    class LoggingWorker:
        def __init__(self, app: App, **kwargs: Any) -> None:
            pass

        async def run(self) -> int:
            log = logging.getLogger("agentstream.test")
            log.info("worker says %s", "hello", extra={"partition": 3})
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("it failed")
            return 0

    monkeypatch.setattr("agentstream.worker.worker.Worker", LoggingWorker)
    monkeypatch.setattr("agentstream.web.runner.serve", lambda worker: None)
    monkeypatch.setattr("gc.freeze", lambda: None)
    assert main(["worker", *args], app=app) == 0


def test_log_format_json_writes_one_object_per_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logfile = tmp_path / "worker.log"
    run_worker(App("json-logs", broker="memory://"), monkeypatch, "--log-format", "json", "-f", str(logfile))
    lines = [json.loads(line) for line in logfile.read_text().splitlines() if line.strip()]
    mine = [entry for entry in lines if entry["logger"] == "agentstream.test"]
    assert [(e["level"], e["message"]) for e in mine] == [("INFO", "worker says hello"), ("ERROR", "it failed")]
    assert mine[0]["partition"] == 3 and "time" in mine[0] and mine[0]["process"] > 0
    assert "ValueError: boom" in mine[1]["exc_info"]
    assert len(lines) == len(logfile.read_text().splitlines())  # every line is one JSON object


def test_the_text_format_stays_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    logfile = tmp_path / "worker.log"
    run_worker(App("text-logs", broker="memory://"), monkeypatch, "-f", str(logfile))
    assert "[INFO] agentstream.test: worker says hello" in logfile.read_text()


def test_logging_config_replaces_agentstreams_logging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = tmp_path / "own.log"
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"mine": {"format": "MINE %(levelname)s %(name)s %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(own), "formatter": "mine"}},
        "root": {"level": "INFO", "handlers": ["file"]},
    }
    default = tmp_path / "default.log"
    run_worker(App("dict-logs", broker="memory://", logging_config=config), monkeypatch, "-f", str(default))
    assert "MINE INFO agentstream.test worker says hello" in own.read_text()
    assert "worker says hello" not in (default.read_text() if default.exists() else "")


def test_logging_config_with_merge_keeps_agentstreams_handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Faust's ``"merge": True``: the app's loggers and handlers join agentstream's (-f keeps working)."""
    config = {"merge": True, "loggers": {"agentstream.test": {"level": "ERROR"}}}
    default = tmp_path / "default.log"
    run_worker(App("merged-logs", broker="memory://", logging_config=config), monkeypatch, "-f", str(default))
    text = default.read_text()
    assert "it failed" in text and "worker says hello" not in text  # the app's level for its logger


def test_loghandlers_are_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    run_worker(App("handlers", broker="memory://", loghandlers=[Collect()]), monkeypatch, "-f", str(tmp_path / "l"))
    assert "worker says hello" in seen and "it failed" in seen


def test_a_broken_logging_config_names_the_setting() -> None:
    with pytest.raises(ConfigError) as info:
        setup_logging("INFO", logging_config={"version": 1, "handlers": {"h": {"class": "no.such.Handler"}}})
    assert info.value.setting == "logging_config"
