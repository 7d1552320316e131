"""``faust.utils``: the helpers Faust apps import from it."""

from agentstream.faust_compat import uuid

__all__ = ["uuid"]
