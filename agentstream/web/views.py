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
from .responses import error_response, json_response
from .routing import routed

if TYPE_CHECKING:
    from ..app import App
    from .server_types import WebT as Web  # server.py imports this module

__all__ = ["View", "as_response", "view_class", "takes_model", "gives_model"]

METHODS = ("get", "post", "put", "patch", "delete")


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
    """

    def __init__(self, app: App, web: Web) -> None:
        self.app = app
        self.web = web

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        method = request.method.lower()
        handler: Callable[..., Awaitable[Any]] | None = getattr(self, method, None) if method in METHODS else None
        if handler is None:
            allowed = [m.upper() for m in METHODS if callable(getattr(self, m, None))]
            return error_response(
                405,
                f"{request.method} is not allowed on {request.path}",
                f"use one of {', '.join(allowed) or '(none)'}",
                headers={"Allow": ", ".join(allowed)},
            )
        route = route_of(handler)
        if route is None:
            return as_response(await handler(request, **request.match_info))
        return as_response(await routed(self.web, route, request, lambda: handler(request, **request.match_info)))

    # -- URLs of named pages (``@app.page(path, name=...)``), as Faust's View ----------------------
    def path_for(self, view_name: str, **params: Any) -> str:
        """The path of the page named ``view_name``, its ``{params}`` filled in."""
        return self.web.url_for(view_name, **params)

    def url_for(self, view_name: str, _base_url: str | None = None, **params: Any) -> str:
        """The page's full URL: ``_base_url``, or this worker's advertised URL (``canonical_url``)."""
        base = self.web.url if _base_url is None else _base_url
        return f"{str(base).rstrip('/')}/{self.path_for(view_name, **params).lstrip('/')}"

    # -- response helpers (Faust's names) --------------------------------------------------------
    def json(self, data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return json_response(data, status=status, headers=headers)

    def text(self, text: str, *, status: int = 200, content_type: str = "text/plain") -> web.Response:
        return web.Response(text=text, status=status, content_type=content_type)

    def html(self, html: str, *, status: int = 200) -> web.Response:
        return web.Response(text=html, status=status, content_type="text/html")

    def bytes(self, data: bytes, *, status: int = 200, content_type: str = "application/octet-stream") -> web.Response:
        return web.Response(body=data, status=status, content_type=content_type)

    def error(self, status: int, error: str, hint: str = "") -> web.Response:
        return error_response(status, error, hint)

    def notfound(self, error: str = "not found", hint: str = "") -> web.Response:
        return error_response(404, error, hint)


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
