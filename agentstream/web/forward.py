"""Forwarding a request to the worker that owns a key's partition: the one forwarder behind the
table endpoints and ``@app.table_route`` pages.

The owner's address comes from another member's group metadata, so it is checked to be exactly a
``host:port`` first (anything else could make this worker fetch an arbitrary URL for a client).
The forwarded request carries :data:`FORWARDED_HEADER` (the owner never forwards it again: during
a rebalance two workers could otherwise bounce it between them) and the app's web token; the
answer is passed back with ``X-Agentstream-Served-By``. An unreachable owner is a 503 with
``Retry-After``, never a hang: the call is bounded by ``web_forward_timeout``.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web
from yarl import URL

from .responses import error_response

log = logging.getLogger("agentstream.web")

__all__ = ["Forwarder", "FORWARDED_HEADER", "SERVED_BY_HEADER", "RETRY_AFTER", "valid_owner"]

FORWARDED_HEADER = "X-Agentstream-Forwarded-By"
SERVED_BY_HEADER = "X-Agentstream-Served-By"
RETRY_AFTER = {"Retry-After": "1"}
MAX_FORWARDED_BYTES = 4 * 1024 * 1024
_PASSED_HEADERS = ("Accept", "Content-Type", "Accept-Language", "If-None-Match")  # what a page may care about
_HOST_LABELS = re.compile(
    r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$"
)


def valid_owner(address: object) -> str | None:
    """``host:port`` when ``address`` (from another member's group metadata) is exactly a host name,
    IPv4 or [IPv6] address and a port in 1..65535, else None."""
    if not isinstance(address, str) or len(address) > 300:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or port != str(int(port)):
        return None
    if host.startswith("[") and host.endswith("]"):
        try:
            return address if ipaddress.ip_address(host[1:-1]).version == 6 else None
        except ValueError:
            return None
    return address if _HOST_LABELS.match(host) else None


class _Sender(Protocol):
    """What the forwarder needs of its web server."""

    forward_timeout: float
    token: bytes | None
    scheme: str

    @property
    def address(self) -> str: ...


class Forwarder:
    """One client session per web server, opened on first use and closed with the server."""

    def __init__(self, server: _Sender) -> None:
        self.server = server
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(
        self,
        request: web.Request,
        owner: str,
        what: str,
        *,
        url: URL | None = None,
        json_only: bool = False,
        **details: Any,
    ) -> web.Response:
        """``request`` (same method, body and, unless given, path and query) sent to ``owner``.

        ``what`` names the partition(s) in errors; ``json_only``: only a JSON answer of at most
        4 MiB is passed on (the table endpoints), else any answer (an app page); ``details`` go
        into error answers.
        """
        server = self.server
        target = url if url is not None else request.rel_url
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=server.forward_timeout))
        headers = {h: request.headers[h] for h in _PASSED_HEADERS if h in request.headers}
        headers[FORWARDED_HEADER] = server.address
        if json_only:
            headers["Accept"] = "application/json"
        if server.token is not None:  # the owner is a worker of the same app: same token
            headers["Authorization"] = "Bearer " + server.token.decode()
        body = await request.read() if request.can_read_body else b""
        try:
            async with self._session.request(
                request.method,
                f"{server.scheme}://{owner}{target.raw_path_qs}",
                data=body or None,
                headers=headers,
                allow_redirects=False,
            ) as resp:
                data = await resp.content.read(MAX_FORWARDED_BYTES + 1)
                status, content_type = resp.status, resp.content_type
                raw_type = resp.headers.get("Content-Type", "application/octet-stream")
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            log.warning(
                "forwarding %s %s to %s (owner of %s) failed: %r", request.method, request.path, owner, what, exc
            )
            return error_response(
                503,
                f"the owner of {what} ({owner}) is not reachable: {type(exc).__name__}: {exc}",
                "retry later; the group rebalances when a worker dies",
                headers=RETRY_AFTER,
                owner=owner,
                **details,
            )
        problem = None
        if len(data) > MAX_FORWARDED_BYTES:
            problem = f"more than {MAX_FORWARDED_BYTES} bytes"
        elif json_only and (content_type != "application/json" or not 200 <= status < 600 or 300 <= status < 400):
            problem = f"HTTP {status} with content type {content_type!r}"
        elif json_only:
            try:
                orjson.loads(data)
            except orjson.JSONDecodeError:
                problem = "a body that is not JSON"
        if problem is not None:
            log.warning("owner %s of %s answered %s; not passed on", owner, what, problem)
            return error_response(
                502,
                f"the owner of {what} ({owner}) answered {problem}",
                "only JSON answers of workers are passed on"
                if json_only
                else "answers of routed pages are limited to 4 MiB",
                owner=owner,
                **details,
            )
        out_headers = {SERVED_BY_HEADER: owner, "Content-Type": raw_type}
        if status == 503:
            out_headers.update(RETRY_AFTER)
        return web.Response(body=data, status=status, headers=out_headers)
