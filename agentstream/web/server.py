"""The worker's web server (aiohttp): interactive table queries, metadata, status, metrics and the
app's own pages.

It runs beside a worker (:func:`agentstream.web.runner.serve` attaches it; the worker starts it
after the producer and before joining the group, port 0 picking a free port), because the address
it advertises in the group's user data is how other workers route table queries here. It reads
the worker's published status snapshot and the tables' public face only. Every
request runs behind a guard: bad input gets a 4xx JSON error, a handler bug a logged 500; the
server never takes the worker down.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import logging
import math
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiohttp import web

from ..credentials import reveal
from ..exceptions import ConfigError
from ..settings import allowed_hosts
from ..worker.assignor import Assignment
from .cors import CorsPolicy
from .faust_pages import FaustPages, graph_enabled, metrics_enabled
from .forward import Forwarder
from .forward_auth import FORWARD_AUTH_HEADER, verify
from .limits import GuardedSite, GuardedUnixSite, Limits, install_log_filter
from .responses import error_response, json_response
from .stats import Stats
from .status_page import render_status_page
from .tables import FaustTableViews, TableViews
from .views import View, as_response, view_class

if TYPE_CHECKING:
    from ..app import App
    from ..worker.worker import Worker

log = logging.getLogger("agentstream.web")

__all__ = ["Web", "MAX_PATH_BYTES", "RESERVED_PATHS", "BUILTIN_PREFIX"]

MAX_PATH_BYTES = 4096
DEFAULT_PORT = 6066  # Settings.web_port's default: taken by another local worker, fall back to a free port
# The probes: Faust serves no page there, so an app page may not take them. An app page at any other
# built-in path (/, /status, /tables/..., /metadata, /metrics) takes it (Faust apps serve their own
# "/" and "/status"); every built-in is also served under BUILTIN_PREFIX, where no page can take it.
RESERVED_PATHS = ("/livez", "/readyz")
BUILTIN_PREFIX = "/agentstream"
OPEN_PATHS = frozenset({"/livez", BUILTIN_PREFIX + "/livez"})  # no web token (liveness probes carry none)
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Cache-Control": "no-store"}
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    """``localhost`` (or a name under it, RFC 6761) or a loopback IP address."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The name in a Host header, without its port, lower-case (``[::1]:6066`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _wants_html(request: web.Request) -> bool:
    fmt = request.query.get("format")
    if fmt:
        return fmt == "html"
    accept = request.headers.get("Accept", "")
    return "text/html" in accept


class Web:
    """One worker's HTTP server: ``await web.start()`` binds it; :attr:`address` is what others use."""

    def __init__(
        self, app: App, worker: Worker, *, host: str = "127.0.0.1", port: int = 0, redirect: bool | None = None
    ) -> None:
        self.app = app
        self.worker = worker
        self.host = host
        # Faust's web_transport='unix://<path>': the socket the server listens on instead of host:port
        transport = str(app.settings.web_transport)
        self.unix_path: str | None = transport[len("unix://") :] if transport.startswith("unix://") else None
        self.port = port
        extra = app.settings.extra
        self.redirect = bool(extra.get("web_redirect", False) if redirect is None else redirect)
        self.forward_timeout = float(extra.get("web_forward_timeout", 5.0))
        s = app.settings
        self.forward_credentials = bool(s.web_forward_credentials)
        # Faust's model: listen on ``host`` (web_bind), be reached at web_host / canonical_url
        self.advertised_host = str(extra.get("web_advertised_host") or self._advertised(s.web_host or host))
        self.ssl_context = s.web_ssl_context
        self.cors = CorsPolicy(s.web_cors_options) if s.web_cors_options else None
        # Faust's per-page cors_options override the app's, origin by origin (aiohttp-cors' ChainMap)
        self._page_cors = {
            path: CorsPolicy({**(s.web_cors_options or {}), **opts})
            for path, opts in getattr(app, "page_cors", {}).items()
        }
        self.scheme = "https" if self.ssl_context is not None else "http"
        self._canonical: tuple[str, int] | None = None
        if s.canonical_url:
            parts = urlsplit(s.canonical_url)
            self.scheme = parts.scheme
            self._canonical = (str(parts.hostname), parts.port or (443 if parts.scheme == "https" else 80))
        self.stats = Stats(app, worker, address=lambda: self.address, history=int(extra.get("web_history", 300)))
        self.forwarder = Forwarder(self)
        self.tables = TableViews(self)
        self.limits = Limits(
            max_connections=s.web_max_connections, header_timeout=s.web_header_timeout, body_timeout=s.web_body_timeout
        )
        self.token: bytes | None = (reveal(s.web_token) or "").encode() or None
        self._allowed_hosts = self._host_policy(allowed_hosts(s.web_allowed_hosts))
        self.misdirected = 0  # requests refused for their Host header
        self.shadowed: dict[str, str] = {}  # built-in path -> the app page that takes it (set by build)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None

    def _host_policy(self, names: list[str]) -> frozenset[str] | None:
        """The Host names answered (None: any). Without a list, only a loopback bind without a token
        checks them: a web page on another site whose name an attacker points at 127.0.0.1 (DNS
        rebinding) would otherwise read every table through the visitor's browser."""
        if "*" in names or (not names and (self.token is not None or not is_loopback(self.host))):
            return None
        own = {host_name(self.advertised_host)}
        if self._canonical is not None:
            own.add(host_name(self._canonical[0]))
        return frozenset({*names, *own})

    def host_allowed(self, request: web.Request) -> bool:
        """Whether the request's Host header names this server (see :meth:`_host_policy`)."""
        allowed = self._allowed_hosts
        header = request.headers.get("Host")
        if allowed is None or header is None:  # HTTP/1.0 without Host: not a browser's request
            return True
        name = host_name(header).rstrip(".")
        return name in allowed or is_loopback(name)

    @staticmethod
    def _advertised(host: str) -> str:
        """A wildcard bind is reachable at this machine's name, not at 0.0.0.0."""
        return socket.gethostname() if host in ("", "0.0.0.0", "::") else host

    @property
    def address(self) -> str:
        """``host:port`` other workers and clients reach this server at: canonical_url's, else
        web_host's (or the bind address's) with the bound port. What the group is told."""
        host, port = self._canonical or (self.advertised_host, self.port)
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    def assignment(self) -> Assignment:
        """The partition owners learned in the last rebalance (where keys are forwarded)."""
        return self.worker.assignment

    # -- lifecycle ----------------------------------------------------------------------------------
    def build(self) -> web.Application:
        """The aiohttp application (also what tests hand to aiohttp's test client)."""
        s = self.app.settings
        # web_application_options (Faust's): the app's keyword arguments for aiohttp's Application;
        # its middlewares run inside agentstream's guard (the token and limits still apply)
        options = dict(s.web_application_options or {})
        handler_args = {
            # Let long request lines reach the guard, so they get our JSON 414 instead of a bare 400.
            "max_line_size": 65536,
            "max_field_size": 16384,
            "keepalive_timeout": s.web_idle_timeout,
            **options.pop("handler_args", {}),
        }
        application = web.Application(
            **{
                "client_max_size": 1024**2,
                **options,
                "middlewares": [self._guard, *options.get("middlewares", ())],
                "handler_args": handler_args,
            }
        )
        r = self._router = application.router
        builtins = self._builtin_routes()
        pages = list(self.app.pages.items())
        shadowed = self.shadowed = self._shadowed(builtins, [path for path, _ in pages])
        # the probes first (Faust has no page there, so they stay reserved), then every built-in under
        # /agentstream/ (where it stays reachable whatever the app's pages take), then the app's pages,
        # then the built-ins at their usual paths that no app page takes: a page wins where it
        # overlaps a built-in, as it does over Faust's own blueprints
        r.add_get("/livez", self.livez)
        r.add_get("/readyz", self.readyz)
        for path, handler in builtins:
            r.add_get(BUILTIN_PREFIX + path, handler)
        r.add_get(BUILTIN_PREFIX, self.index)
        for path, handler in pages:
            cls = view_class(handler, self.app.page_bases.get(path))
            r.add_route("*", path, self._page_handler(cls), name=self.app.page_names.get(path))
        for path, handler in builtins:
            if path not in shadowed:
                r.add_get(path, handler)
        for path, page in shadowed.items():
            log.info(
                "app page %r takes the path of the built-in %s endpoint; the built-in stays at %s%s",
                page,
                path,
                BUILTIN_PREFIX,
                path,
            )
        if s.web_tables_enabled:
            for path, _ in pages:
                if path.startswith("/tables/") and path not in shadowed.values():
                    log.info(
                        "app page %r is served before the built-in table endpoints under /tables/ (which "
                        "stay at %s/tables/...)",
                        path,
                        BUILTIN_PREFIX,
                    )
        # Faust's built-in table views, after the app's pages (which win where they overlap, as
        # an app's own page would replace Faust's blueprint)
        if s.web_tables_enabled:
            faust_tables = FaustTableViews(self.tables)
            r.add_get("/table/", faust_tables.list)
            r.add_get("/table/{name}/", faust_tables.detail)
            r.add_get("/table/{name}/{key}/", faust_tables.key_detail)
        return application

    def _builtin_routes(self) -> list[tuple[str, Handler]]:
        """agentstream's built-in GET endpoints an app page may take (not the probes)."""
        s = self.app.settings
        routes: list[tuple[str, Handler]] = [("/", self.index)]
        if s.web_tables_enabled:
            routes += [
                ("/tables", self.tables.list_tables),
                ("/tables/", self.tables.list_tables),
                ("/tables/{table}", self.tables.list_keys),
                ("/tables/{table}/", self.tables.list_keys),
                ("/tables/{table}/{key:.+}", self.tables.get_value),
            ]
        if s.web_router_enabled:
            routes.append(("/metadata", self.metadata))
        if s.web_stats_enabled:
            routes += [("/status", self.status), ("/status.json", self.status_json), ("/status.html", self.status_html)]
        routes.append(("/metrics", self.metrics))
        # Faust's optional endpoints, when the app's settings ask for them (web/faust_pages.py)
        pages = FaustPages(self.app, lambda: self.worker.topology)
        if metrics_enabled(s):
            self.app.monitor  # noqa: B018  # counting from now: Faust's monitor runs from the start
            routes += [("/performance", pages.performance), ("/performance/", pages.performance)]
        if graph_enabled(s):
            routes += [("/graph", pages.graph), ("/graph/", pages.graph)]
        return routes

    @staticmethod
    def _shadowed(builtins: list[tuple[str, Handler]], pages: list[str]) -> dict[str, str]:
        """``{built-in path: the app page taking it}``: a page at the same path, with or without a
        trailing slash (``/status/`` takes ``/status``). Pages at the probes or under the built-ins'
        own prefix are refused: those paths are what orchestrators and the docs rely on."""
        for page in pages:
            if (
                page.rstrip("/") in RESERVED_PATHS
                or page.rstrip("/") == BUILTIN_PREFIX
                or page.startswith(BUILTIN_PREFIX + "/")
            ):
                raise ConfigError(
                    "page",
                    f"app page {page!r} collides with a built-in endpoint that cannot move",
                    f"pick a path outside {', '.join(RESERVED_PATHS)} and {BUILTIN_PREFIX}/",
                )
        taken = {page.rstrip("/") or "/": page for page in pages}
        return {path: taken[path.rstrip("/") or "/"] for path, _ in builtins if (path.rstrip("/") or "/") in taken}

    async def start(self) -> None:
        """Bind and serve; afterwards :attr:`port` is the real port (also when 0 was asked)."""
        install_log_filter()
        self._runner = web.AppRunner(self.build(), access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        if self.unix_path is not None:
            await self._start_unix(self.unix_path)
            return
        try:
            await GuardedSite(self._runner, self.host, self.port, self.limits, ssl_context=self.ssl_context).start()
        except OSError as exc:
            if self.port == DEFAULT_PORT and exc.errno == errno.EADDRINUSE:
                # Several workers on one machine with default settings: serve on a free port rather
                # than refuse to process; the advertised address is the real one, so routing holds.
                log.warning(
                    "web port %d is in use; serving on a free port instead (pass --web-port to choose)", self.port
                )
                self.port = 0
                await GuardedSite(self._runner, self.host, 0, self.limits, ssl_context=self.ssl_context).start()
            else:
                await self._runner.cleanup()
                self._runner = None
                if isinstance(exc, socket.gaierror) or exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                    s = self.app.settings  # the bind address comes from web_bind, else from web_host
                    name = "web_host" if s.web_host and not s.web_bind else "web_bind"
                    raise ConfigError(
                        name,
                        f"cannot listen on {self.host!r}: {exc.strerror or exc}",
                        "pass a --web-bind that is an address of this machine (e.g. 127.0.0.1, or 0.0.0.0 for "
                        "every interface), and --web-host naming how others reach it",
                    ) from exc
                raise ConfigError(
                    "web_port",
                    f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}",
                    "pass another --web-port (0 picks a free one) or --without-web",
                ) from exc
        self.port = int(self._runner.addresses[0][1])
        if self.token is None and not is_loopback(self.host):
            log.warning(
                "web server listens on %s, beyond this machine, without web_token: anyone who can reach "
                "port %d can read every table and the worker's status. Set web_token (AGENTSTREAM_WEB_TOKEN) "
                "or listen on 127.0.0.1 (web_bind)",
                self.host or "every interface",
                self.port,
            )
        self._sampler = asyncio.ensure_future(self.stats.run())
        log.info(
            "web server for %s listening on %s://%s:%d (advertised as %s)",
            self.app.id,
            "https" if self.ssl_context is not None else "http",
            self.host,
            self.port,
            self.url,
        )

    async def _start_unix(self, path: str) -> None:
        """Faust's ``web_transport='unix://<path>'``: serve on that socket. Other workers reach this
        one at ``canonical_url`` (a proxy in front of the socket); without it, they cannot forward here."""
        assert self._runner is not None
        try:
            await GuardedUnixSite(self._runner, path, self.limits).start()
        except OSError as exc:
            await self._runner.cleanup()
            self._runner = None
            raise ConfigError(
                "web_transport",
                f"cannot listen on the unix socket {path!r}: {exc.strerror or exc}",
                "name a writable path",
            ) from exc
        self._sampler = asyncio.ensure_future(self.stats.run())
        log.info("web server for %s listening on unix socket %s (advertised as %s)", self.app.id, path, self.url)

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
            self._sampler = None
        await self.forwarder.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            log.info("web server on %s stopped", self.address)

    # -- the guard -------------------------------------------------------------------------------------
    def authorized(self, request: web.Request) -> bool:
        """No token configured, ``Authorization: Bearer <token>`` matches (constant time), or the
        request was forwarded by a worker of the app, signed for this server's address."""
        if self.token is None:
            return True
        signed = request.headers.get(FORWARD_AUTH_HEADER)
        if signed is not None and verify(self.token, signed, request.method, self.address, request.raw_path):
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode("utf-8", "surrogateescape"), self.token)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        cors = self._cors_for(request)
        preflight = cors is not None and cors.is_preflight(request)
        if cors is not None and preflight:
            response: web.StreamResponse = cors.preflight(request)  # before the token: preflights carry none
        else:
            response = await self._sensed_answer(request, handler)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if cors is not None and not preflight:
            cors.decorate(request, response)  # last: expose_headers='*' exposes what the answer has
        return response

    def _cors_for(self, request: web.Request) -> CorsPolicy | None:
        """The page's own CORS options when it has some, else the app's (None: no CORS)."""
        if self._page_cors:
            resource = request.match_info.route.resource
            page = self._page_cors.get(resource.canonical) if resource is not None else None
            if page is not None:
                return page
        return self.cors

    async def _sensed_answer(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The answer, between Faust's on_web_request_start/end when sensors are registered (a
        sensor's error is never raised into the response)."""
        sensors = self.app.sensors
        if not sensors:
            return await self._answer(request, handler)
        state = sensors.on_web_request_start(self.app, request, view=None)
        response: web.StreamResponse | None = None
        try:
            response = await self._answer(request, handler)
        finally:
            sensors.on_web_request_end(self.app, request, response, state, view=None)
        return response

    async def _answer(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if len(request.raw_path.encode()) > MAX_PATH_BYTES:
            return error_response(
                414,
                f"request path is longer than {MAX_PATH_BYTES} bytes",
                "shorten the key or path; table keys in URLs are limited to 1 KiB",
            )
        if request.path not in OPEN_PATHS and not self.host_allowed(request):
            self.misdirected += 1
            return error_response(
                421,
                f"this server does not answer for host {request.headers.get('Host', '')[:100]!r}",
                "reach it by localhost, a loopback address or its web_host; list other names in "
                "web_allowed_hosts (a web page elsewhere must not reach a loopback server without a token)",
            )
        if request.path not in OPEN_PATHS and not self.authorized(request):
            return error_response(
                401,
                "missing or wrong bearer token",
                "send the worker's web_token as 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": 'Bearer realm="agentstream"'},
            )
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise  # redirects
            if exc.status == 404:
                return error_response(
                    404, f"no endpoint at {request.path}", "GET / lists the endpoints", endpoints=self._endpoints()
                )
            if exc.status == 405:
                return error_response(
                    405,
                    f"{request.method} is not allowed on {request.path}",
                    "the built-in endpoints are GET only",
                    headers={"Allow": exc.headers.get("Allow", "GET")},
                )
            return error_response(exc.status, exc.reason, exc.text or "")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("web handler for %s %s failed: %s", request.method, request.path, exc)
            return error_response(
                500,
                f"internal error: {type(exc).__name__}: {exc}",
                "this is a bug in the handler; the worker log has the traceback",
            )

    def _endpoints(self) -> list[str]:
        s = self.app.settings
        tables = [
            "/tables",
            "/tables/<table>?offset=&limit=",
            "/tables/<table>/<key>[?window=current|now|<epoch s>]",
            "/table/, /table/<table>/, /table/<table>/<key>/ (Faust's table views)",
        ]
        builtins = [
            *(tables if s.web_tables_enabled else ()),
            *(["/metadata"] if s.web_router_enabled else ()),
            *(["/status", "/status.html"] if s.web_stats_enabled else ()),
            "/metrics",
            *(["/performance/"] if metrics_enabled(s) else ()),
            *(["/graph/"] if graph_enabled(s) else ()),
        ]
        # a built-in whose path an app page takes is listed where it stays (BUILTIN_PREFIX)
        taken = {p.split("/{")[0].rstrip("/") or "/" for p in self.shadowed}
        return [
            "/livez",
            "/readyz",
            *(BUILTIN_PREFIX + e if e.split("?")[0].split("/<")[0] in taken else e for e in builtins),
            *sorted(self.app.pages),
        ]

    def _page_handler(self, cls: type[View]) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await cls(self.app, self).dispatch(request)

        return handle

    # -- endpoints --------------------------------------------------------------------------------------
    async def index(self, request: web.Request) -> web.Response:
        return json_response({"app": self.app.id, "worker": self.address, "endpoints": self._endpoints()})

    async def livez(self, request: web.Request) -> web.Response:
        """Alive: the event loop answers (no token needed, reveals nothing)."""
        return json_response({"status": "alive"})

    async def readyz(self, request: web.Request) -> web.Response:
        """Ready: partitions assigned, every active table partition restored, not crashed."""
        st = await self.worker.status(lag=False, keys=False)
        problems: list[str] = []
        if st.crashed is not None:
            problems.append("the worker crashed")
        if not st.running:
            problems.append("no partitions assigned yet (joining the group or rebalancing)")
        not_ready = list(st.restore.not_ready)
        if not_ready:
            problems.append(f"restoring {len(not_ready)} table partition(s)")
        body = {"ready": not problems, "problems": problems, "restoring": not_ready[:50]}
        return json_response(
            body, status=200 if not problems else 503, headers=None if not problems else {"Retry-After": "1"}
        )

    async def metadata(self, request: web.Request) -> web.Response:
        st = await self.worker.status(lag=False, keys=False)
        a = st.assignment
        workers: dict[str, list[int]] = {}
        for p, owner in a.owners:
            workers.setdefault(owner, []).append(p)
        return json_response(
            {
                "app": st.app,
                "worker": self.address,
                "generation": a.generation,
                "leader": a.leader,
                "active": list(a.active),
                "standby": list(a.standby),
                "partitions": {str(p): owner for p, owner in a.owners},
                "workers": workers,
                "tables": {t.name: {"partitions": t.partitions, "changelog": t.changelog} for t in st.tables},
            }
        )

    async def status(self, request: web.Request) -> web.Response:
        if _wants_html(request):
            return await self.status_html(request)
        return await self.status_json(request)

    async def status_json(self, request: web.Request) -> web.Response:
        history = request.query.get("history", "0") not in ("0", "", "false", "no")
        raw_since = request.query.get("since")
        since: float | None = None
        if raw_since is not None:
            try:
                since = float(raw_since)
            except ValueError:
                since = math.nan
            if not math.isfinite(since):
                return error_response(
                    400,
                    f"since={raw_since[:40]!r} is not a time",
                    "pass the epoch seconds of the last sample you have (history.t[-1])",
                )
        return json_response(await self.stats.status(history=history, since=since))

    async def status_html(self, request: web.Request) -> web.Response:
        status = BUILTIN_PREFIX + "/status" if "/status" in self.shadowed else "/status"
        return web.Response(text=render_status_page(self.app.id, self.address, status), content_type="text/html")

    async def metrics(self, request: web.Request) -> web.Response:
        body = (await self.stats.prometheus()).encode()
        for sensor in self.app.sensors:  # e.g. faust.sensors.prometheus's monitor: its registry, appended
            exposition = getattr(sensor, "metrics_exposition", None)
            if exposition is not None:
                body += exposition()
        return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})

    # -- helpers for function pages (``async def view(web, request)``) -------------------------------------
    def url_for(self, name: str, **params: Any) -> str:
        """The path of the page named ``name`` (``@app.page(path, name=...)``) with its ``{params}``
        filled in, as Faust's ``web.url_for(view_name, **kwargs)``."""
        router = getattr(self, "_router", None)
        if router is None or name not in router:
            raise KeyError(f"no page is named {name!r}; name one with @app.page(path, name={name!r})")
        return str(router[name].url_for(**{k: str(v) for k, v in params.items()}))

    def json(self, data: Any, *, status: int = 200) -> web.Response:
        return json_response(data, status=status)

    def response(self, result: Any) -> web.StreamResponse:
        return as_response(result)
