"""``faust.web.cache.exceptions``: ``CacheUnavailable``."""

from agentstream.cache import CacheUnavailable

__all__ = ["CacheUnavailable"]
