"""The pytest plugin (issue 32): ``app_harness`` and ``agent_context`` fixtures, found through the
``pytest11`` entry point that setup.py declares, in a tiny project run by a pytest subprocess.

The entry point is taken from setup.py and installed for the subprocess as a ``.dist-info`` on its
path (what ``pip install`` writes), so the test does not depend on this checkout being installed.
The fixtures sample of docs/testing.md (which the docs test cannot run: it needs pytest's fixtures)
runs there too.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = "agentstream.testing.pytest_plugin"

CONFTEST = """
import pytest
import agentstream

@pytest.fixture
def app():
    app = agentstream.App("plugin-conftest", broker="memory://", topic_partitions=1)
    numbers = app.topic("numbers", value_type=int)

    @app.agent(numbers)
    async def double(stream):
        async for value in stream:
            yield value * 2

    return app
"""

TEST_STARTUP = """
import sys

RUNTIME = ["agentstream.testing.harness", "agentstream.agents.test_context", "agentstream.transport.memory",
           "agentstream.worker", "agentstream.web", "agentstream.cli"]

def test_loading_the_plugin_imported_no_runtime():
    assert "agentstream.testing.pytest_plugin" in sys.modules
    assert [m for m in sys.modules if any(m == r or m.startswith(r + ".") for r in RUNTIME)] == []
"""

TEST_FIXTURES = """
import agentstream

app = agentstream.App("plugin-module", broker="memory://", topic_partitions=1)
numbers = app.topic("numbers", value_type=int)

@app.agent(numbers)
async def triple(stream):
    async for value in stream:
        yield value * 3

async def test_app_harness_runs_the_given_app_on_virtual_time(app_harness):
    async with app_harness(app, virtual_time=True) as h:
        await h.send("numbers", 2)
        await h.advance(3600)
        assert h.yielded("triple") == [6] and h.now() - 3600 == 1_704_067_200.0

async def test_app_harness_without_an_app_takes_the_app_fixture(app_harness, app):
    async with app_harness(virtual_time=True) as h:
        assert h.app is app
        await h.send("numbers", 5)
        assert h.yielded("double") == [10]

async def test_agent_context_is_the_agents_test_context(agent_context):
    async with agent_context(triple) as ctx:
        await ctx.put(4)
        assert ctx.results == [12]
"""

SUB_CONFTEST = """
import pytest

@pytest.fixture
def app_harness():
    return "the project's own"
"""

TEST_OVERRIDE = """
def test_a_project_fixture_of_the_same_name_wins(app_harness):
    assert app_harness == "the project's own"
"""


def _docs_fixture_sample() -> str:
    text = (ROOT / "docs" / "testing.md").read_text()
    m = re.search(
        r"<!-- no-run:[^>]*test_pytest_plugin\.py[^>]*-->\s*\n```python\n(?P<code>.*?)^```", text, re.S | re.M
    )
    assert m is not None, "docs/testing.md has no fixtures sample marked for this test"
    return m["code"]


def _entry_points() -> dict[str, list[str]]:
    """``entry_points=`` of setup.py's ``setup()`` call, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    raise AssertionError("setup.py declares no entry_points")


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    site = tmp_path / "site"
    info = site / "agentstream_plugin_probe-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentstream-plugin-probe\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[pytest11]\n" + "\n".join(_entry_points()["pytest11"]) + "\n")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    files = {
        "pytest.ini": "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n",
        "conftest.py": CONFTEST,
        "test_a_startup.py": TEST_STARTUP,
        "test_b_fixtures.py": TEST_FIXTURES,
        "test_c_docs.py": _docs_fixture_sample(),
        "sub/conftest.py": SUB_CONFTEST,
        "sub/test_override.py": TEST_OVERRIDE,
    }
    for name, text in files.items():
        (project / name).write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(site)])
    return project, env


def _pytest(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_setup_py_registers_the_plugin_under_its_module_name() -> None:
    assert _entry_points()["pytest11"] == [f"{PLUGIN} = {PLUGIN}"]


def test_the_fixtures_work_through_the_entry_point_and_yield_to_a_projects_own(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    run = _pytest(project, env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "7 passed" in run.stdout, run.stdout


def test_naming_it_with_p_as_well_loads_it_once_and_no_p_turns_it_off(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    both = _pytest(project, env, "-p", PLUGIN, "test_b_fixtures.py")
    assert both.returncode == 0 and "3 passed" in both.stdout, both.stdout + both.stderr
    off = _pytest(project, env, "-p", f"no:{PLUGIN}", "test_b_fixtures.py")
    assert off.returncode != 0 and "fixture 'app_harness' not found" in off.stdout, off.stdout + off.stderr
