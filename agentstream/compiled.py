"""Which build of the hot path runs: the modules compiled with mypyc, or their pure-Python source.

The package's ``__init__`` imports this module before anything else. The build (setup.py's
``COMPILED`` list, ``make compile``) compiles the modules one record passes through and writes
``_compiled.json``: the compiled modules and every package source's hash. Here, before any of
them is imported:

* ``AGENTSTREAM_PURE=1`` runs the pure-Python source of every compiled module (a debugger, a
  line profiler or coverage then sees Python frames there);
* a build made from other sources (any package ``.py`` edited after ``make compile``: compiled
  code also depends on the types of the modules it imports), or a partial one (a module that
  failed to compile, an extension the build does not list), would run stale or untested code:
  then *all* compiled modules run as pure Python, with a warning that says how to rebuild. All,
  because compiled modules call each other's native classes directly.

:data:`BUILD` says which one runs (``"compiled"`` or ``"pure"``); the worker logs it at start
and ``make bench`` reports it.
"""

from __future__ import annotations

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

from .build_sources import package_sources, sha256

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


class Manifest:
    """What the build wrote (setup.py ``BuildWithManifest``): the modules it compiles, mypyc's
    shared library, the extension suffix of the Python it built for, each extension file it made
    (path -> sha256) and the sha256 of every package source at build time."""

    def __init__(
        self, compiled: list[str], shared: str, suffix: str, extensions: dict[str, str], sources: dict[str, str]
    ) -> None:
        self.compiled = compiled
        self.shared = shared
        self.suffix = suffix
        self.extensions = extensions
        self.sources = sources

    @property
    def for_this_python(self) -> bool:
        """Built for this interpreter (another Python may have rewritten it in a shared tree)."""
        return self.suffix == importlib.machinery.EXTENSION_SUFFIXES[0]

    @classmethod
    def read(cls, package_dir: Path) -> Manifest | None:
        path = package_dir / MANIFEST
        try:
            data = json.loads(path.read_text())
            return cls(
                [str(m) for m in data["compiled"]],
                str(data["shared"]),
                str(data["suffix"]),
                {str(k): str(v) for k, v in data["extensions"].items()},
                {str(k): str(v) for k, v in data["sources"].items()},
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            warnings.warn(
                f"agentstream: {path} is unreadable ({exc!r}); running pure Python", RuntimeWarning, stacklevel=4
            )
            return None


def _extensions(package_dir: Path) -> dict[str, Path]:
    """module -> extension file, for the files under ``package_dir`` this interpreter loads
    (``x.cpython-311-….so`` seen by another Python version is not one)."""
    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)  # longest first
    found = {}
    for path in package_dir.rglob("*.*"):
        suffix = next((x for x in suffixes if path.name.endswith(x)), None)
        if suffix is not None and "." not in path.name[: -len(suffix)]:
            rel = path.relative_to(package_dir.parent)
            found[".".join((*rel.parts[:-1], path.name[: -len(suffix)]))] = path
    return found


def _names(modules: list[str], most: int = 4) -> str:
    return ", ".join(modules[:most]) + (f" and {len(modules) - most} more" if len(modules) > most else "")


def _problems(package_dir: Path, manifest: Manifest | None, present: dict[str, Path]) -> list[str]:
    """Why the extensions in ``present`` are not the build ``manifest`` describes for these sources."""
    root = package_dir.parent
    built = manifest.extensions if manifest is not None and manifest.for_this_python else {}
    problems = []
    # extension files the build did not make (a module taken off the list, a file left by an older
    # or failed build, no manifest at all): their source is unknown
    foreign = sorted(m for m, path in present.items() if built.get(path.relative_to(root).as_posix()) != sha256(path))
    if foreign:
        problems.append(f"{_names(foreign)} not built by this build")
    if manifest is None or not manifest.for_this_python:
        return problems
    missing = sorted({*manifest.compiled, manifest.shared} - set(present))
    if missing:  # a module that failed to compile: a half-compiled set is not a build anyone tested
        problems.append(f"{_names(missing)} missing from the build")
    now = {p.relative_to(root).as_posix() for p in package_sources(package_dir)}
    if now & set(manifest.sources):  # (a distribution shipped without sources: nothing to compare)
        changed = sorted(
            [path for path, digest in manifest.sources.items() if sha256(root / path) != digest]
            + list(now - set(manifest.sources))  # added since
        )
        if changed:
            problems.append(f"{_names(changed)} changed since the hot path was compiled")
    return problems


def choose(package_dir: Path, environ: Mapping[str, str]) -> tuple[str, PureSource | None, str]:
    """``(build, finder, warning)`` for the package in ``package_dir``: ``"compiled"``, or ``"pure"``
    with the finder to put first on ``sys.meta_path`` when compiled modules are there but must not
    run (``AGENTSTREAM_PURE``, or a build that is stale or partial: then ``warning`` says so)."""
    root = package_dir.parent
    manifest = Manifest.read(package_dir)
    present = _extensions(package_dir)
    chosen_pure = environ.get("AGENTSTREAM_PURE", "") not in ("", "0")  # asked for: nothing to warn of
    if not present:
        failed = manifest is not None and manifest.for_this_python and bool(manifest.compiled) and not chosen_pure
        # nothing built here (or for this interpreter); or a build for this Python whose every
        # extension failed (a best-effort pip install without a C compiler): say so once
        return (
            "pure",
            None,
            (
                "agentstream: the hot path was not compiled when this package was built (see the build log); "
                "running pure Python (set AGENTSTREAM_PURE=1 to choose it without this warning)"
                if failed
                else ""
            ),
        )
    finder = PureSource({m: _source(root, m) for m in sorted(present) if _source(root, m).exists()})
    if chosen_pure:
        return "pure", finder, ""
    problems = _problems(package_dir, manifest, present)
    if not problems:
        return "compiled", None, ""
    return (
        "pure",
        finder,
        f"agentstream: {'; '.join(problems)}; running every compiled module as pure Python (rebuild with "
        "`make compile`, or set AGENTSTREAM_PURE=1 to run pure Python without this warning)",
    )


def _apply() -> str:
    build, finder, warning = choose(Path(__file__).resolve().parent, os.environ)
    if finder is not None:
        already = sorted(m for m in finder.modules if m in sys.modules)
        if already:  # imported before the package (impossible through `import agentstream...`)
            raise ImportError(f"agentstream.compiled must be imported before {already}")
        sys.meta_path.insert(0, finder)
    if warning:
        # one line on stderr, once per process (this module runs once): a warning's two-line
        # format with the import line under it says nothing more
        print(warning, file=sys.stderr)
    return build


BUILD: str = _apply()
"""``"compiled"``: the hot path runs as mypyc-compiled code; ``"pure"``: as Python."""


def compiled_modules() -> list[str]:
    """The agentstream modules imported so far that run compiled (none when BUILD is ``"pure"``)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.startswith("agentstream.")
        and not name.endswith("__mypyc")  # mypyc's shared library, imported by the compiled modules
        and (getattr(module, "__file__", None) or "").endswith(suffixes)
    )
