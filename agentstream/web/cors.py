"""CORS for every endpoint of the web server: Faust's ``web_cors_options`` (``{origin: ResourceOptions}``)
with aiohttp-cors' semantics (the library Faust uses), as one small middleware step.

Not aiohttp-cors itself: it registers each route and refuses routes of method ``*`` (the app's
pages are such routes), and its preflight route would sit behind the bearer-token guard, which a
browser's preflight never passes (it carries no Authorization). Here the guard answers a
preflight before the token check and adds the CORS headers to every answer, errors included
(so a page can read a 401's reason).

An origin gets the options of its exact entry, else those of ``*``; an origin with neither gets no
CORS headers (the browser then keeps the answer from the page), and its preflight a 403.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiohttp import hdrs, web

from .responses import error_response

__all__ = ["ResourceOptions", "CorsPolicy"]

# CORS "simple response headers": readable by the page without being exposed
_SIMPLE_RESPONSE_HEADERS = frozenset(
    h.upper() for h in ("Cache-Control", "Content-Language", "Content-Type", "Expires", "Last-Modified", "Pragma")
)
_FIELDS = ("allow_credentials", "expose_headers", "allow_headers", "max_age", "allow_methods")


class ResourceOptions(NamedTuple):
    """Faust's ``faust.web.ResourceOptions``: the CORS options of one origin."""

    allow_credentials: bool = False
    expose_headers: str | tuple[str, ...] | None = ()
    allow_headers: str | tuple[str, ...] | None = ()
    max_age: int | None = None
    allow_methods: str | tuple[str, ...] | None = ()


@dataclass(frozen=True)
class _Origin:
    """One origin's options, normalised: ``None`` means ``*`` (any), names upper-cased."""

    allow_credentials: bool
    expose_headers: frozenset[str] | None
    allow_headers: frozenset[str] | None
    max_age: int | None
    allow_methods: frozenset[str] | None


def _names(value: Any, *, none_is_any: bool) -> frozenset[str] | None:
    if value == "*" or (value is None and none_is_any):
        return None
    return frozenset(str(v).upper() for v in (value or ()))


def _normalise(opts: Any) -> _Origin:
    values = dict(opts) if isinstance(opts, Mapping) else {f: getattr(opts, f) for f in _FIELDS}
    return _Origin(
        allow_credentials=bool(values.get("allow_credentials", False)),
        expose_headers=_names(values.get("expose_headers", ()), none_is_any=False),
        allow_headers=_names(values.get("allow_headers", ()), none_is_any=False),
        max_age=values.get("max_age"),
        # aiohttp-cors: allow_methods=None allows the route's methods (any here); () allows none
        allow_methods=_names(values.get("allow_methods", ()), none_is_any=True),
    )


class CorsPolicy:
    """The CORS headers of the web server's answers (``web_cors_options``, checked by the settings)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.origins = {origin: _normalise(opts) for origin, opts in options.items()}

    def _for(self, origin: str) -> _Origin | None:
        return self.origins.get(origin, self.origins.get("*"))

    @staticmethod
    def is_preflight(request: web.Request) -> bool:
        return request.method == hdrs.METH_OPTIONS and hdrs.ACCESS_CONTROL_REQUEST_METHOD in request.headers

    def preflight(self, request: web.Request) -> web.Response:
        """The answer to a preflight (CORS 6.2): 200 with what is allowed, or a 403 naming why."""
        origin = request.headers.get(hdrs.ORIGIN)
        opts = self._for(origin) if origin else None
        method = request.headers[hdrs.ACCESS_CONTROL_REQUEST_METHOD].strip().upper()
        asked = {
            h.strip().upper()
            for h in request.headers.get(hdrs.ACCESS_CONTROL_REQUEST_HEADERS, "").split(",")
            if h.strip()
        }
        fix = "allow it in the app's web_cors_options"
        if opts is None:
            return error_response(403, f"CORS preflight: origin {origin!r} is not allowed", fix)
        if opts.allow_methods is not None and method not in opts.allow_methods:
            return error_response(403, f"CORS preflight: method {method} is not allowed for {origin!r}", fix)
        if opts.allow_headers is not None and asked - opts.allow_headers:
            refused = ", ".join(sorted(asked - opts.allow_headers))
            return error_response(403, f"CORS preflight: headers {refused} are not allowed for {origin!r}", fix)
        headers = {hdrs.ACCESS_CONTROL_ALLOW_ORIGIN: str(origin), hdrs.ACCESS_CONTROL_ALLOW_METHODS: method}
        if asked:
            headers[hdrs.ACCESS_CONTROL_ALLOW_HEADERS] = ",".join(sorted(asked))
        if opts.allow_credentials:
            headers[hdrs.ACCESS_CONTROL_ALLOW_CREDENTIALS] = "true"
        if opts.max_age is not None:
            headers[hdrs.ACCESS_CONTROL_MAX_AGE] = str(opts.max_age)
        return web.Response(status=200, headers={**headers, hdrs.VARY: "Origin"})

    def decorate(self, request: web.Request, response: web.StreamResponse) -> None:
        """Add CORS 6.1's headers to an answer to an allowed origin (nothing for other requests)."""
        origin = request.headers.get(hdrs.ORIGIN)
        opts = self._for(origin) if origin else None
        if opts is None:
            return
        if opts.expose_headers is None:
            exposed = sorted({h.upper() for h in response.headers} - _SIMPLE_RESPONSE_HEADERS)
        else:
            exposed = sorted(opts.expose_headers)
        if exposed:
            response.headers[hdrs.ACCESS_CONTROL_EXPOSE_HEADERS] = ",".join(exposed)
        response.headers[hdrs.ACCESS_CONTROL_ALLOW_ORIGIN] = str(origin)
        if opts.allow_credentials:
            response.headers[hdrs.ACCESS_CONTROL_ALLOW_CREDENTIALS] = "true"
        response.headers.add(hdrs.VARY, "Origin")
