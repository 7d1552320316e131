"""The package's sources as the build hashes them: one rule for setup.py, which writes their
hashes into ``_compiled.json``, and :mod:`agentstream.compiled`, which compares them at import,
so the two never disagree on which files count (a file counted by one side only would make
every build look stale).

Standard library only and no side effects: setup.py loads this file by its path, before the
package's dependencies are installed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["package_sources", "sha256"]


def package_sources(package_dir: Path) -> list[Path]:
    """The package's modules (not editor lock files or other dot-files that end in .py)."""
    return sorted(p for p in package_dir.rglob("*.py") if not p.name.startswith(".") and p.is_file())


def sha256(path: Path) -> str | None:
    """The file's sha256; None when it cannot be read (gone)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
