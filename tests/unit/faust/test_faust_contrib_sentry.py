"""``faust.contrib.sentry``: ``setup(app, dsn=...)`` / ``handler_from_dsn``, on sentry-sdk: an error
the worker logs becomes a Sentry event (caught here by a stand-in transport, never the network)."""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import agentstream.faust as faust
from agentstream.exceptions import ConfigError
from agentstream.faust.contrib import sentry

DSN = "https://key@sentry.invalid/1"


class Captured:
    """What sentry-sdk hands to its transport: ``transport`` is the stand-in class to give it."""

    def __init__(self) -> None:
        from sentry_sdk.transport import Transport

        self.events: list[dict[str, Any]] = []
        events = self.events

        class Recording(Transport):  # type: ignore[misc]
            def capture_envelope(self, envelope: Any) -> None:
                events.extend(item.payload.json for item in envelope.items if item.type == "event")

        self.transport = Recording


@pytest.fixture
def captured() -> Iterator[Captured]:
    sentry_sdk = pytest.importorskip("sentry_sdk", reason="the sentry extra: pip install 'agentstream[sentry]'")
    yield Captured()
    sentry_sdk.get_global_scope().set_client(None)  # the SDK is process-wide: off for the next test


def _log_through(handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"sentry-test-{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def _flush() -> None:
    import sentry_sdk

    sentry_sdk.flush()


def test_setup_adds_a_handler_whose_errors_reach_sentry(captured: Captured) -> None:
    app = faust.App("sentry-app")
    sentry.setup(app, dsn=DSN, transport=captured.transport)
    (handler,) = app.conf.loghandlers  # the worker puts the app's loghandlers on the root logger
    assert handler.level == logging.WARNING  # Faust's default level
    logger = _log_through(handler)
    logger.info("not an event")
    try:
        raise ZeroDivisionError("boom")
    except ZeroDivisionError:
        logger.exception("agent failed")
    _flush()
    events = captured.events
    assert len(events) == 1
    assert events[0]["logentry"]["message"] == "agent failed"
    assert events[0]["exception"]["values"][-1]["type"] == "ZeroDivisionError"


def test_an_expected_cancellation_is_not_reported(captured: Captured) -> None:
    handler = sentry.handler_from_dsn(DSN, loglevel=logging.ERROR, transport=captured.transport)
    assert handler is not None and handler.level == logging.ERROR
    logger = _log_through(handler)
    for expected in (True, False):
        exc = asyncio.CancelledError()
        exc.is_expected = expected  # type: ignore[attr-defined]
        try:
            raise exc
        except asyncio.CancelledError:
            logger.exception("cancelled, expected=%s", expected)
    logger.warning("below the handler's level")
    _flush()
    assert [e["logentry"]["formatted"] for e in captured.events] == ["cancelled, expected=False"]


def test_no_dsn_starts_nothing(captured: Captured) -> None:
    app = faust.App("sentry-nodsn")
    assert sentry.handler_from_dsn(None) is None
    sentry.setup(app)
    assert app.conf.loghandlers is None


def test_options_sentry_sdk_cannot_honour_are_refused(captured: Captured) -> None:
    with pytest.raises(ConfigError, match="one background worker") as err:
        sentry.setup(faust.App("sentry-workers"), dsn=DSN, workers=8)
    assert err.value.setting == "workers"
    with pytest.raises(TypeError):  # a raven option sentry_sdk.init does not know
        sentry.handler_from_dsn(DSN, auto_log_stacks=True)


def test_without_sentry_sdk_it_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentry_sdk", None)
    with pytest.raises(ConfigError, match=r"agentstream\[sentry\]"):
        sentry.setup(faust.App("sentry-missing"), dsn=DSN)
