"""App-defined web views (Faust's ``@app.page``): a class with ``get``/``post``/... methods, or a
function ``async def view(web, request, **path_params)``.

Handlers may return an aiohttp response, or a plain value that becomes one: dict/list -> JSON,
str -> text, None -> 204. Path parameters (``/count/{word}``) arrive as keyword arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..routes import mark, route_of
from . import exceptions
from .responses import bytes_to_response, error_response, json_response, response_to_bytes
from .routing import routed

if TYPE_CHECKING:
    from ..app import App
    from .server_types import WebT as Web  # server.py imports this module

__all__ = ["View", "as_response", "view_class", "takes_model", "gives_model"]

_bytes = bytes  # `bytes` is a method name below
METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "search")


def as_response(result: Any) -> web.StreamResponse:
    """A handler's return value as a response (see the module docstring)."""
    if isinstance(result, web.StreamResponse):
        return result
    if result is None:
        return web.Response(status=204)
    if isinstance(result, str):
        return web.Response(text=result, content_type="text/plain")
    if isinstance(result, bytes):
        return web.Response(body=result, content_type="application/octet-stream")
    return json_response(result)


class View:
    """Base class of app views: ``class Count(View): async def get(self, request): return self.json(...)``.

    ``self.app`` is the App and ``self.web`` the worker's :class:`~agentstream.web.server.Web`.
    A method may ``raise self.NotFound()`` (or any :mod:`agentstream.web.exceptions` error): the client
    gets its status and ``{"error": detail, ...}``, as from Faust. HEAD runs ``get`` unless the view
    defines ``head`` (the body is left out); OPTIONS and SEARCH need their own method.
    """

    ServerError = exceptions.ServerError
    ValidationError = exceptions.WebValidationError
    ParseError = exceptions.ParseError
    NotAuthenticated = exceptions.NotAuthenticated
    PermissionDenied = exceptions.PermissionDenied
    NotFound = exceptions.NotFound

    def __init__(self, app: App, web: Web) -> None:
        self.app = app
        self.web = web
        self.__post_init__()

    def __post_init__(self) -> None:
        """Override to set the view up (Faust's hook)."""

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        method = request.method.lower()
        handler: Callable[..., Awaitable[Any]] | None = getattr(self, method, None) if method in METHODS else None
        if handler is None and method == "head":
            handler = getattr(self, "get", None)
        if handler is None:
            allowed = [m.upper() for m in METHODS if callable(getattr(self, m, None))]
            return error_response(
                405,
                f"{request.method} is not allowed on {request.path}",
                f"use one of {', '.join(allowed) or '(none)'}",
                headers={"Allow": ", ".join(allowed)},
            )
        route = route_of(handler)
        try:
            if route is None:
                return as_response(await handler(request, **request.match_info))
            return as_response(await routed(self.web, route, request, lambda: handler(request, **request.match_info)))
        except exceptions.WebError as exc:
            return await self.on_request_error(request, exc)

    async def on_request_error(self, request: web.Request, exc: exceptions.WebError) -> web.StreamResponse:
        """The answer to a raised web error (Faust's hook): its status and ``{"error": detail, **extra}``."""
        return self.error(int(exc.code), exc.detail, **exc.extra_context)

    # -- URLs of named pages (``@app.page(path, name=...)``), as Faust's View ----------------------
    def path_for(self, view_name: str, **params: Any) -> str:
        """The path of the page named ``view_name``, its ``{params}`` filled in."""
        return self.web.url_for(view_name, **params)

    def url_for(self, view_name: str, _base_url: str | None = None, **params: Any) -> str:
        """The page's full URL: ``_base_url``, or this worker's advertised URL (``canonical_url``)."""
        base = self.web.url if _base_url is None else _base_url
        return f"{str(base).rstrip('/')}/{self.path_for(view_name, **params).lstrip('/')}"

    # -- response helpers (Faust's names and keyword arguments) -----------------------------------
    def json(
        self,
        value: Any,
        *,
        content_type: str | None = None,
        status: int = 200,
        reason: str | None = None,
        headers: Any = None,
    ) -> web.Response:
        """``value`` as JSON (Records with their ``__faust`` tag)."""
        response = json_response(value, status=status, headers=_headers(headers))
        return _finish(response, content_type, reason)

    def text(
        self,
        value: str,
        *,
        content_type: str | None = None,
        status: int = 200,
        reason: str | None = None,
        headers: Any = None,
    ) -> web.Response:
        return _plain(
            text=value, status=status, reason=reason, headers=headers, content_type=content_type or "text/plain"
        )

    def html(
        self,
        value: str,
        *,
        content_type: str | None = None,
        status: int = 200,
        reason: str | None = None,
        headers: Any = None,
    ) -> web.Response:
        return _plain(
            text=value, status=status, reason=reason, headers=headers, content_type=content_type or "text/html"
        )

    def bytes(
        self,
        value: bytes,
        *,
        content_type: str | None = None,
        status: int = 200,
        reason: str | None = None,
        headers: Any = None,
    ) -> web.Response:
        return _plain(
            body=value,
            status=status,
            reason=reason,
            headers=headers,
            content_type=content_type or "application/octet-stream",
        )

    def error(self, status: int, reason: str, headers: Any = None, **kwargs: Any) -> web.Response:
        """``{"error": reason, **kwargs}`` with ``status`` (Faust's). A text third argument is
        agentstream's older ``hint``, kept as the ``hint`` key."""
        if isinstance(headers, str):
            kwargs.setdefault("hint", headers)
            headers = None
        return self.json({"error": reason, **kwargs}, status=status, headers=headers)

    def notfound(self, reason: str = "Not Found", hint: str | None = None, **kwargs: Any) -> web.Response:
        """A 404 (Faust's; it suggests ``raise self.NotFound()`` instead)."""
        if hint is not None:
            kwargs["hint"] = hint
        return self.error(404, reason, **kwargs)

    async def read_request_content(self, request: web.Request) -> _bytes:
        """The request body."""
        return await request.read()

    def bytes_to_response(self, s: _bytes) -> web.Response:
        return bytes_to_response(s)

    def response_to_bytes(self, response: web.StreamResponse) -> _bytes:
        return response_to_bytes(response)


def _plain(*, status: int, reason: str | None, headers: Any, content_type: str, **body: Any) -> web.Response:
    """A text or bytes answer (``text=`` or ``body=``): what ``text``, ``html`` and ``bytes`` share."""
    return web.Response(status=status, reason=reason, headers=_headers(headers), content_type=content_type, **body)


def _headers(headers: Any) -> dict[str, str] | None:
    return None if headers is None else dict(headers)


def _finish(response: web.Response, content_type: str | None, reason: str | None) -> web.Response:
    if content_type is not None:
        response.content_type = content_type
    if reason is not None:
        response.set_status(response.status, reason)
    return response


def view_class(handler: Any, base: type | None = None) -> type[View]:
    """The View class of a registered page: itself, or a subclass of ``base`` (default View) calling
    the function for every method (Faust's ``@app.page(path, base=...)``)."""
    if base is not None and not (isinstance(base, type) and issubclass(base, View)):
        raise TypeError(f"page base {base!r} must be a subclass of agentstream.web.View")
    if isinstance(handler, type) and issubclass(handler, View):
        return handler
    if isinstance(handler, type):
        raise TypeError(f"page {handler.__qualname__} must subclass agentstream.web.View")
    if not callable(handler):
        raise TypeError(f"page handler {handler!r} is neither a View subclass nor a function")

    async def call(self: View, request: web.Request, **params: Any) -> Any:
        return await handler(self, request, **params)

    route = route_of(handler)
    if route is not None:  # @app.table_route on the function: its View's methods are routed alike
        mark(call, route)
    attrs: dict[str, Any] = {m: call for m in METHODS}
    return type(getattr(handler, "__name__", "PageView"), (base or View,), attrs)


Handler = Callable[..., Awaitable[Any]]


def takes_model(model: Any) -> Callable[[Handler], Handler]:
    """Faust's ``@takes_model(Order)`` on a view method: the request body (JSON) decoded as
    ``model`` is passed after the request, ``async def post(self, request, order)``. A body that
    does not decode is a 400 naming the model (Faust answers 500)."""

    def decorate(fun: Handler) -> Handler:
        @functools.wraps(fun)
        async def inner(view: Any, request: web.Request, *args: Any, **kwargs: Any) -> Any:
            data = await request.read()
            try:
                obj = model.loads(data)
            except Exception as exc:
                return error_response(
                    400,
                    f"the request body is not a {getattr(model, '__name__', model)}: {exc}",
                    "send the model as JSON",
                )
            return await fun(view, request, obj, *args, **kwargs)

        return inner

    return decorate


def gives_model(model: Any) -> Callable[[Handler], Handler]:
    """Faust's ``@gives_model(Order)``: the view returns a model (or any value), answered as JSON
    (a Record with its ``__faust`` tag, as Faust's ``view.json`` writes it)."""

    def decorate(fun: Handler) -> Handler:
        @functools.wraps(fun)
        async def inner(view: Any, request: web.Request, *args: Any, **kwargs: Any) -> Any:
            return json_response(await fun(view, request, *args, **kwargs))

        return inner

    return decorate
