"""``faust.web.cache.backends``: the backends by URL (``memory://``, ``redis://``, ``rediscluster://``)."""

from agentstream.cache import MemoryCacheBackend, RedisCacheBackend, backend_for

__all__ = ["MemoryCacheBackend", "RedisCacheBackend", "backend_for", "by_url"]


def by_url(url: str) -> type:
    """The backend class a URL names (Faust's ``backends.by_url``)."""
    return type(backend_for(url))
