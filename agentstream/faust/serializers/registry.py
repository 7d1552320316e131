"""``faust.serializers.registry``: Faust's ``Registry`` (agentstream's, :mod:`agentstream.serializers`)."""

from agentstream.serializer_registry import Registry

__all__ = ["Registry"]
