"""Faust's cache backends (``app.cache``, what ``@cache.view()`` web views store their responses in):
``memory://`` (this process, the default) and, where the app names it, ``redis://host:port/db`` or
``rediscluster://`` (needs the ``redis`` package; refused with the fix when it is missing).

The memory backend keeps at most ``max_entries`` entries (the oldest goes first): cache keys come from
request URLs, which clients choose, so an unbounded cache would grow with every distinct query string."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Protocol
from urllib.parse import urlsplit

from .exceptions import AgentStreamError, ConfigError

__all__ = ["CacheBackend", "CacheUnavailable", "MemoryCacheBackend", "RedisCacheBackend", "backend_for"]


class CacheUnavailable(AgentStreamError):
    """The cache cannot be reached now (a view then runs uncached, as in Faust)."""


class CacheBackend(Protocol):
    """What a cache backend offers (Faust's ``CacheBackendT``)."""

    Unavailable: type[BaseException]

    async def get(self, key: str) -> bytes | None: ...

    async def set(self, key: str, value: bytes, timeout: float | None = None) -> None: ...

    async def delete(self, key: str) -> None: ...


class MemoryCacheBackend:
    """``memory://``: entries in this process, each expiring ``timeout`` seconds after it was set."""

    Unavailable: type[BaseException] = CacheUnavailable

    def __init__(self, url: str = "memory://", *, max_entries: int = 10_000) -> None:
        self.url = url
        self.max_entries = max_entries
        self._data: OrderedDict[str, tuple[bytes, float | None]] = OrderedDict()

    async def get(self, key: str) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        value, expires = entry
        if expires is not None and time.monotonic() >= expires:
            del self._data[key]
            return None
        return value

    async def set(self, key: str, value: bytes, timeout: float | None = None) -> None:
        self._data.pop(key, None)
        self._data[key] = (bytes(value), None if timeout is None else time.monotonic() + timeout)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<MemoryCacheBackend entries={len(self._data)}>"


class RedisCacheBackend:
    """``redis://host:port/db`` (``rediscluster://`` for a cluster), through ``redis.asyncio``;
    connection errors make the cache unavailable (the view runs uncached)."""

    def __init__(self, url: str, **options: Any) -> None:
        try:
            import redis.asyncio as aredis  # type: ignore[import-not-found]
            import redis.exceptions as rerrors  # type: ignore[import-not-found]
        except ImportError:
            raise ConfigError(
                "cache", f"{url!r} needs the redis package, which is not installed", "pip install redis"
            ) from None
        self.url = url
        self.Unavailable: type[BaseException] = CacheUnavailable
        self._errors: tuple[type[BaseException], ...] = (rerrors.ConnectionError, rerrors.TimeoutError)
        scheme = urlsplit(url).scheme
        if scheme == "rediscluster":
            self.client: Any = aredis.RedisCluster.from_url(url.replace("rediscluster://", "redis://", 1), **options)
        else:
            self.client = aredis.Redis.from_url(url, **options)

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self.client.get(key)
        except self._errors as exc:
            raise CacheUnavailable(f"redis cache {self.url}: {exc}") from exc
        return value.encode() if isinstance(value, str) else value

    async def set(self, key: str, value: bytes, timeout: float | None = None) -> None:
        try:
            if timeout is None:
                await self.client.set(key, value)
            else:
                await self.client.setex(key, max(1, int(timeout)), value)
        except self._errors as exc:
            raise CacheUnavailable(f"redis cache {self.url}: {exc}") from exc

    async def delete(self, key: str) -> None:
        try:
            await self.client.delete(key)
        except self._errors as exc:
            raise CacheUnavailable(f"redis cache {self.url}: {exc}") from exc

    async def close(self) -> None:
        await self.client.aclose()


def backend_for(url: Any) -> CacheBackend:
    """The backend a cache URL names: ``memory://`` or ``redis://`` / ``rediscluster://``; any
    other scheme is refused naming the ones there are."""
    text = str(url or "memory://")
    scheme = urlsplit(text).scheme
    if scheme == "memory":
        return MemoryCacheBackend(text)
    if scheme in ("redis", "rediscluster"):
        return RedisCacheBackend(text)
    raise ConfigError(
        "cache", f"unknown cache backend {text!r}", "use memory://, redis://host:port/db or rediscluster://"
    )
