"""agentstream.compiled: the compiled hot path runs only when it was built from the sources beside
it; otherwise (or with AGENTSTREAM_PURE=1) every compiled module runs as pure Python."""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentstream
from agentstream import compiled
from agentstream.compiled import PureSource

EXT = importlib.machinery.EXTENSION_SUFFIXES[0]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(pkg: Path, compiled_modules: list[str], suffix: str = EXT) -> None:
    """What setup.py writes: the compiled modules, the shared library, the Python's extension
    suffix, the extension files it made and every source's hash."""
    root = pkg.parent
    manifest = {
        "compiled": compiled_modules,
        "shared": "fakehot.hotpath__mypyc",
        "suffix": suffix,
        "extensions": {p.relative_to(root).as_posix(): sha(p) for p in pkg.glob(f"*{suffix}")},
        "sources": {p.relative_to(root).as_posix(): sha(p) for p in pkg.rglob("*.py")},
    }
    (pkg / compiled.MANIFEST).write_text(json.dumps(manifest))


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    """A package ``fakehot`` with one module built "compiled": its extension file is garbage, so
    importing it (instead of the source) fails loudly. ``other`` is a module that was not
    compiled; ``hotpath__mypyc`` stands for mypyc's shared library."""
    pkg = tmp_path / "fakehot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hot.py").write_text("WHO = 'source'\n")
    (pkg / "other.py").write_text("KIND = 1\n")
    (pkg / f"hot{EXT}").write_bytes(b"not a shared object: hot")
    (pkg / f"hotpath__mypyc{EXT}").write_bytes(b"not a shared object: shared")
    write_manifest(pkg, ["fakehot.hot"])
    sys.path.insert(0, str(tmp_path))
    try:
        yield pkg
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("fakehot", "fakehot.hot", "fakehot.other", "fakehot.old"):
            sys.modules.pop(name, None)


def stale(package: Path, reason: str) -> PureSource:
    build, finder, warning = compiled.choose(package, {})
    assert build == "pure" and finder is not None, warning
    assert reason in warning and "make compile" in warning, warning
    return finder


def test_a_current_build_runs_compiled(package: Path) -> None:
    assert compiled.choose(package, {}) == ("compiled", None, "")


def test_an_edited_source_runs_every_compiled_module_as_python_with_a_warning(package: Path) -> None:
    (package / "hot.py").write_text("WHO = 'edited source'\n")
    finder = stale(package, "fakehot/hot.py changed since the hot path was compiled")
    sys.meta_path.insert(0, finder)
    try:
        assert importlib.import_module("fakehot.hot").WHO == "edited source"
    finally:
        sys.meta_path.remove(finder)


def test_an_edited_added_or_deleted_module_that_is_not_compiled_makes_the_build_stale_too(package: Path) -> None:
    """Compiled code is built against the types of the modules it imports."""
    (package / "other.py").write_text("KIND = 'now a str'\n")
    stale(package, "fakehot/other.py changed")
    (package / "other.py").write_text("KIND = 1\n")
    assert compiled.choose(package, {})[0] == "compiled"
    (package / "other.py").unlink()
    stale(package, "fakehot/other.py changed")
    (package / "other.py").write_text("KIND = 1\n")
    (package / "new.py").write_text("NEW = 1\n")
    stale(package, "fakehot/new.py changed")
    (package / ".#new.py").symlink_to(package / "gone")  # an editor's lock file: not a module
    (package / "new.py").unlink()
    assert compiled.choose(package, {})[0] == "compiled"


def test_a_distribution_without_sources_runs_compiled(package: Path) -> None:
    for source in package.glob("*.py"):
        source.unlink()
    assert compiled.choose(package, {})[0] == "compiled"


def test_a_partial_build_runs_every_compiled_module_as_python(package: Path) -> None:
    """A module that failed to compile (a best-effort pip install without a C compiler) leaves a
    half-compiled set: not a build anyone tested."""
    (package / "warm.py").write_text("WHO = 'warm source'\n")
    write_manifest(package, ["fakehot.hot", "fakehot.warm"])  # warm listed, never built
    stale(package, "fakehot.warm missing from the build")
    (package / f"hotpath__mypyc{EXT}").unlink()
    write_manifest(package, ["fakehot.hot", "fakehot.warm"])
    stale(package, "fakehot.hotpath__mypyc, fakehot.warm missing from the build")


def test_an_extension_file_of_another_build_is_not_trusted(package: Path) -> None:
    """A failed optional compile leaves the old shared library in place: the manifest lists what
    this build made, by hash, so the old file is refused."""
    (package / f"hotpath__mypyc{EXT}").write_bytes(b"an older build's shared library")
    stale(package, "fakehot.hotpath__mypyc not built by this build")


def test_a_compiled_module_the_build_does_not_list_runs_as_python_too(package: Path) -> None:
    """A module taken off the build's list keeps its old extension file unless deleted: its source
    is unknown, so the build is not trusted."""
    (package / "old.py").write_text("WHO = 'old source'\n")
    write_manifest(package, ["fakehot.hot"])
    (package / f"old{EXT}").write_bytes(b"not a shared object")
    finder = stale(package, "fakehot.old not built by this build")
    sys.meta_path.insert(0, finder)
    try:
        assert importlib.import_module("fakehot.old").WHO == "old source"
        assert importlib.import_module("fakehot.hot").WHO == "source"
    finally:
        sys.meta_path.remove(finder)


def test_an_extension_built_for_another_python_is_not_this_build(package: Path) -> None:
    """``other.cpython-399-….so`` beside the sources (a tree shared by two Pythons) is not loaded
    by this interpreter: it neither counts as compiled nor makes the build stale."""
    (package / "other.cpython-399-x86_64-linux-gnu.so").write_bytes(b"not a shared object")
    assert compiled.choose(package, {}) == ("compiled", None, "")


def test_a_manifest_written_by_another_python_does_not_vouch_for_this_ones_files(package: Path) -> None:
    """Another Python built in the same tree (and rewrote the manifest for its own files): this
    interpreter's extension files are from an earlier build, so they do not run."""
    write_manifest(package, ["fakehot.hot"], suffix=".cpython-399-x86_64-linux-gnu.so")
    stale(package, "not built by this build")


def test_a_build_whose_every_extension_failed_says_so(package: Path) -> None:
    (package / f"hot{EXT}").unlink()
    (package / f"hotpath__mypyc{EXT}").unlink()
    write_manifest(package, ["fakehot.hot"])
    build, finder, warning = compiled.choose(package, {})
    assert (build, finder) == ("pure", None) and "not compiled" in warning
    assert "AGENTSTREAM_PURE=1" in warning  # says how to silence it
    assert compiled.choose(package, {"AGENTSTREAM_PURE": "1"}) == ("pure", None, "")  # chosen: no warning


def test_agentstream_pure_runs_the_source_without_a_warning(package: Path) -> None:
    build, finder, warning = compiled.choose(package, {"AGENTSTREAM_PURE": "1"})
    assert (build, warning) == ("pure", "") and finder is not None
    assert compiled.choose(package, {"AGENTSTREAM_PURE": "0"})[0] == "compiled"


def test_no_build_is_pure_python(package: Path) -> None:
    (package / f"hot{EXT}").unlink()
    (package / f"hotpath__mypyc{EXT}").unlink()
    (package / compiled.MANIFEST).unlink()
    assert compiled.choose(package, {}) == ("pure", None, "")


def test_an_unreadable_manifest_is_said_and_runs_pure(package: Path) -> None:
    (package / compiled.MANIFEST).write_text("{not json")
    with pytest.warns(RuntimeWarning, match="unreadable"):
        build, finder, warning = compiled.choose(package, {})
    assert build == "pure" and finder is not None and "fakehot.hot" in warning  # built, source unknown
    (package / compiled.MANIFEST).write_text(json.dumps({"fakehot.hot": "an older format"}))
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert compiled.choose(package, {})[0] == "pure"


def test_this_run_uses_the_build_in_the_tree() -> None:
    """What the suite tests is what `make compile` built: compiled, unless it was told otherwise."""
    manifest = Path(agentstream.__file__).with_name(compiled.MANIFEST)
    if not manifest.exists() or os.environ.get("AGENTSTREAM_PURE", "") not in ("", "0"):
        assert compiled.BUILD == "pure" and compiled.compiled_modules() == []
        return
    assert compiled.BUILD == "compiled"
    modules = sorted(json.loads(manifest.read_text())["compiled"])
    for name in modules:
        importlib.import_module(name)
    assert compiled.compiled_modules() == modules


def test_agentstream_pure_in_a_fresh_process() -> None:
    code = "import agentstream.compiled as c, agentstream.streams as s; print(c.BUILD, s.__file__.endswith('.py'))"
    env = {**os.environ, "AGENTSTREAM_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["pure", "True"]


def test_agentstream_imports_compiled_from_anywhere(tmp_path: Path) -> None:
    """The installed package (the editable install `make install` makes) imports its compiled
    build from any directory, not only from the repository root: mypyc's shared library is inside
    the package."""
    code = "import agentstream.compiled as c, agentstream.streams; print(c.BUILD, len(c.compiled_modules()))"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AGENTSTREAM_PURE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == compiled.choose(Path(agentstream.__file__).parent, env)[0]


def test_an_unknown_build_mode_is_refused_naming_the_setting_and_the_fix() -> None:
    """setup.py reads AGENTSTREAM_COMPILE before it builds anything: a value it does not know
    (``no``, ``false``) must not silently compile."""
    root = Path(agentstream.__file__).resolve().parent.parent
    env = {**os.environ, "AGENTSTREAM_COMPILE": "no"}
    out = subprocess.run(
        [sys.executable, "setup.py", "--name"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert "AGENTSTREAM_COMPILE='no' is not a build mode" in out.stderr and "Fix:" in out.stderr
    env["AGENTSTREAM_COMPILE"] = "0"
    out = subprocess.run(
        [sys.executable, "setup.py", "--name"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.split()[-1] == "agentstream", out.stderr
