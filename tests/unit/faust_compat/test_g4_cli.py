"""Issue 28, G4: ``faust.cli.AppCommand``/``Command`` and ``call_command``, as faust-streaming runs them.

One app module with the three ways Faust adds a command (a class, ``@app.command(base=...)``, a plain
``@app.command()``) runs under agentstream in-process (``call_command``) and, when the Faust
virtualenv exists, under faust-streaming's own ``faust`` command; both print what Faust printed.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from agentstream.exceptions import AgentStreamError
from agentstream.faust.cli import AppCommand, Command, argument, call_command, option
from tests.faust_takeover.faust_env import faust_python

APP = '''
import {faust} as faust
from {faust}.cli import AppCommand, option

app = faust.App("g4cli", broker="memory://")


class My_Report(AppCommand):
    """Print a report."""

    options = [option("--count", type=int, default=2, help="how many")]

    async def run(self, count: int) -> None:
        self.say(f"report count={{count}} app={{self.app.conf.id}} json={{self.json}}")


class Base(AppCommand):
    abstract = True

    def banner(self) -> str:
        return "BASE"


@app.command(option("--name", default="x"), base=Base)
async def hello(self, name: str) -> None:
    self.say(f"{{self.banner()}} hello {{name}} {{type(self).__name__}} {{type(self).__mro__[1].__name__}}")


@app.command()
async def noself() -> None:
    print("noself ran")
'''

RUNS = {
    ("my-report", "--count", "5"): "report count=5 app=g4cli json=False\n",
    ("hello", "--name", "bob"): "BASE hello bob hello Base\n",
    ("noself",): "noself ran\n",
}


@pytest.fixture(scope="module")
def app_module(tmp_path_factory: pytest.TempPathFactory) -> Any:
    where = tmp_path_factory.mktemp("g4cli")
    (where / "g4_cli_app.py").write_text(APP.format(faust="agentstream.faust"))
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("g4_cli_app")
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("g4_cli_app", None)


@pytest.mark.parametrize("argv", sorted(RUNS))
def test_commands_print_what_faust_prints(app_module: Any, argv: tuple[str, ...]) -> None:
    code, out, err = call_command(argv[0], list(argv[1:]), app=app_module.app)
    assert (code, out.getvalue()) == (0, RUNS[argv]), err.getvalue()


def test_class_commands_are_listed_with_their_help(app_module: Any) -> None:
    code, out, _ = call_command("--help", app=app_module.app)
    listing = out.getvalue()
    assert code == 0 and "my-report" in listing and "Print a report." in listing and "hello" in listing
    assert "  base " not in listing  # an abstract base adds no command


def test_base_subclass_is_a_class_of_the_base(app_module: Any) -> None:
    assert issubclass(app_module.hello, app_module.Base) and issubclass(app_module.Base, AppCommand)


def test_faust_prints_the_same(tmp_path: Path) -> None:
    """The oracle: faust-streaming's own CLI prints RUNS (skipped without its virtualenv)."""
    py = faust_python()
    if not py.exists():
        pytest.skip("the Faust virtualenv is not built (make faust-venv)")
    (tmp_path / "g4_cli_app.py").write_text(APP.format(faust="faust"))
    for argv, expected in RUNS.items():
        done = subprocess.run(
            [str(py), "-W", "ignore", "-m", "faust", "-A", "g4_cli_app", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert (done.returncode, done.stdout) == (0, expected), done.stderr[-2000:]


def test_command_without_app_and_its_output_helpers() -> None:
    class Table_Dump(Command):
        """Dump rows."""

        options = [argument("what"), option("--as-json", is_flag=True)]

        async def run(self, what: str, as_json: bool) -> int:
            self.json = as_json
            self.say(self.tabulate([("a", 1), ("bb", 22)], headers=["k", "v"], title=what))
            self.carp("hidden unless debug")
            return 3

    code, out, _ = call_command("table-dump", ["rows"])
    assert code == 3 and out.getvalue() == "rows\nk   v\na   1\nbb  22\n"
    code, out, _ = call_command("table-dump", ["rows", "--as-json"])
    assert out.getvalue() == '[{"k": "a", "v": 1}, {"k": "bb", "v": 22}]\n'


def test_an_app_command_needs_an_app() -> None:
    class Needs_App(AppCommand):
        async def run(self) -> None:
            raise AssertionError("not reached")

    code, _, err = call_command("needs-app")
    assert code == 2 and "no app given" in err.getvalue()


def test_usage_errors_are_clicks() -> None:
    assert Command.UsageError is click.UsageError
    with pytest.raises(AgentStreamError):
        AppCommand()  # no -A app and no app= given
