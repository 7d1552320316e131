"""``faust.serializers``: codecs (``from faust.serializers import codecs``)."""

from agentstream.serializers import codecs

__all__ = ["codecs"]
