"""Faust's web cache: ``cache = blueprint.cache(timeout=60)`` (or ``Cache(timeout=60)``), then
``@cache.view()`` on a view method: a 200 answer is kept (in ``app.cache``, or the ``backend`` given:
a backend or a URL such as ``redis://``) under a key made of the prefix, the method and the URL (and
the request headers with ``include_headers``), and later requests for that URL get it without
running the method until ``timeout`` seconds pass."""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any
from urllib.parse import quote

from aiohttp import web

from ..cache import CacheBackend, CacheUnavailable, backend_for
from ..durations import to_seconds
from .responses import bytes_to_response, response_to_bytes
from .views import as_response

__all__ = ["Cache"]

log = logging.getLogger(__name__)

IDENT = "faustweb.cache.view"
Handler = Callable[..., Awaitable[Any]]


class Cache:
    """Faust's ``Cache``: :meth:`view` decorates view methods; ``timeout`` (seconds or timedelta) is the
    default lifetime of an entry (None: until evicted); ``key_prefix`` separates caches (a blueprint's
    name by default)."""

    ident = IDENT

    def __init__(
        self,
        timeout: Any = None,
        include_headers: bool = False,
        key_prefix: str | None = None,
        backend: Any = None,
    ) -> None:
        self.timeout = timeout
        self.include_headers = include_headers
        self.key_prefix = key_prefix or ""
        self.backend: CacheBackend | None = backend_for(backend) if isinstance(backend, str) else backend

    def view(
        self, timeout: Any = None, include_headers: bool = False, key_prefix: str | None = None
    ) -> Callable[[Handler], Handler]:
        """Cache what the decorated view method answers (status 200 only, as Faust)."""

        def decorate(fun: Handler) -> Handler:
            @functools.wraps(fun)
            async def cached(view: Any, request: web.Request, *args: Any, **kwargs: Any) -> Any:
                if not self.can_cache_request(request):
                    return await fun(view, request, *args, **kwargs)
                key = self.key_for_request(request, key_prefix, "GET", include_headers or self.include_headers)
                is_head = request.method.upper() == "HEAD"
                hit = await self.get_view(key, view)
                if hit is None and is_head:
                    key = self.key_for_request(request, key_prefix, "HEAD", include_headers or self.include_headers)
                    hit = await self.get_view(key, view)
                if hit is not None:
                    return hit
                response = as_response(await fun(view, request, *args, **kwargs))
                if self.can_cache_response(request, response):
                    await self.set_view(key, view, response, timeout)
                return response

            return cached

        return decorate

    def _backend(self, view: Any) -> CacheBackend:
        return self.backend if self.backend is not None else view.app.cache  # type: ignore[no-any-return]

    async def get_view(self, key: str, view: Any) -> web.Response | None:
        backend = self._backend(view)
        with suppress(CacheUnavailable, backend.Unavailable):
            payload = await backend.get(key)
            if payload is not None:
                return bytes_to_response(payload)
        return None

    async def set_view(self, key: str, view: Any, response: Any, timeout: Any = None) -> None:
        backend = self._backend(view)
        lifetime = timeout if timeout is not None else self.timeout
        with suppress(CacheUnavailable, backend.Unavailable):
            await backend.set(key, response_to_bytes(response), None if lifetime is None else to_seconds(lifetime))

    def can_cache_request(self, request: web.Request) -> bool:
        return True

    def can_cache_response(self, request: web.Request, response: Any) -> bool:
        return isinstance(response, web.Response) and response.status == 200 and isinstance(response.body, bytes)

    def key_for_request(
        self, request: web.Request, prefix: str | None = None, method: str | None = None, include_headers: bool = False
    ) -> str:
        headers = request.headers if include_headers else {}
        context = hashlib.md5(
            b"".join(k.encode() + v.encode() for k, v in headers.items()), usedforsecurity=False
        ).hexdigest()
        url = hashlib.md5(
            quote(str(request.url), safe="/#%[]=:;$&()+,!?*@'~").encode("ascii"), usedforsecurity=False
        ).hexdigest()
        return (
            f"{self.ident}.{self.key_prefix if prefix is None else prefix}.{method or request.method}.{url}.{context}"
        )
