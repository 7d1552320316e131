"""Faust's ``autodiscover`` setting: import the modules that declare agents, tables and pages.

``autodiscover=True`` imports every submodule of the package the app is declared in (``origin``
when given); a list (or a callable returning one) names modules/packages to import, packages with
all their submodules. Done by the worker (and CLI) before the topology is built."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["autodiscover_modules", "import_with_submodules"]


def import_with_submodules(name: str) -> list[str]:
    """Import ``name`` and, if it is a package, every module under it; returns the names imported."""
    module = importlib.import_module(name)
    done = [name]
    path = getattr(module, "__path__", None)
    if path is not None:
        for info in pkgutil.walk_packages(path, prefix=f"{name}."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue
            importlib.import_module(info.name)
            done.append(info.name)
    return done


def _origin(app: Any) -> str | None:
    origin = app.settings.extra.get("origin")
    if origin:
        return str(origin)
    module = getattr(app, "_declared_in", None)
    if not module or module == "__main__":
        return None
    return str(module).rsplit(".", 1)[0] if "." in str(module) else str(module)


def autodiscover_modules(app: Any) -> list[str]:
    """Import what the app's ``autodiscover`` setting lists (nothing when it is unset or false)."""
    setting = app.settings.extra.get("autodiscover")
    if not setting:
        return []
    names: Iterable[str]
    if setting is True:
        origin = _origin(app)
        if origin is None:
            from .exceptions import ConfigError

            raise ConfigError(
                "autodiscover",
                "autodiscover=True needs to know the app's package",
                "pass origin='mypackage' to App(...), or list the modules: autodiscover=['pkg.agents']",
            )
        names = [origin]
    elif callable(setting):
        names = list(setting())
    else:
        names = [setting] if isinstance(setting, str) else list(setting)
    imported: list[str] = []
    for name in names:
        imported.extend(import_with_submodules(name))
    return [n for n in imported if n in sys.modules]
