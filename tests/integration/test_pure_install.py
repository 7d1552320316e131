"""``pip install`` on a machine without a C compiler: a working pure-Python install.

The package is built as pip builds it (an isolated build environment with mypy, from a copy of
the tracked sources) with ``CC=false``, so every C compile fails the way it does where no
compiler exists (setup.py probes the compiler first and skips mypyc's analysis). The wheel must then hold no extension module, import as the pure build with one
warning line that says how to silence it (and none with ``AGENTSTREAM_PURE=1``), and run an app.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration

APP = """
import asyncio, agentstream
from agentstream.testing import AppHarness

app = agentstream.App("pure-install", broker="memory://", topic_partitions=1)
words = app.topic("words", value_type=str)
counts = app.Table("counts", default=int)

@app.agent(words)
async def count(stream):
    async for word in stream:
        counts[word] += 1

async def main():
    async with AppHarness(app) as h:
        for w in ["a", "b", "a"]:
            await h.send("words", w, key=w)
        await h.wait_idle()
        print(agentstream.compiled.BUILD, sorted(h.table("counts").items()))

asyncio.run(main())
"""


def _tracked_copy(dest: Path) -> Path:
    """The tracked files of the work tree (what a clone holds; no venv, no built extensions)."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True).stdout.split(
        b"\0"
    )
    for name in filter(None, files):
        source = ROOT / name.decode()
        if source.is_file():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def test_a_build_without_a_c_compiler_installs_and_runs_pure_python(tmp_path: Path) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the project's git checkout to copy its tracked sources")
    source = _tracked_copy(tmp_path / "src")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSTREAM_PURE", "AGENTSTREAM_COMPILE", "PYTHONPATH")}
    env["CC"] = "false"  # every C compile fails, as where no compiler is installed
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("agentstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd"))], "an extension module in a build without a compiler"
    assert "agentstream/streams.py" in names and "agentstream/_compiled.json" in names

    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    run_env = {**env, "PYTHONPATH": str(site)}  # the installed wheel, ahead of the dev checkout
    (tmp_path / "app.py").write_text(APP)
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "app.py")],
        env=run_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "pure [('a', 2), ('b', 1)]"
    warning = [line for line in ran.stderr.splitlines() if line.startswith("agentstream:")]
    assert len(warning) == 1 and "not compiled" in warning[0] and "AGENTSTREAM_PURE=1" in warning[0], ran.stderr

    quiet = subprocess.run(
        [sys.executable, "-c", "import agentstream, agentstream.compiled as c; print(c.BUILD, agentstream.__file__)"],
        env={**run_env, "AGENTSTREAM_PURE": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    build, path = quiet.stdout.split()
    assert build == "pure" and Path(path).is_relative_to(site)


def test_a_build_asked_to_be_pure_imports_without_a_warning(tmp_path: Path) -> None:
    """AGENTSTREAM_COMPILE=0: the pure build was chosen, so importing it says nothing (only a build
    that meant to compile and could not warns)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the project's git checkout to copy its tracked sources")
    source = _tracked_copy(tmp_path / "src")
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTSTREAM_PURE", "PYTHONPATH")}
    env["AGENTSTREAM_COMPILE"] = "0"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("agentstream-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "agentstream/_compiled.json" in names and not [n for n in names if n.endswith((".so", ".pyd"))]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a wheel of pure files installs as an unpacked copy
    ran = subprocess.run(
        [sys.executable, "-c", "import agentstream, agentstream.compiled as c; print(c.BUILD, agentstream.__file__)"],
        env={**env, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
    build, path = ran.stdout.split()
    assert build == "pure" and Path(path).is_relative_to(site)
