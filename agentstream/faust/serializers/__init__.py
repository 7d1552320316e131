"""``faust.serializers``: Faust's codec API (``from faust.serializers import codecs``)."""

from __future__ import annotations

from . import codecs

__all__ = ["codecs"]
