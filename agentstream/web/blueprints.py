"""Faust's ``web.Blueprint``: views declared apart from any app, registered on one (or several)
with a URL prefix; registering is ``app.page`` for each route, so a blueprint's views are served
by every worker's web server like the app's own pages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from .cache import Cache
from .responses import error_response

__all__ = ["Blueprint"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class _Route:
    uri: str
    name: str
    handler: Any
    cors_options: Any = None  # Faust's per-view CORS options (over the app's web_cors_options)
    base: Any = None


@dataclass(frozen=True)
class _StaticRoute:
    uri: str
    path: Path
    name: str


class Blueprint:
    """``blueprint = web.Blueprint("users")``, ``@blueprint.route("/{user_id}/")`` on a View
    or a function, then ``blueprint.register(app, url_prefix="/users/")``."""

    view_name_separator = ":"

    def __init__(self, name: str, *, url_prefix: str | None = None) -> None:
        self.name = name
        self.url_prefix = url_prefix
        self.routes: list[_Route] = []
        self.static_routes: list[_StaticRoute] = []

    def cache(
        self, timeout: Any = None, include_headers: bool = False, key_prefix: str | None = None, backend: Any = None
    ) -> Cache:
        """Faust's ``blueprint.cache(timeout=...)``: a :class:`~agentstream.web.cache.Cache` whose keys
        start with the blueprint's name; ``@cache.view()`` on a view method caches its 200 answers."""
        return Cache(timeout, include_headers, self.name if key_prefix is None else key_prefix, backend)

    def route(
        self, uri: str, *, name: str | None = None, cors_options: Any = None, base: Any = None
    ) -> Callable[[F], F]:
        """Declare a view at ``uri`` (below the prefix given at registration); ``cors_options`` as
        for ``app.page``."""

        def decorate(handler: F) -> F:
            view_name = name or str(getattr(handler, "__name__", "view"))
            self.routes.append(_Route(uri, view_name, handler, cors_options, base))
            return handler

        return decorate

    def static(self, uri: str, file_or_directory: str | Path, *, name: str | None = None) -> None:
        """Serve a file, or the files under a directory, at ``uri``."""
        self.static_routes.append(_StaticRoute(uri, Path(file_or_directory), name or "static"))

    def register(self, app: Any, *, url_prefix: str | None = None) -> None:
        """Add every route to ``app``'s pages (``url_prefix`` overrides the blueprint's)."""
        prefix = url_prefix or self.url_prefix
        for route in self.routes:
            app.page(self._with_prefix(route.uri, prefix), cors_options=route.cors_options, base=route.base)(
                route.handler
            )
        for static in self.static_routes:
            uri = self._with_prefix(static.uri, prefix)
            if static.path.is_dir():
                uri = uri.rstrip("/") + "/{filename:.+}"
            app.page(uri)(_static_page(static.path))

    def init_webserver(self, web: Any) -> None:
        self.on_webserver_init(web)

    def on_webserver_init(self, web: Any) -> None:
        """Called by Faust's server on start; override it to act then (nothing by default)."""

    @staticmethod
    def _with_prefix(uri: str, prefix: str | None) -> str:
        path = prefix.rstrip("/") + "/" + uri.lstrip("/") if prefix else uri
        return path[1:] if path.startswith("//") else path

    def __repr__(self) -> str:
        return f"<Blueprint {self.name} routes={len(self.routes)}>"


def _static_page(root: Path) -> Callable[..., Any]:
    base = root.resolve()

    async def serve(view: Any, request: web.Request, filename: str = "") -> web.StreamResponse:
        target = (base / filename).resolve() if filename else base
        if target != base and base not in target.parents:  # no ../ out of the directory
            return error_response(404, f"no file {filename!r}", "ask for a file under the static directory")
        if not target.is_file():
            return error_response(404, f"no file {filename!r}", "ask for a file under the static directory")
        return web.FileResponse(target)

    return serve
