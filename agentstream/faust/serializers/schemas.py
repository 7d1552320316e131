"""``faust.serializers.schemas``: Faust's ``Schema`` (agentstream's, :mod:`agentstream.schemas`)."""

from agentstream.schemas import Schema

__all__ = ["Schema"]
