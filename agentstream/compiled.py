"""Which build of the hot path runs: the modules compiled with mypyc, or their pure-Python source.

The package's ``__init__`` imports this module before anything else. The build (setup.py's
``COMPILED`` list, ``make compile``) compiles the modules one record passes through and writes
``_compiled.json``: each compiled module's source hash. Here, before any of them is imported:

* ``AGENTSTREAM_PURE=1`` runs the pure-Python source of every compiled module (a debugger, a
  line profiler or coverage then sees Python frames there);
* a compiled module whose ``.py`` changed since the build (a checkout edited after ``make
  compile``) would run stale code: then *all* of them run as pure Python, with a warning that
  says how to rebuild. All, because compiled modules call each other's native classes directly:
  a half-compiled set is not a build anyone tested.

:data:`BUILD` says which one runs (``"compiled"`` or ``"pure"``); the worker logs it at start
and ``make bench`` reports it.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["BUILD", "choose", "compiled_modules"]

MANIFEST = "_compiled.json"


class PureSource(importlib.abc.MetaPathFinder):
    """Finds the listed modules' ``.py`` files ahead of their compiled extension modules."""

    def __init__(self, modules: Mapping[str, Path]) -> None:
        self.modules = dict(modules)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.modules.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def _source(root: Path, module: str) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _manifest(package_dir: Path) -> dict[str, str]:
    path = package_dir / MANIFEST
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.warn(f"agentstream: {path} is unreadable ({exc}); running pure Python", RuntimeWarning, stacklevel=3)
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _has_extension(source: Path) -> bool:
    """A compiled extension module sits beside ``source`` (the build ran in this tree)."""
    return any(source.with_suffix(suffix).exists() for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def _extensions(package_dir: Path) -> set[str]:
    """The modules under ``package_dir`` that have a compiled extension file."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)  # longest first
    found = set()
    for path in package_dir.rglob("*.*"):
        suffix = next((x for x in suffixes if path.name.endswith(x)), None)
        if suffix is not None:
            rel = path.relative_to(package_dir.parent)
            found.add(".".join((*rel.parts[:-1], path.name[: -len(suffix)])))
    return found


def choose(package_dir: Path, environ: Mapping[str, str]) -> tuple[str, PureSource | None, str]:
    """``(build, finder, warning)`` for the package in ``package_dir``: ``"compiled"``, or ``"pure"``
    with the finder to put first on ``sys.meta_path`` when compiled modules are there but must not
    run (``AGENTSTREAM_PURE``, or a source changed since the build: then ``warning`` says so)."""
    root = package_dir.parent
    manifest = _manifest(package_dir)
    built = {m: h for m, h in manifest.items() if _has_extension(_source(root, m))}
    # compiled modules the manifest does not list (a module taken off the build's list, or built
    # by hand): their source is unknown, so they count as stale
    unlisted = sorted(_extensions(package_dir) - set(manifest))
    if not built and not unlisted:
        return "pure", None, ""
    finder = PureSource({m: _source(root, m) for m in [*built, *unlisted]})
    if environ.get("AGENTSTREAM_PURE", "") not in ("", "0"):
        return "pure", finder, ""
    stale = list(unlisted)
    for module, digest in built.items():
        try:
            now = hashlib.sha256(_source(root, module).read_bytes()).hexdigest()
        except OSError:
            continue  # no source beside it (a wheel may ship without): nothing to compare
        if now != digest:
            stale.append(module)
    if not stale:
        return "compiled", None, ""
    return (
        "pure",
        finder,
        f"agentstream: {', '.join(sorted(stale))} changed since the hot path was compiled; running every "
        "compiled module as pure Python (rebuild with `make compile`, or set AGENTSTREAM_PURE=1 to run "
        "pure Python without this warning)",
    )


def _apply() -> str:
    build, finder, warning = choose(Path(__file__).resolve().parent, os.environ)
    if finder is not None:
        already = sorted(m for m in finder.modules if m in sys.modules)
        if already:  # imported before the package (impossible through `import agentstream...`)
            raise ImportError(f"agentstream.compiled must be imported before {already}")
        sys.meta_path.insert(0, finder)
    if warning:
        warnings.warn(warning, RuntimeWarning, stacklevel=3)
    return build


BUILD: str = _apply()
"""``"compiled"``: the hot path runs as mypyc-compiled code; ``"pure"``: as Python."""


def compiled_modules() -> list[str]:
    """The agentstream modules imported so far that run compiled (none when BUILD is ``"pure"``)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("agentstream.") and (getattr(module, "__file__", None) or "").endswith(suffixes)
    )
