"""Forwarding a request to the worker that owns a key's partition: the one forwarder behind the
table endpoints and ``@app.table_route`` pages.

The owner's address comes from another member's group metadata, so it is checked to be exactly a
``host:port`` first (anything else could make this worker fetch an arbitrary URL for a client).
The forwarded request carries the client's end-to-end headers (not the hop-by-hop ones) except
its credentials (``Cookie``, ``Authorization``: the owner's address is whatever a group member
advertised, so they go only when the operator opts in with ``web_forward_credentials``, and the
app's web token never), :data:`FORWARDED_HEADER` (the owner never forwards it again: during a
rebalance two workers could otherwise bounce it between them; the older ``X-Agentstream-Routed-By``
counts too, so a rolling upgrade cannot bounce a request) and, when a web token is set, a
signature bound to the owner's address in its place (:mod:`.forward_auth`); the answer (read to its
end, at most 4 MiB) is passed back with ``X-Agentstream-Served-By``. An unreachable owner is a 503 with ``Retry-After``, never a hang: the
call is bounded by ``web_forward_timeout``.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from .forward_auth import FORWARD_AUTH_HEADER, sign
from .responses import error_response

log = logging.getLogger("agentstream.web")

__all__ = ["Forwarder", "FORWARDED_HEADER", "SERVED_BY_HEADER", "RETRY_AFTER", "forwarded_by", "valid_owner"]

FORWARDED_HEADER = "X-Agentstream-Forwarded-By"
_OLD_FORWARDED_HEADER = "X-Agentstream-Routed-By"  # what workers before 0.1 sent: still "already forwarded"
SERVED_BY_HEADER = "X-Agentstream-Served-By"
RETRY_AFTER = {"Retry-After": "1"}
MAX_FORWARDED_BYTES = 4 * 1024 * 1024
# RFC 9110 7.6.1: hop-by-hop headers are for one connection, not for the owner; Host and
# Content-Length are the forwarded request's own.
_HOP_BY_HOP = frozenset(
    (
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    )
)
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


def forwarded_by(request: web.Request) -> str | None:
    """The worker that forwarded ``request`` here (None when a client sent it): such a request is
    answered here, never forwarded again."""
    return request.headers.get(FORWARDED_HEADER) or request.headers.get(_OLD_FORWARDED_HEADER)


_CREDENTIALS = frozenset(("cookie", "authorization"))
_NEVER = frozenset((FORWARD_AUTH_HEADER.lower(),))  # a client's signature is never passed on


def _end_to_end(request: web.Request, *, credentials: bool) -> CIMultiDict[str]:
    """The client's headers minus the hop-by-hop ones (also those its Connection header names)
    and, unless ``credentials``, minus its Cookie and Authorization."""
    named = {h.strip().lower() for v in request.headers.getall("Connection", ()) for h in v.split(",")}
    drop = _HOP_BY_HOP | _NEVER | named | (frozenset() if credentials else _CREDENTIALS)
    headers: CIMultiDict[str] = CIMultiDict()
    for name, value in request.headers.items():
        if name.lower() not in drop and not name.lower().startswith("proxy-"):
            headers.add(name, value)
    return headers


async def _read_capped(resp: aiohttp.ClientResponse) -> bytes:
    """The answer's whole body, or its first ``MAX_FORWARDED_BYTES + 1`` bytes when it is longer
    (``content.read(n)`` returns only what has arrived so far)."""
    data = bytearray()
    while len(data) <= MAX_FORWARDED_BYTES:
        chunk = await resp.content.read(MAX_FORWARDED_BYTES + 1 - len(data))
        if not chunk:
            break
        data += chunk
    return bytes(data)


class _Sender(Protocol):
    """What the forwarder needs of its web server."""

    forward_timeout: float
    forward_credentials: bool
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
        method: str | None = None,
        json_only: bool = False,
        **details: Any,
    ) -> web.Response:
        """``request`` (same body and, unless given, method, path and query) sent to ``owner``.

        ``what`` names the partition(s) in errors; ``json_only``: only a JSON answer of at most
        4 MiB is passed on (the table endpoints), else any answer (an app page); ``details`` go
        into error answers.
        """
        server = self.server
        target = url if url is not None else request.rel_url
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=server.forward_timeout),
                cookie_jar=aiohttp.DummyCookieJar(),  # shared by all clients: never keep one's cookies
            )
        headers = _end_to_end(request, credentials=server.forward_credentials)
        headers[FORWARDED_HEADER] = server.address
        if json_only:
            headers["Accept"] = "application/json"
        method = method or request.method
        try:
            full = URL(f"{server.scheme}://{owner}{target.raw_path_qs}")
        except ValueError:
            full = None
        if server.token is not None:
            # the owner is a worker of the same app (same token) at an address a group member chose:
            # it gets a signature for this request to that address, never the token itself
            headers.pop("Authorization", None)
            if full is not None:
                headers[FORWARD_AUTH_HEADER] = sign(server.token, method, owner, full.raw_path_qs)
        body = await request.read() if request.can_read_body else b""
        try:
            if full is None:
                raise ValueError(f"not a URL: {server.scheme}://{owner}{target.raw_path_qs}")
            async with self._session.request(
                method,
                full,
                data=body or None,
                headers=headers,
                allow_redirects=False,
            ) as resp:
                data = await _read_capped(resp)
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
                f"only JSON answers of workers of at most {MAX_FORWARDED_BYTES} bytes (4 MiB) are passed on"
                if json_only
                else f"answers of routed pages are limited to {MAX_FORWARDED_BYTES} bytes (4 MiB)",
                owner=owner,
                **details,
            )
        out_headers = {SERVED_BY_HEADER: owner, "Content-Type": raw_type}
        if status == 503:
            out_headers.update(RETRY_AFTER)
        return web.Response(body=data, status=status, headers=out_headers)
