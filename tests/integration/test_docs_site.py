"""The documentation site builds with ``mkdocs build --strict`` and its front page renders in
headless Chromium (screenshot in artifacts/docs-front.png) with the whole navigation."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .conftest import ARTIFACTS
from .test_status_page import _chromium

ROOT = Path(__file__).resolve().parents[2]


def test_docs_site_builds_strict_and_renders() -> None:
    pytest.importorskip("mkdocs", reason="needs the docs extra: pip install 'agentstream[docs]'")
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium not found: `make test` installs it")
    with tempfile.TemporaryDirectory() as site, tempfile.TemporaryDirectory() as profile:
        build = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", site],
            cwd=ROOT,
            env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert build.returncode == 0, build.stderr[-3000:]
        for page in ("configuration", "cli", "testing", "tables-and-windows", "deployment", "spark"):
            assert (Path(site) / page / "index.html").exists(), page
        config = (Path(site) / "configuration" / "index.html").read_text()
        assert "AGENTSTREAM_COMMIT_INTERVAL" in config and "--web-host" in config
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "docs-front.png"
        shot.unlink(missing_ok=True)
        common = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            "--window-size=1280,900",
            "--virtual-time-budget=3000",
        ]
        url = (Path(site) / "index.html").as_uri()
        subprocess.run(
            common + [f"--screenshot={shot}", url],
            check=True,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        dom = subprocess.run(
            common + ["--dump-dom", url], check=True, timeout=120, capture_output=True, text=True
        ).stdout
    assert shot.exists() and shot.stat().st_size > 20_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for title in (
        "Getting started",
        "Agents and streams",
        "Tables and windows",
        "Joins",
        "Testing",
        "Deployment",
        "Configuration",
        "CLI",
        "Spark export",
        "Guarantees",
        "Performance",
        "Migrating from Faust",
    ):
        assert title in dom, title
