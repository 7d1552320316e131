"""The ``agentstream`` command on click: version, JSON listings, input errors, a broken app module,
flags generated from the settings, Faust notices and rebalance noise in the log."""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentstream import App
from agentstream.cli import RebalanceNoise, _click_type, cli, main
from agentstream.settings_help import setting_fields


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("cliapp_")]:
        del sys.modules[name]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "agentstream 0.1.0"


@pytest.mark.parametrize("command", ["agents", "tables", "topics", "models"])
def test_listings_print_json(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = "tests.faust_apps.word_count" if command == "models" else "apps.wordcount"
    assert main(["-A", module, command, "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    text = orjson.dumps(doc).decode()
    expected = {"agents": "count_words", "tables": "word_counts", "topics": "sentences", "models": "Word"}[command]
    assert expected in text, text


@pytest.mark.parametrize(
    "command,lines",
    [
        (
            "agents",
            [
                "split_sentences: topics=sentences concurrency=1",
                "count_words: topics=wordcount-words concurrency=1",
            ],
        ),
        (
            "tables",
            [
                "word_counts\tkind=Table\tstore=rocksdb://\tpartitions=4\t"
                "changelog=wordcount-word_counts-changelog\twindow=-"
            ],
        ),
        (
            "topics",
            [
                "sentences\tpartitions=4\ttopic",
                "wordcount-words\tpartitions=4\tinternal",
                "wordcount-word_counts-changelog\tpartitions=4\tchangelog",
            ],
        ),
    ],
)
def test_listings_print_a_line_per_row(command: str, lines: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-A", "apps.wordcount", command]) == 0
    out = capsys.readouterr().out.splitlines()
    assert all(line in out for line in lines), out


@pytest.mark.parametrize("command,empty", [("tables", "(no tables)"), ("topics", None)])
def test_empty_listings_say_so(command: str, empty: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    app = App("cli-empty", broker="memory://")
    assert main([command], app=app) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ([empty] if empty else [])
    assert main([command, "--json"], app=app) == 0
    assert orjson.loads(capsys.readouterr().out) == []


def test_invalid_json_is_named_with_its_column(capsys: pytest.CaptureFixture[str]) -> None:
    app = App("cli-json", broker="memory://")
    assert main(["send", "orders", '{"id":"o4"'], app=app) == 2
    err = capsys.readouterr().err
    assert "invalid JSON at column 11" in err, err
    assert "Traceback" not in err


def test_plain_text_values_are_still_text() -> None:
    from agentstream.cli import parse_value

    assert parse_value("hello world") == "hello world"
    assert parse_value("3") == 3 and parse_value('{"a": [1]}') == {"a": [1]} and parse_value('"x"') == "x"


@pytest.mark.parametrize(
    "body,where,error",
    [
        (
            "import agentstream\napp = agentstream.App('x', broker='memory://')\ndef broken(:\n    pass\n",
            3,
            "SyntaxError",
        ),
        ("import agentstream\n\napp = agentstream.App('x', broker='memory://')\nn = 1 / 0\n", 4, "ZeroDivisionError"),
        (
            "import agentstream\napp = agentstream.App('x', broker='memory://', commit_interval=-1)\n",
            2,
            "commit_interval",
        ),
    ],
)
def test_a_broken_app_module_is_one_line_and_exit_code_2(
    app_dir: Path, body: str, where: int, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"cliapp_{error.lower()}"
    (app_dir / f"{name}.py").write_text(body)
    assert main(["-A", name, "agents"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"{name}.py:{where}:" in err and error in err, err


def test_unknown_module_names_the_module(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-A", "no_such_module_here", "agents"]) == 2
    assert "cannot import 'no_such_module_here'" in capsys.readouterr().err


def test_every_setting_has_a_worker_flag_with_help() -> None:
    worker = cli.commands["worker"]
    flags = {p.name: p for p in worker.params}
    for f, tp in setting_fields():
        if f.name in ("id", "extra") or _click_type(tp) is None:
            continue  # objects (credentials, an SSLContext) are App arguments only; the reference says so
        assert f.name in flags, f"no worker flag for setting {f.name}"
    for p in worker.params:
        assert getattr(p, "help", None), f"worker option {p.name} has no help"
    for name, cmd in cli.commands.items():
        for p in cmd.params:
            if p.param_type_name == "option":
                assert getattr(p, "help", None), f"{name}: option {p.name} has no help"


def test_worker_flags_old_and_faust_spellings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = App("cli-flags", broker="memory://")
    seen: dict[str, Any] = {}

    class FakeWorker:
        def __init__(self, app: App, **kwargs: Any) -> None:
            seen["settings"] = app.settings

        async def run(self) -> int:
            return 0

    monkeypatch.setattr("agentstream.worker.worker.Worker", FakeWorker)
    monkeypatch.setattr("agentstream.web.runner.serve", lambda worker: None)  # no web server beside the fake
    monkeypatch.setattr("gc.freeze", lambda: None)
    assert (
        main(
            [
                "worker",
                "--datadir",
                str(tmp_path / "d"),
                "--web-bind",
                "127.0.0.9",
                "--web-port",
                "7001",
                "--commit-interval",
                "0.25",
                "--no-web-enabled",
                "--table-standby-replicas",
                "1",
            ],
            app=app,
        )
        == 0
    )
    s = seen["settings"]
    assert (s.data_dir, s.web_bind, s.web_port, s.commit_interval, s.web_enabled, s.table_standby_replicas) == (
        tmp_path / "d",
        "127.0.0.9",
        7001,
        0.25,
        False,
        1,
    )
    assert main(["worker", "--data-dir", str(tmp_path / "e"), "--web-host", "127.0.0.8", "--without-web"], app=app) == 0
    assert (seen["settings"].data_dir, seen["settings"].web_host, seen["settings"].web_enabled) == (
        tmp_path / "e",
        "127.0.0.8",
        False,
    )


def test_a_bad_flag_value_names_the_setting(capsys: pytest.CaptureFixture[str]) -> None:
    app = App("cli-bad", broker="memory://")
    assert main(["worker", "--commit-interval", "0"], app=app) == 2
    assert "commit_interval" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["send", "worker"])
def test_faust_notices_are_printed_by_the_worker_only(
    command: str, app_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class FakeWorker:
        def __init__(self, app: App, **kwargs: Any) -> None:
            pass

        async def run(self) -> int:
            return 0

    monkeypatch.setattr("agentstream.worker.worker.Worker", FakeWorker)
    monkeypatch.setattr("agentstream.web.runner.serve", lambda worker: None)  # no web server beside the fake
    monkeypatch.setattr("gc.freeze", lambda: None)
    name = f"cliapp_notice_{command}"
    (app_dir / f"{name}.py").write_text(
        textwrap.dedent(f"""
        import agentstream
        app = agentstream.App('cli-faust', broker='memory://', topic_partitions=1, {name}_option=True)
    """)
    )
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = []  # as in a new process: logging is set up after the app module is imported
    try:
        main(["-A", name, command, *(["t", "1"] if command == "send" else [])])
    finally:
        root.handlers[:], root.level = saved
    err = capsys.readouterr().err
    assert (f"{name}_option" in err) == (command == "worker"), err
    assert err.count(f"{name}_option") <= 1


def test_shell_completion_lists_the_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_AGENTSTREAM_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", "agentstream wo")
    monkeypatch.setenv("COMP_CWORD", "1")
    import click.testing

    result = click.testing.CliRunner().invoke(cli, [], prog_name="agentstream")
    assert "worker" in result.output, result.output


def test_rebalance_warnings_of_aiokafka_go_to_debug() -> None:
    noise = logging.LogRecord(
        "aiokafka.consumer.group_coordinator",
        logging.WARNING,
        __file__,
        1,
        "Heartbeat failed for group %s because it is rebalancing",
        ("g",),
        None,
    )
    other = logging.LogRecord(
        "aiokafka.consumer.group_coordinator", logging.WARNING, __file__, 1, "Unable to connect", (), None
    )
    root = logging.getLogger()
    saved = root.level
    root.setLevel(logging.INFO)
    try:
        assert RebalanceNoise().filter(noise) is False and noise.levelname == "DEBUG"
        assert RebalanceNoise().filter(other) is True and other.levelname == "WARNING"
    finally:
        root.setLevel(saved)


def test_a_mistyped_command_suggests_the_right_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-A", "apps.wordcount", "wrker"]) == 2
    err = capsys.readouterr().err
    assert "no such command 'wrker'" in err and "Did you mean 'worker'?" in err, err


def test_sending_to_an_undeclared_topic_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    app = App("cli-typo", broker="memory://", topic_partitions=1)
    app.topic("sentences")
    main(["send", "sentence", '"x"'], app=app)  # the memory broker has no topics outside a worker
    assert "(did you mean 'sentences'?)" in capsys.readouterr().err
