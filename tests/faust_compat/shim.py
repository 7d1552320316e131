"""``import faust`` answered by ``agentstream.faust`` (and ``faust.X`` by ``agentstream.faust.X``).

The compatibility apps are written against Faust's own import name, unchanged; under agentstream
this finder puts agentstream's compat package in its place, the one-word rewrite the migration
guide describes, done by the import system instead of by hand."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

TARGET = "agentstream.faust"


class _Alias(importlib.abc.Loader):
    def __init__(self, real: str) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.real)

    def exec_module(self, module: ModuleType) -> None:
        """The real module is already executed by its own import."""


class FaustAlias(importlib.abc.MetaPathFinder):
    """Resolves ``faust`` and ``faust.*`` to the same modules under ``agentstream.faust``."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name != "faust" and not name.startswith("faust."):
            return None
        real = TARGET + name[len("faust") :]
        return importlib.machinery.ModuleSpec(name, _Alias(real), is_package=True)


def install() -> None:
    """Make ``import faust`` import agentstream's compat package (idempotent)."""
    if not any(isinstance(f, FaustAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, FaustAlias())
