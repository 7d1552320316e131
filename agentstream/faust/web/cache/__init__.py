"""``faust.web.cache``: ``Cache`` (``@cache.view(timeout=...)`` on view methods)."""

from agentstream.web.cache import Cache

__all__ = ["Cache"]
