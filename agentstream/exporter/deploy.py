"""Ship this driver's agentstream and the app's module to a cluster's executors, as ``--py-files`` does.

The executors of a Spark cluster do not share the driver's ``sys.path``: the changelog source runs
there and must import agentstream (and, for codecs the app defines, the app's module). The code that
changes with every deploy (agentstream's own version, which must match the driver's decode specs, and
the app) travels with the job as one zip of ``.py`` sources, added with ``SparkContext.addPyFile``
before the source is registered; the third-party dependencies (aiokafka, orjson, pyarrow, pandas),
which change rarely and include compiled code a zip cannot carry, belong in the executors' Python
(the cluster image), chosen with ``spark.pyspark.python``. See docs/spark.md, "Code on the executors".

Compiled extension modules are left out (zipimport cannot load them): the executors run the pure
Python build, which passes the same tests.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .offsets import ExportError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["code_zip", "ship_code", "module_roots"]

SKIP_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache"}


def module_roots(modules: Iterable[str]) -> list[Path]:
    """The file or package directory to ship for each module: its top-level package (so
    ``apps.wordcount`` ships ``apps/``), or the module file itself when it is not in a package."""
    roots: list[Path] = []
    for name in modules:
        top = name.split(".", 1)[0]
        try:
            module = sys.modules.get(top) or importlib.import_module(top)
        except ImportError as exc:
            raise ExportError(f"cannot ship module {name!r} to the executors: {exc}") from exc
        file = getattr(module, "__file__", None)
        if file is None:
            raise ExportError(f"cannot ship module {name!r} to the executors: {top!r} has no source file")
        path = Path(file).resolve()
        root = path.parent if path.name == "__init__.py" else path
        if root not in roots:
            roots.append(root)
    return roots


def _entries(root: Path) -> list[tuple[Path, str]]:
    """(file, name in the zip) of the Python sources under ``root`` (a package dir or one file)."""
    if root.is_file():
        return [(root, root.name)]
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root.parent)
        if path.is_file() and path.suffix in (".py", ".typed") and not SKIP_DIRS.intersection(rel.parts):
            out.append((path, rel.as_posix()))
    return out


def code_zip(modules: Iterable[str], directory: Path | None = None) -> Path:
    """A zip of agentstream's sources plus those of ``modules`` (their top-level packages).

    Named by its content's hash, so the same code gives the same file name (Spark refuses to add
    one name twice with different content) and a changed app gives a new one."""
    roots = module_roots(["agentstream", *modules])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        seen: set[str] = set()
        for root in roots:
            for path, name in _entries(root):
                if name not in seen:
                    seen.add(name)
                    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # same code, same bytes
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    target_dir = directory or Path(tempfile.gettempdir())
    target = target_dir / f"agentstream-code-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


def ship_code(spark: SparkSession, modules: Iterable[str] = ()) -> Path:
    """Add the zip of :func:`code_zip` to ``spark``'s Python path on every executor (once per
    session). Call it before the changelog source is registered: a registered source keeps the
    Python files the context had then."""
    shipped: Path | None = getattr(spark, "_agentstream_code", None)
    if shipped is not None:
        return shipped
    path = code_zip(modules)
    spark.sparkContext.addPyFile(str(path))
    spark._agentstream_code = path  # type: ignore[attr-defined]
    return path
