"""Faust's command-line options (issue 40, item 11): the options before the sub-command (-D/--datadir,
--debug, --json, -W, -q, -L, -f), the worker's -b/-h/-p (web bind, host, port) and --with-web, send's
--key-type/--value-type and serializers, and @app.command in autodiscovered modules."""

from __future__ import annotations

import os
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentstream import App
from agentstream.cli import main


@pytest.fixture
def fake_worker(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    class FakeWorker:
        def __init__(self, app: App, **kwargs: Any) -> None:
            seen["settings"] = app.settings

        async def run(self) -> int:
            return 0

    monkeypatch.setattr("agentstream.worker.worker.Worker", FakeWorker)
    monkeypatch.setattr("agentstream.web.runner.serve", lambda worker: None)
    monkeypatch.setattr("gc.freeze", lambda: None)
    return seen


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("cliopt_")]:
        del sys.modules[name]


def test_worker_b_h_p_are_faust_s_web_options(fake_worker: dict[str, Any]) -> None:
    app = App("cli-web", broker="memory://")
    assert main(["worker", "-b", "127.0.0.9", "-h", "127.0.0.8", "-p", "7002", "--broker", "memory://x"], app=app) == 0
    s = fake_worker["settings"]
    assert (s.web_bind, s.web_host, s.web_port, s.broker) == ("127.0.0.9", "127.0.0.8", 7002, "memory://x")
    assert main(["worker", "--without-web"], app=app) == 0 and fake_worker["settings"].web_enabled is False
    assert main(["worker", "--with-web"], app=app) == 0 and fake_worker["settings"].web_enabled is True


def test_options_before_the_command(fake_worker: dict[str, Any], tmp_path: Path) -> None:
    app = App("cli-pre", broker="memory://")
    assert main(["-D", str(tmp_path / "d"), "--debug", "worker"], app=app) == 0
    s = fake_worker["settings"]
    assert (s.data_dir, s.debug) == (tmp_path / "d", True)
    app = App("cli-pre2", broker="memory://")
    assert main(["--datadir", str(tmp_path / "d"), "worker", "--data-dir", str(tmp_path / "e")], app=app) == 0
    assert fake_worker["settings"].data_dir == tmp_path / "e"  # the worker's own flag wins


def test_json_before_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-A", "apps.wordcount", "--json", "tables"]) == 0
    assert orjson.loads(capsys.readouterr().out)[0]["name"] == "word_counts"


def test_quiet_silences_the_command_s_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-A", "apps.wordcount", "-q", "tables"]) == 0
    assert capsys.readouterr().out == ""


def test_logfile_before_the_command(tmp_path: Path) -> None:
    log = tmp_path / "cli.log"
    app = App("cli-logfile", broker="memory://", topic_partitions=1)
    app.topic("sentences")
    main(["-f", str(log), "-l", "warning", "send", "sentence", '"x"'], app=app)
    assert log.exists()


def test_workdir_is_where_the_app_is_imported_from(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sub = app_dir / "proj"
    sub.mkdir()
    name = f"cliopt_wd_{uuid.uuid4().hex[:6]}"
    (sub / f"{name}.py").write_text("import agentstream\napp = agentstream.App('wd', broker='memory://')\n")
    sys.path.remove(str(app_dir)) if str(app_dir) in sys.path else None
    try:
        assert main(["-W", str(sub), "-A", name, "tables", "--json"]) == 0
        assert Path(os.getcwd()) == sub
    finally:
        sys.path[:] = [p for p in sys.path if p != str(sub)]


def test_loop_aio_runs_on_asyncio_and_eventlet_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    app = App("cli-loop", broker="memory://", topic_partitions=1)
    app.topic("sentences")
    assert main(["-L", "eventlet", "tables"], app=app) == 2
    assert "agentstream runs on asyncio" in capsys.readouterr().err
    assert main(["-L", "aio", "tables"], app=app) == 0


def test_send_key_and_value_types_and_serializers(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"cliopt_send_{uuid.uuid4().hex[:6]}"
    (app_dir / f"{name}.py").write_text(
        textwrap.dedent("""
        import agentstream

        class Point(agentstream.Record, namespace="cliopt.Point"):
            x: int
            y: int

        app = agentstream.App("cli-send-types", broker="memory://send-types", topic_partitions=1)
        points = app.topic("points")
    """)
    )
    import asyncio
    import importlib

    from agentstream.transport.base import TopicSpec
    from agentstream.transport.memory import MemoryTransport

    module = importlib.import_module(name)
    asyncio.run(module.app.transport.ensure_topics([TopicSpec("points", 1)]))  # the memory broker creates nothing
    code = main(["-A", name, "send", "points", '{"x": 1, "y": 2}', "--value-type", f"{name}.Point", "-k", "k1"])
    assert code == 0, capsys.readouterr().err
    code = main(
        [
            "-A",
            name,
            "send",
            "points",
            "raw-bytes",
            "--value-serializer",
            "raw",
            "-K",
            "Point",
            "-k",
            '{"x": 3, "y": 4}',
        ]
    )
    assert code == 0, capsys.readouterr().err
    transport = module.app.transport
    assert isinstance(transport, MemoryTransport)
    records = transport.broker.topics["points"].partitions[0].records
    values = [orjson.loads(r.value) if r.value.startswith(b"{") else r.value for r in records]
    assert values[0]["x"] == 1 and values[0]["y"] == 2
    assert values[1] == b"raw-bytes"
    assert orjson.loads(records[1].key)["x"] == 3
    assert main(["-A", name, "send", "points", '{"x": "no"}', "--value-type", "Point"]) == 2


def test_commands_in_autodiscovered_modules_are_found(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = f"cliopt_pkg_{uuid.uuid4().hex[:6]}"
    (app_dir / pkg).mkdir()
    (app_dir / pkg / "__init__.py").write_text("")
    (app_dir / pkg / "app.py").write_text(
        f"import agentstream\napp = agentstream.App('cli-disc', broker='memory://', autodiscover=True, origin={pkg!r})\n"
    )
    (app_dir / pkg / "commands.py").write_text(
        textwrap.dedent(f"""
        from {pkg}.app import app

        @app.command()
        async def hello():
            print("hello from a discovered module")
    """)
    )
    assert main(["-A", f"{pkg}.app", "hello"]) == 0, capsys.readouterr().err
    assert "hello from a discovered module" in capsys.readouterr().out
