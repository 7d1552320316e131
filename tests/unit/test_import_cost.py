"""``import agentstream`` loads what declarations need and nothing more: the web layer (aiohttp),
the command line (click), the test harness and its memory broker, the worker runtime and the Faust
compat package load when they are used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "aiohttp",
    "click",
    "agentstream.web",
    "agentstream.cli",
    "agentstream.commands",
    "agentstream.testing",
    "agentstream.agents.test_context",
    "agentstream.transport.memory",
    "agentstream.worker",
    "agentstream.faust",
    "agentstream.exporter",
]


def _loaded(code: str) -> list[str]:
    probe = f"{code}; import sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return list(json.loads(out.stdout.splitlines()[-1]))


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_import_agentstream_loads_no_shell_runtime_or_compat_module() -> None:
    assert _heavy(_loaded("import agentstream")) == []


def test_declaring_an_app_loads_none_of_them_either() -> None:
    code = (
        "import agentstream; app = agentstream.App('x', broker='memory://'); t = app.topic('t');"
        " tbl = app.Table('c', default=int).tumbling(60);"
        " agent = app.agent(t)(lambda stream: stream)"
    )
    assert _heavy(_loaded(code)) == []


def test_what_is_used_loads_on_first_use() -> None:
    loaded = _loaded("import agentstream; agentstream.Worker; agentstream.testing; agentstream.StreamT")
    assert {"agentstream.worker.worker", "agentstream.testing", "agentstream.faust"} <= set(loaded)
    assert "aiohttp" not in loaded  # the worker runs without the web server until one is served
