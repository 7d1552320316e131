"""``faust.serializers.registry``: Faust's ``Registry`` (agentstream's, :mod:`agentstream.serializers`)."""

from agentstream.serializers import Registry

__all__ = ["Registry"]
