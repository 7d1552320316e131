"""Connection limits for the worker's web server: a cap on open connections, a deadline for each
request head and body, and one rate-limited log line for malformed requests.

aiohttp has no header timeout: a client that sends half a request head and then nothing (or a
byte every few seconds) holds a socket forever, and 20,000 of them took a worker to its file
descriptor limit, after which RocksDB could not open its files. Every connection therefore goes
through :class:`GuardedProtocol`, which wraps aiohttp's own protocol:

* over ``max_connections`` open connections, a new one is closed at once (the listening socket
  keeps accepting, so the worker never runs out of descriptors because of the web port);
* a request head must be complete within ``header_timeout`` of its first byte (of the
  connection, for the first request), and a request's body within ``body_timeout``; otherwise
  the connection is dropped. Idle keep-alive connections are closed by aiohttp's
  ``keepalive_timeout`` (``web_idle_timeout``);
* a client that stops reading an answer (the socket's send buffer stays full, so writing is
  paused) for ``body_timeout`` is dropped too: otherwise its connection, and the handler writing
  to it, would wait forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from ssl import SSLContext
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

__all__ = ["Limits", "GuardedSite", "GuardedProtocol", "MalformedRequestFilter", "install_log_filter"]

log = logging.getLogger("agentstream.web")
_HEAD_END = b"\r\n\r\n"
_MAX_HEAD = 96 * 1024


class Limits:
    """Shared by all connections of one server: the settings and the live connection count."""

    def __init__(self, *, max_connections: int, header_timeout: float, body_timeout: float) -> None:
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.open = 0
        self.refused = 0
        self.timed_out = 0
        self.stalled_readers = 0  # connections dropped because the client stopped reading an answer
        self._last_refusal_log = 0.0

    def note_refused(self) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._last_refusal_log >= 10.0:
            self._last_refusal_log = now
            log.warning(
                "web server at its connection cap (%d open): refusing new connections (%d refused so far)",
                self.max_connections,
                self.refused,
            )


class GuardedProtocol(asyncio.Protocol):
    """Wraps one aiohttp connection protocol with the cap and the head/body deadlines."""

    def __init__(self, inner: Any, limits: Limits) -> None:
        self._inner = inner
        self._limits = limits
        self._transport: Any = None
        self._counted = False
        self._timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._buf = b""
        self._body_left = 0  # >0: Content-Length bytes to come; -1: chunked body

    # -- deadlines ----------------------------------------------------------------------------------
    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = asyncio.get_running_loop().call_later(seconds, self._expire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        self._limits.timed_out += 1
        if self._transport is not None:
            self._transport.abort()

    def _stalled(self) -> None:
        self._write_timer = None
        self._limits.stalled_readers += 1
        if self._transport is not None:
            self._transport.abort()

    def _disarm_write(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    # -- asyncio.Protocol ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: only abort() is relied on
        self._transport = transport
        if self._limits.open >= self._limits.max_connections:
            self._limits.note_refused()
            self._transport.abort()
            return
        self._limits.open += 1
        self._counted = True
        self._arm(self._limits.header_timeout)  # the first request head
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._counted:
            return
        self._track(data)
        self._inner.data_received(data)

    def _track(self, data: bytes) -> None:
        """Follow request boundaries (head, Content-Length or chunked body) to run the deadlines."""
        view = memoryview(data)
        while len(view):
            if self._body_left > 0:  # inside a Content-Length body
                take = min(self._body_left, len(view))
                self._body_left -= take
                view = view[take:]
                if self._body_left == 0:
                    self._disarm()  # request complete: the handler's own time is not limited here
                continue
            if self._body_left < 0:  # chunked body: ends with an empty chunk
                self._buf = (self._buf + bytes(view))[-5:]
                if self._buf.endswith(b"0\r\n\r\n"):
                    self._body_left, self._buf = 0, b""
                    self._disarm()
                return
            if self._timer is None:  # first byte of a request head
                self._arm(self._limits.header_timeout)
            self._buf += bytes(view)
            end = self._buf.find(_HEAD_END)
            if end < 0:
                if len(self._buf) > _MAX_HEAD:  # aiohttp answers 4xx to such a head; keep memory bounded
                    self._buf = self._buf[-3:]
                return
            head, rest = self._buf[:end].lower(), self._buf[end + len(_HEAD_END) :]
            self._buf = b""
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name, value = name.strip(), value.strip()
                if name == b"content-length" and value.isdigit():
                    length = int(value)
                elif name == b"transfer-encoding" and b"chunked" in value:
                    length = -1
            if length:
                self._body_left = length
                self._arm(self._limits.body_timeout)
            else:
                self._disarm()
            view = memoryview(rest)

    def eof_received(self) -> bool | None:
        if not self._counted:
            return None
        result: bool | None = self._inner.eof_received()
        return result

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._disarm_write()
        if self._counted:
            self._counted = False
            self._limits.open -= 1
            self._inner.connection_lost(exc)
        self._transport = None

    def pause_writing(self) -> None:
        if self._counted:
            if self._write_timer is None:  # the client has this long to read on
                self._write_timer = asyncio.get_running_loop().call_later(self._limits.body_timeout, self._stalled)
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._counted:
            self._disarm_write()
            self._inner.resume_writing()


class JsonErrorRequestHandler(RequestHandler):
    """aiohttp's connection handler whose own answers to unparsable requests (bad request line,
    bad header) are JSON like every other error, instead of text or an HTML page."""

    def handle_error(
        self, request: Any, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs (MalformedRequestFilter) and checks state
        reason = (getattr(exc, "message", None) or message or "").splitlines()[0:1]
        body = {
            "error": f"malformed HTTP request{': ' + str(reason[0])[:200] if reason else ''}",
            "hint": "send a valid HTTP/1.1 request; GET / lists the endpoints",
        }
        resp = web.json_response(body, status=status, headers={"X-Content-Type-Options": "nosniff"})
        resp.force_close()
        return resp


def _new_handler(server: Any) -> Any:
    try:
        return JsonErrorRequestHandler(server, loop=server._loop, **server._kwargs)
    except (TypeError, AttributeError):  # another aiohttp version: its own handler, text errors
        return server()


class GuardedSite(web.BaseSite):
    """aiohttp's TCPSite with every connection wrapped in :class:`GuardedProtocol`."""

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, limits: Limits, *, ssl_context: SSLContext | None = None
    ) -> None:
        super().__init__(runner, backlog=512, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self.limits = limits

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context is not None else 'http'}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        limits = self.limits
        self._server = await asyncio.get_running_loop().create_server(
            lambda: GuardedProtocol(_new_handler(server), limits),
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=True,
            ssl=self._ssl_context,  # web_ssl_context: the handshake precedes the head deadline
        )


class GuardedUnixSite(web.BaseSite):
    """:class:`GuardedSite` on a unix socket (Faust's ``web_transport='unix://<path>'``)."""

    def __init__(self, runner: web.BaseRunner, path: str, limits: Limits) -> None:
        super().__init__(runner, backlog=512)
        self._path = path
        self.limits = limits

    @property
    def name(self) -> str:
        return f"http://unix:{self._path}:"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        limits = self.limits
        self._server = await asyncio.get_running_loop().create_unix_server(
            lambda: GuardedProtocol(_new_handler(server), limits), self._path, backlog=self._backlog
        )


class MalformedRequestFilter(logging.Filter):
    """Turns aiohttp's traceback for each malformed request into one line, at most one per
    ``interval`` seconds (with the number suppressed in between): hostile clients cannot flood
    the log."""

    def __init__(self, interval: float = 10.0) -> None:
        super().__init__()
        self.interval = interval
        self._last = 0.0
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        from aiohttp.http_exceptions import HttpProcessingError

        if exc is None or not isinstance(exc, HttpProcessingError):
            return True
        now = time.monotonic()
        if now - self._last < self.interval:
            self.suppressed += 1
            return False
        self._last = now
        extra = f" ({self.suppressed} more since the last report)" if self.suppressed else ""
        self.suppressed = 0
        record.msg = "malformed HTTP request: %s%s"
        record.args = (f"{type(exc).__name__}: {getattr(exc, 'message', exc)}".replace("\n", " ")[:200], extra)
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_filter: MalformedRequestFilter | None = None


def install_log_filter() -> MalformedRequestFilter:
    """Attach the filter to aiohttp's server logger once per process."""
    global _filter
    if _filter is None:
        _filter = MalformedRequestFilter()
        logging.getLogger("aiohttp.server").addFilter(_filter)
    return _filter
