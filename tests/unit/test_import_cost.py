"""``import agentstream`` stays light: the web layer (aiohttp) loads only when a web server runs."""

from __future__ import annotations

import subprocess
import sys


def test_import_agentstream_does_not_load_aiohttp() -> None:
    code = "import sys, agentstream; print(sorted(m for m in sys.modules if m.split('.')[0] == 'aiohttp' or m.startswith('agentstream.web')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
