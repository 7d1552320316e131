"""Faust's ``faust.serializers`` package: ``from agentstream.serializers import codecs``."""

from __future__ import annotations

from . import codecs

__all__ = ["codecs"]
