"""``faust.contrib.asgi`` (and its alias ``faust.contrib.fastapi``): an agentstream app beside an
ASGI application (FastAPI, Starlette, Quart, Django...), on the ASGI server's event loop.

The ASGI server drives: its lifespan starts the app's worker and stops it::

    api = FastAPI(lifespan=faust_lifespan(app))

``faust_app_running(app)`` is the same as an async context manager (to compose with a lifespan of
your own), and :class:`FaustLifespanMiddleware` wraps an ASGI app that has no lifespan hook. The
worker is the one ``agentstream worker`` runs (consumer group, agents, tables, timers, and the
aiohttp web server when ``web_enabled``), without signal handlers: the ASGI server owns the
process's signals. Request handlers then read tables, send to topics and ask agents on the same
loop. Nothing here imports FastAPI or Starlette: any ASGI callable works.

The worker can also serve an ASGI application itself, in place of its aiohttp web server
(``serve_asgi(app, api)``: uvicorn on ``web_bind``/``web_port``, started and stopped with the
worker; :class:`AsgiService` is the service it registers with ``app.web_server``). Then
``@app.page`` views and the table endpoints are not served, and other workers' table lookups
routed to this one find no table endpoint, as in Faust.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from agentstream.autodiscover import autodiscover_modules
from agentstream.exceptions import ImproperlyConfigured
from agentstream.otel.tracing import sdk_is_configured
from agentstream.service import Service
from agentstream.web.runner import run_worker

__all__ = [
    "LoopMismatch",
    "AsgiService",
    "FaustLifespanMiddleware",
    "bind_to_running_loop",
    "faust_app_running",
    "faust_lifespan",
    "instrument_asgi_app",
    "serve_asgi",
]

log = logging.getLogger(__name__)

# the loop each app was started on by faust_app_running, while it runs (what bind_to_running_loop checks)
_running_on: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()


class LoopMismatch(ImproperlyConfigured):
    """The app runs on another event loop than the one now running: its producer, consumer and
    tables belong to that loop and cannot be awaited from this one."""

    def __init__(self, app_id: str) -> None:
        super().__init__(
            "loop",
            f"app {app_id!r} is running on another event loop than the one now running",
            "start it from the ASGI server's lifespan (faust_lifespan) and use it from that server's requests "
            "only; stop it before starting it on another loop",
        )


def bind_to_running_loop(app: Any) -> asyncio.AbstractEventLoop:
    """The running loop, checked to be the one ``app`` runs on (if it runs).

    Raises :class:`RuntimeError` outside a running loop, :class:`LoopMismatch` while the app was
    started by :func:`faust_app_running` on another loop that is still open. agentstream's app holds
    no loop of its own (its worker and clients are made at start, on the loop that starts them), so
    an app stopped on one loop starts again on another.
    """
    running = asyncio.get_running_loop()
    current = _running_on.get(app)
    if current is not None and current is not running and not current.is_closed():
        raise LoopMismatch(app.conf.id)
    return running


@asynccontextmanager
async def faust_app_running(
    app: Any, *, finalize: bool = True, discover: bool | None = None, stop_timeout: float | None = None
) -> AsyncIterator[Any]:
    """Run ``app``'s worker on the running loop for the body of the ``async with``; yields the app.

    ``finalize``: call ``app.finalize()`` first. ``discover``: import the modules the app's
    ``autodiscover`` setting lists now (None: when it is set); ``discover=False`` with
    ``autodiscover`` set is refused, since the worker imports them when it starts (its topology is
    built from them). ``stop_timeout``: seconds the stop may take (None: the worker's own bound,
    ``shutdown_timeout``); :class:`TimeoutError` past it. An app a worker already runs in this
    process is used as it is, and left running.
    """
    loop = bind_to_running_loop(app)
    if finalize:
        app.finalize()
    autodiscover = app.settings.extra.get("autodiscover")
    if discover is False and autodiscover:
        raise ImproperlyConfigured(
            "autodiscover",
            f"faust_app_running(discover=False) with autodiscover={autodiscover!r}: agentstream's worker "
            "imports those modules when it starts (its topology is built from them)",
            "leave discover= out, or drop the autodiscover setting",
        )
    if discover:
        autodiscover_modules(app)
    if app.worker is not None:  # started by someone else (the CLI, another lifespan): theirs to stop
        yield app
        return
    worker = app.Worker(install_signal_handlers=False)  # the ASGI server owns SIGINT/SIGTERM
    running = asyncio.ensure_future(run_worker(worker))
    started = asyncio.ensure_future(worker.started.wait())
    try:
        await asyncio.wait({running, started}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # cancelled while starting: stop what started
        worker.request_stop()
        await asyncio.gather(running, return_exceptions=True)
        raise
    finally:
        started.cancel()
    if not worker.started.is_set():
        code = running.result()  # a failed start raises its error here
        raise RuntimeError(f"app {app.conf.id!r}: the worker stopped before it started (exit code {code})")
    _running_on[app] = loop
    try:
        yield app
    finally:
        _running_on.pop(app, None)
        worker.request_stop()
        if stop_timeout is None:
            await running
        else:
            await asyncio.wait_for(running, timeout=stop_timeout)


def faust_lifespan(
    app: Any, *, opentelemetry: bool | None = None, **kwargs: Any
) -> Callable[..., AbstractAsyncContextManager[None]]:
    """An ASGI ``lifespan`` that runs ``app`` (``FastAPI(lifespan=faust_lifespan(app))``); keyword
    arguments as :func:`faust_app_running`. The ASGI app the framework passes in is instrumented
    with OpenTelemetry as :func:`instrument_asgi_app` says (``opentelemetry=False``: never)."""

    @asynccontextmanager
    async def lifespan(*args: Any, **_: Any) -> AsyncIterator[None]:
        if args and opentelemetry is not False:
            instrument_asgi_app(args[0], force=bool(opentelemetry))
        async with faust_app_running(app, **kwargs):
            yield None  # not the app: Starlette would merge a mapping into the request state

    return lifespan


def instrument_asgi_app(asgi_app: Any, *, tracer_provider: Any = None, force: bool = False) -> bool:
    """Trace ``asgi_app``'s requests with opentelemetry-instrumentation-fastapi; True when done.

    Only when an OpenTelemetry SDK is configured (``force=True``: even before) and the app is not
    instrumented yet; without the instrumentation package a WARNING names it (with ``force``) or
    nothing happens (auto-detection)."""
    if asgi_app is None or getattr(asgi_app, "_is_instrumented_by_opentelemetry", False):
        return False
    if not force and not sdk_is_configured():
        return False
    try:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    except ImportError:
        if force:
            log.warning(
                "opentelemetry=True: the ASGI app is not traced; pip install opentelemetry-instrumentation-fastapi"
            )
        return False
    FastAPIInstrumentor.instrument_app(asgi_app, tracer_provider=tracer_provider)
    return True


class FaustLifespanMiddleware:
    """Runs the app with an ASGI application that has no lifespan hook (Django's, for one):
    ``application = FaustLifespanMiddleware(django_app, app, **faust_app_running_options)``.

    HTTP and websocket scopes go to the wrapped application unchanged; the lifespan scope is this
    middleware's own (the wrapped application never sees it): startup completes once the worker
    has started, shutdown once it has stopped; a failure is reported as ``lifespan.<phase>.failed``.
    """

    def __init__(self, asgi_app: Any, faust_app: Any, **kwargs: Any) -> None:
        self.asgi_app = asgi_app
        self.faust_app = faust_app
        self.faust_options = kwargs

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "lifespan":
            await self.asgi_app(scope, receive, send)
            return
        phase = "startup"
        try:
            self._expect(await receive(), "lifespan.startup")
            async with faust_app_running(self.faust_app, **self.faust_options):
                await send({"type": "lifespan.startup.complete"})
                phase = "shutdown"
                self._expect(await receive(), "lifespan.shutdown")
        except Exception as exc:
            log.exception("lifespan %s of %s failed", phase, self.faust_app.conf.id)
            await send({"type": f"lifespan.{phase}.failed", "message": str(exc)})
        else:
            await send({"type": "lifespan.shutdown.complete"})

    @staticmethod
    def _expect(message: Any, expected: str) -> None:
        got = message.get("type") if isinstance(message, Mapping) else None
        if got != expected:
            raise RuntimeError(f"expected the ASGI message {expected!r}, received {got!r}")


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


@contextlib.contextmanager
def _no_signal_handlers() -> Iterator[None]:
    """In place of uvicorn's ``capture_signals``: the worker (or the CLI) owns SIGINT/SIGTERM."""
    yield


class AsgiService(Service):
    """Serves an ASGI application with uvicorn on the worker's loop (what :func:`serve_asgi`
    registers). ``host``/``port``: given, else the class's, else the app's ``web_bind`` and
    ``web_port``. ``uvicorn_options`` go to ``uvicorn.Config`` (``loop``, ``lifespan`` and
    ``log_config`` default to running inside this loop, with the ASGI app's lifespan, under the
    worker's logging). A port that cannot be bound fails the worker's start."""

    asgi_app: Any = None
    faust_app: Any = None
    host: str | None = None
    port: int | None = None
    uvicorn_options: Mapping[str, Any] = {}
    server_shutdown_timeout: float = 10.0  # seconds the server gets to finish its requests at stop
    opentelemetry: bool | None = None  # instrument_asgi_app's: None auto-detects, False never
    driver_version = "ASGI"

    def __init__(
        self,
        asgi_app: Any = None,
        *,
        host: str | None = None,
        port: int | None = None,
        uvicorn_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if asgi_app is not None:
            self.asgi_app = asgi_app
        settings = self.faust_app.settings if self.faust_app is not None else None
        self.host = _first(host, self.host, settings.web_bind_address() if settings else None, "0.0.0.0")
        self.port = _first(port, self.port, settings.web_port if settings else None, 8000)
        if uvicorn_options is not None:
            self.uvicorn_options = uvicorn_options
        self._server: Any = None
        self._serving: asyncio.Future[None] | None = None

    def get_web_url(self) -> str:
        """Where other workers and clients reach it (the address the group is told): the app's
        advertised web host (``web_host``, else the bind address) with this server's port."""
        host = self.faust_app.settings.web_advertised_host() if self.faust_app is not None else self.host
        return f"http://{host}:{self.port}"

    async def on_start(self) -> None:
        if self.asgi_app is None:
            raise ImproperlyConfigured("web_server", "AsgiService has no ASGI application", "serve_asgi(app, asgi_app)")
        try:
            import uvicorn
        except ImportError:
            raise ImproperlyConfigured(
                "web_server", "serve_asgi needs uvicorn", "pip install 'agentstream[asgi]'"
            ) from None
        if self.opentelemetry is not False:
            instrument_asgi_app(self.asgi_app, force=bool(self.opentelemetry))
        options = {"loop": "none", "lifespan": "on", "log_config": None, **self.uvicorn_options}
        host, port = self.host, self.port
        assert host is not None and port is not None  # set in __init__ (given, the app's, or a default)
        # Any: uvicorn's signal handling is replaced below (the worker owns SIGINT/SIGTERM)
        server: Any = uvicorn.Server(uvicorn.Config(self.asgi_app, host=host, port=port, **options))
        if hasattr(server, "capture_signals"):
            server.capture_signals = _no_signal_handlers
        if hasattr(server, "install_signal_handlers"):  # uvicorn < 0.27
            server.install_signal_handlers = lambda *a, **k: None
        self._server = server
        self._serving = asyncio.ensure_future(self._serve(server))
        while not server.started:  # bound and its lifespan started, or failed
            if self._serving.done():
                self._serving.result()
                raise ImproperlyConfigured("web_port", "the ASGI server stopped while starting", "see the log above")
            await asyncio.sleep(0.01)

    async def _serve(self, server: Any) -> None:
        try:
            await server.serve()
        except SystemExit as exc:  # uvicorn exits the process when it cannot bind or start: fail the start instead
            raise ImproperlyConfigured(
                "web_port",
                f"the ASGI server could not start on {self.host}:{self.port} (uvicorn exit code {exc.code})",
                "free the port or choose another web_port",
            ) from None

    async def on_stop(self) -> None:
        server, serving = self._server, self._serving
        self._server = self._serving = None
        if server is None or serving is None:
            return
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(serving), self.server_shutdown_timeout)
        except TimeoutError:
            log.warning("the ASGI server did not stop within %ss", self.server_shutdown_timeout)
            server.force_exit = True
            await asyncio.gather(serving, return_exceptions=True)

    @property
    def label(self) -> str:
        return f"{type(self).__name__}: http://{self.host}:{self.port}"


def serve_asgi(
    app: Any, asgi_app: Any, *, host: str | None = None, port: int | None = None, **uvicorn_options: Any
) -> type[AsgiService]:
    """Serve ``asgi_app`` from the app's workers in place of agentstream's aiohttp web server
    (registered with ``app.web_server``; ``web_enabled=False`` serves nothing); returns the
    :class:`AsgiService` subclass registered."""
    cls: type[AsgiService] = type(
        "FaustAsgiService",
        (AsgiService,),
        {
            "asgi_app": staticmethod(asgi_app),  # a plain ``async def`` app must not become a method
            "faust_app": app,
            "host": host,
            "port": port,
            "uvicorn_options": uvicorn_options,
        },
    )
    app.web_server(cls)
    return cls
