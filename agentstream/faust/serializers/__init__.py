"""``faust.serializers``: Faust's codec API (``from faust.serializers import codecs``), ``Codec``,
``Schema`` and ``Registry``."""

from __future__ import annotations

from . import codecs
from .codecs import Codec
from .registry import Registry
from .schemas import Schema

__all__ = ["Codec", "Registry", "Schema", "codecs"]
