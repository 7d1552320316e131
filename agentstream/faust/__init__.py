"""``agentstream.faust``: Faust's module layout over agentstream, for ``from faust.X import Y``.

The rewrite a Faust app needs is one word per import line (docs/migrating-from-faust.md):
``import faust`` -> ``import agentstream as faust`` (or ``import agentstream.faust as faust``) and
``from faust.X import Y`` -> ``from agentstream.faust.X import Y``. This package re-exports every
public name of :mod:`agentstream`; its submodules (``types``, ``web``, ``cli``, ``sensors``,
``models.fields``, ``tables``, ``streams``, ``agents``, ``serializers``, ``windows``, ``topics``,
``channels``, ``events``, ``exceptions``, ``app``, ``worker``) hold the names Faust has there.
Nothing in agentstream imports this package: it is the top shell of the compatibility layer.
"""

from __future__ import annotations

import importlib
from typing import Any

import agentstream as _agentstream
from agentstream import *  # noqa: F401,F403  (the re-export is the point of this package)
from agentstream import __all__ as _all
from agentstream._version import __version__  # noqa: F401

__all__ = list(_all)

_SUBMODULES = ("types", "web", "cli", "sensors", "models", "tables", "streams", "agents", "serializers", "windows",
               "topics", "channels", "events", "exceptions", "app", "worker", "utils")


def __getattr__(name: str) -> Any:
    """``faust.web``, ``faust.cli``...: this package's submodule; else agentstream's lazy names."""
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    return getattr(_agentstream, name)
