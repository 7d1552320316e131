"""``faust.contrib.sentry``: errors the worker logs reach Sentry, through :pypi:`sentry-sdk`
(``pip install 'agentstream[sentry]'``).

``setup(app, dsn=...)`` does what Faust's does: it starts the Sentry SDK with its aiohttp
integration (agentstream's web server is aiohttp: a view's exception is reported with its
request) and adds a logging handler to the app's ``loghandlers``, which the worker puts on the
root logger when it starts, so each record at ``loglevel`` (default WARNING) and above becomes a
Sentry event. ``handler_from_dsn`` starts the SDK and returns that handler alone (None without a
DSN). As in Faust, an ``asyncio.CancelledError`` marked ``is_expected`` is not reported.

Faust built the handler on :pypi:`raven`, Sentry's retired client; here it is sentry-sdk's
``EventHandler``, so the client keyword arguments are sentry-sdk's (``environment=``,
``release=``, ``transport=``...: ``sentry_sdk.init`` refuses others). ``include_paths`` becomes
``in_app_include`` and ``qsize``/``max_queue_size`` the SDK's ``transport_queue_size``; sentry-sdk
sends from one background worker, so ``workers`` other than Faust's default is refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from agentstream.exceptions import ImproperlyConfigured

__all__ = ["handler_from_dsn", "setup"]

DEFAULT_LEVEL = logging.WARNING
_WORKERS = {"handler_from_dsn": 5, "setup": 4}  # Faust's defaults: raven's sender tasks


def _sentry_sdk() -> Any:
    try:
        import sentry_sdk
    except ImportError:
        raise ImproperlyConfigured(
            "sentry", "faust.contrib.sentry needs sentry-sdk", "pip install 'agentstream[sentry]'"
        ) from None
    return sentry_sdk


def _is_expected_cancel(record: logging.LogRecord) -> bool:
    """A record of a CancelledError whose ``is_expected`` is not False (Faust's rule: silenced once
    investigated)."""
    exc_info = record.exc_info
    if not exc_info or exc_info[0] is None:
        return False
    return issubclass(exc_info[0], asyncio.CancelledError) and getattr(exc_info[1], "is_expected", True)


def _handler(level: int) -> logging.Handler:
    from sentry_sdk.integrations.logging import EventHandler

    class SentryEventHandler(EventHandler):  # type: ignore[misc]  # sentry-sdk is untyped here (optional)
        """sentry-sdk's event handler, without expected cancellations."""

        def emit(self, record: logging.LogRecord) -> Any:
            if _is_expected_cancel(record):
                return None
            return super().emit(record)

    return SentryEventHandler(level=level)


def _start_sdk(
    dsn: str, *, workers: int, default_workers: int, include_paths: Iterable[str] | None, qsize: int, **kwargs: Any
) -> None:
    sentry_sdk = _sentry_sdk()
    if workers != default_workers:
        raise ImproperlyConfigured(
            "workers",
            f"workers={workers!r}: sentry-sdk sends events from one background worker (Faust's raven "
            "transport ran several)",
            "leave workers= out; max_queue_size= (qsize=) bounds how many events wait to be sent",
        )
    from sentry_sdk.integrations.aiohttp import AioHttpIntegration
    from sentry_sdk.integrations.logging import LoggingIntegration

    integrations = [
        # events come from the returned handler only (at its level), not also from the SDK's own
        LoggingIntegration(event_level=None),
        AioHttpIntegration(),
        *kwargs.pop("integrations", ()),
    ]
    sentry_sdk.init(
        dsn=dsn,
        in_app_include=list(include_paths or ()),
        transport_queue_size=qsize,
        integrations=integrations,
        **kwargs,
    )


def handler_from_dsn(
    dsn: str | None = None,
    workers: int = 5,
    include_paths: Iterable[str] | None = None,
    loglevel: int | None = None,
    qsize: int = 1000,
    **kwargs: Any,
) -> logging.Handler | None:
    """Start sentry-sdk for ``dsn`` and return a logging handler that sends each record at
    ``loglevel`` (default WARNING) and above as an event; None (and nothing started) without a DSN.
    ``kwargs`` go to ``sentry_sdk.init``."""
    _sentry_sdk()  # without sentry-sdk: say which extra to install, DSN or not (as Faust does)
    if not dsn:
        return None
    _start_sdk(
        dsn, workers=workers, default_workers=_WORKERS["handler_from_dsn"], include_paths=include_paths, qsize=qsize,
        **kwargs,
    )  # fmt: skip
    return _handler(loglevel if loglevel is not None else DEFAULT_LEVEL)


def setup(
    app: Any,
    *,
    dsn: str | None = None,
    workers: int = 4,
    max_queue_size: int = 1000,
    loglevel: int | None = None,
    **kwargs: Any,
) -> None:
    """Report ``app``'s logged errors to Sentry: :func:`handler_from_dsn`'s handler is added to the
    app's ``loghandlers`` (the worker installs them at start). Nothing happens without a DSN."""
    _sentry_sdk()
    if not dsn:
        return
    _start_sdk(
        dsn, workers=workers, default_workers=_WORKERS["setup"], include_paths=kwargs.pop("include_paths", None),
        qsize=max_queue_size, **kwargs,
    )  # fmt: skip
    handler = _handler(loglevel if loglevel is not None else DEFAULT_LEVEL)
    app.conf.loghandlers = [*(app.conf.loghandlers or ()), handler]
