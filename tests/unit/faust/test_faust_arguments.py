"""Every Faust declaration argument without a same-named agentstream option is honoured (each with
a test of its effect here), refused (a TypeError naming it) or does not apply (logged once), as
the table in :mod:`agentstream.faust_arguments` says; the table is checked against the code."""

from __future__ import annotations

import io
import logging
import re
import ssl
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

import agentstream as faust
from agentstream import faust_args, faust_arguments
from agentstream.faust_arguments import ARGUMENTS, FaustArgument
from agentstream.faust_settings import Status
from agentstream.testing import AppHarness

ROOT = Path(__file__).resolve().parents[3]


async def _tick() -> None: ...


async def _view(web: Any, request: Any) -> Any:
    return web.json({})


def _cmd() -> None: ...


async def _agent(stream: faust.Stream) -> None:
    async for _ in stream:
        pass


def _app(tag: str = "args", **settings: Any) -> faust.App:
    return faust.App(f"{tag}-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, **settings)


def _declare(app: faust.App, call: str, **kw: Any) -> Any:
    """``call`` with Faust's arguments ``kw`` on ``app``, as an app would declare it."""
    n = uuid.uuid4().hex[:6]
    if call == "app.timer":
        return app.timer(1.0, **kw)(_tick)
    if call == "app.crontab":
        return app.crontab("* * * * *", **kw)(_tick)
    if call == "app.task":
        return app.task(**kw)(_tick)
    if call == "app.page":
        return app.page(f"/p{n}", **kw)(_view)
    if call == "app.command":
        return app.command(**kw)(_cmd)
    if call == "app.channel":
        return app.channel(**kw)
    if call == "app.stream":
        return app.stream([1, 2], **kw)
    if call == "app.agent":
        return app.agent(app.topic(f"src{n}"), name=f"a{n}", **kw)(_agent)
    if call == "app.topic":
        return app.topic(f"t{n}", **kw)
    if call == "app.Table":
        return app.Table(f"tbl{n}", default=int, **kw)
    if call == "Service":
        return faust.Service(**kw)
    if call == "Worker":
        return faust.Worker(app, install_signal_handlers=False, **kw)
    if call == "SSLCredentials":
        return faust.SSLCredentials(**kw)
    raise AssertionError(f"no declaration for {call}: add one to _declare")


def _other_than_default(a: FaustArgument) -> Any:
    """A value other than Faust's default for ``a``."""
    default = a.default
    if a.name in ("stdout", "stderr"):
        return io.StringIO()
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)):
        return default + 7
    return object() if a.name in ("loop", "beacon", "supervisor_strategy", "options", "window") else 5


def _kw(a: FaustArgument) -> dict[str, Any]:
    name = "frobnicate" if a.name == "**kwargs" else a.name
    return {name: _other_than_default(a)}


def _rows(status: Status) -> list[FaustArgument]:
    return [a for a in ARGUMENTS if a.status is status]


@pytest.fixture(autouse=True)
def fresh_log_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each notice is once per process: start each test as a fresh process would."""
    monkeypatch.setattr(faust_args, "_logged", set())


# -- refused ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a", _rows(Status.REFUSED), ids=lambda a: f"{a.call}:{a.name}")
def test_a_refused_argument_raises_naming_it_and_why(a: FaustArgument) -> None:
    kw = _kw(a)
    with pytest.raises(TypeError) as info:
        _declare(_app(), a.call, **kw)
    message = str(info.value)
    assert f"{a.call}({next(iter(kw))}" in message and "not supported" in message, message
    assert a.how.split("`")[0][:30] in message


@pytest.mark.parametrize("a", [a for a in _rows(Status.REFUSED) if a.name != "**kwargs"], ids=lambda a: a.name)
def test_a_refused_argument_at_faust_default_is_accepted(a: FaustArgument, caplog: pytest.LogCaptureFixture) -> None:
    default = getattr(sys, a.name) if a.name in ("stdout", "stderr") else a.default
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        _declare(_app(), a.call, **{a.name: default})
    assert [r.getMessage() for r in caplog.records if r.name == "agentstream.faust"] == []


# -- not applicable ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("a", _rows(Status.NOT_APPLICABLE), ids=lambda a: f"{a.call}:{a.name}")
def test_a_not_applicable_argument_is_logged_once_with_the_reason(
    a: FaustArgument, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        for _ in range(2):  # two declarations: logged once per process
            _declare(_app(), a.call, **_kw(a))
    lines = [r.getMessage() for r in caplog.records if r.name == "agentstream.faust"]
    assert lines == [f"{a.call}({a.name}=...) does not apply to agentstream: {a.how}"]


def test_not_applicable_is_kept_to_a_handful() -> None:
    """The rule: "not applicable" only where an argument cannot matter (an event loop, a tracer)."""
    reasons = {a.how for a in _rows(Status.NOT_APPLICABLE)}
    assert len(reasons) <= 4, reasons


def test_notices_wait_for_the_worker_to_set_up_logging(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before logging is configured (the CLI imports the app first) a notice is kept; the worker
    command writes it once logging is set up."""
    monkeypatch.setattr(faust_args, "_deferred", [])
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    _app().timer(1.0, traced=False)(_tick)
    assert len(faust_args._deferred) == 1
    monkeypatch.setattr(root, "handlers", [caplog.handler])
    with caplog.at_level(logging.INFO, logger="agentstream.faust"):
        faust_args.flush_deferred_logs()
    assert [r.getMessage()[:16] for r in caplog.records] == ["app.timer(traced"]


# -- honoured: each with its effect -----------------------------------------------------------------------
def test_timer_max_drift_correction_shortens_the_sleep_after_a_late_wake_up() -> None:
    app = _app()
    app.timer(1.0, max_drift_correction=0.3)(_tick)
    app.timer(1.0, max_drift_correction=0)(_tick)
    app.timer(1.0)(_tick)  # Faust's default: 0.1
    corrected, uncorrected, default = app.timers
    assert corrected.next_sleep(1.2) == pytest.approx(0.8)  # 0.2 s late: the next sleep is 0.2 s shorter
    assert corrected.next_sleep(1.5) == pytest.approx(0.7)  # at most 0.3 s
    assert corrected.next_sleep(0.9) == pytest.approx(1.1)  # early: longer
    assert uncorrected.next_sleep(1.2) == pytest.approx(1.0)
    assert default.next_sleep(1.05) == pytest.approx(0.95) and default.next_sleep(1.5) == pytest.approx(0.9)
    with pytest.raises(faust.TopologyError, match="max_drift_correction"):
        app.timer(1.0, max_drift_correction=-1)


async def test_timer_with_drift_correction_keeps_its_period_on_a_clock_that_wakes_late() -> None:
    """On a clock whose every sleep ends 0.05 s late, calls without correction come 1.05 s apart;
    Faust's correction (the next sleep shorter by the last one's lateness) halves that drift, as
    faust-streaming's own timer does (its sleeps alternate 1.0 and 0.95 s here)."""
    from agentstream.clock import VirtualClock

    class LateClock(VirtualClock):
        async def sleep(self, seconds: float) -> None:
            await super().sleep(seconds + 0.05)

    calls: dict[str, list[float]] = {"corrected": [], "plain": []}
    app = _app(commit_interval=3600.0)
    harness = AppHarness(app, virtual_time=True)
    clock = harness.clock = LateClock()

    def ticker(label: str) -> Callable[[], Any]:
        async def tick() -> None:
            calls[label].append(clock.time())

        tick.__qualname__ = label
        return tick

    app.timer(1.0)(ticker("corrected"))
    app.timer(1.0, max_drift_correction=0)(ticker("plain"))
    app.topic("src")
    async with harness as h:
        await h.advance(10.5)
    corrected, plain = calls["corrected"], calls["plain"]
    assert len(corrected) >= 9 and len(plain) >= 9
    assert (plain[8] - plain[0]) / 8 == pytest.approx(1.05, abs=1e-6)
    assert (corrected[8] - corrected[0]) / 8 == pytest.approx(1.025, abs=1e-6)


async def test_page_base_and_name() -> None:
    from agentstream.web import View

    class Base(View):
        greeting = "hi"

    async def item(web: Any, request: Any, key: str) -> Any:
        return web.json({"path": web.path_for("item", key=key), "url": web.url_for("item", key=key)})

    async def hello(self: Any, request: Any) -> Any:  # a function view on base=Base: self is a Base
        return self.json({"greeting": self.greeting, "item": self.path_for("item", key="k9")})

    app = _app()
    app.page("/items/{key}", name="item")(item)
    app.page("/hello", base=Base)(hello)
    app.topic("src")
    with pytest.raises(faust.TopologyError, match="named 'item'"):
        app.page("/other", name="item")
    async with AppHarness(app) as h, aiohttp.ClientSession() as s:
        base = f"http://127.0.0.1:{h.web.port}"
        async with s.get(f"{base}/items/k1") as r:
            assert r.status == 200 and await r.json() == {"path": "/items/k1", "url": f"{h.web.url}/items/k1"}
        async with s.get(f"{base}/hello") as r:
            assert r.status == 200, await r.text()
            assert await r.json() == {"greeting": "hi", "item": "/items/k9"}
        with pytest.raises(KeyError, match="no page is named 'nope'"):
            h.web.url_for("nope")


def test_page_base_must_be_a_view() -> None:
    app = _app()
    with pytest.raises(TypeError, match="base must be a View class"):
        app.page("/x", base=object())(_view)


async def test_command_base_and_its_class_attributes() -> None:
    from agentstream.faust.cli import AppCommand

    app = _app()
    made = app.command(base=AppCommand, requires_app=False)(_cmd)
    assert issubclass(made, AppCommand) and made.requires_app is False
    with pytest.raises(TypeError, match="AppCommand subclass"):
        app.command(base=dict)(_cmd)


def test_agent_help_is_listed_by_the_agents_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "helpapp_x.py").write_text(
        "import agentstream\n"
        "app = agentstream.App('helpapp', broker='memory://')\n"
        "@app.agent(app.topic('a'), help='Counts the clicks.')\n"
        "async def counted(stream):\n    async for _ in stream: pass\n"
        "@app.agent(app.topic('b'))\n"
        "async def documented(stream):\n    '''Says what it does.'''\n    async for _ in stream: pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from agentstream.cli import main

    assert main(["-A", "helpapp_x", "agents", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert {a["name"]: a["help"] for a in doc["agents"]} == {
        "counted": "Counts the clicks.",
        "documented": "Says what it does.",
    }
    sys.modules.pop("helpapp_x", None)


def test_agent_types_declare_the_named_topic() -> None:
    app = _app()
    app.agent("numbers", value_type=int)(_agent)
    assert app.topics["numbers"].value_type is int


class Click(faust.Record):
    user: str


@pytest.mark.parametrize("allow_empty", [True, False, None])
async def test_topic_allow_empty(allow_empty: bool | None) -> None:
    """False (Faust's meaning): a record without a value on a Record topic is a value decode error,
    handled by on_decode_error; True and not given: the agent gets None."""
    app = _app(on_decode_error="skip")
    seen: list[Any] = []
    options = {} if allow_empty is None else {"allow_empty": allow_empty}

    @app.agent(app.topic("clicks", value_type=Click, **options))
    async def clicks(stream: faust.Stream) -> None:
        async for value in stream:
            seen.append(value)

    async with AppHarness(app) as h:
        await h.send("clicks", None, key="k")
        await h.send("clicks", Click(user="u"), key="k")
        await h.settle()
    assert seen == ([Click(user="u")] if allow_empty is False else [None, Click(user="u")])


async def test_topic_has_prefix_keeps_the_repartition_topic_name_as_faust_does() -> None:
    app = _app("pre", topic_naming="faust")
    source = app.topic(f"{app.id}x-orders", has_prefix=True)  # carries a prefix of its own
    plain = app.topic("orders")

    @app.agent(source)
    async def by_user(stream: faust.Stream) -> None:
        async for _ in stream.group_by(lambda v: v, name="user"):
            pass

    @app.agent(plain)
    async def by_user_plain(stream: faust.Stream) -> None:
        async for _ in stream.group_by(lambda v: v, name="user"):
            pass

    await app.discover()
    assert f"{app.id}x-orders-user-repartition" in app.topics
    assert f"{app.id}-orders-user-repartition" in app.topics


async def test_table_on_recover_and_is_global() -> None:
    app = _app()
    recovered: list[str] = []

    async def on_recover() -> None:
        recovered.append("done")

    table = app.Table("t", default=int, on_recover=on_recover)
    glob = app.Table("g", default=int, is_global=True)

    @app.agent(app.topic("src"))
    async def count(stream: faust.Stream) -> None:
        async for key in stream:
            table[key] += 1

    assert isinstance(glob, faust.GlobalTable) and not isinstance(table, faust.GlobalTable)
    async with AppHarness(app) as h:
        await h.send("src", "k", key="k")
        await h.settle()
        assert recovered == ["done"] and h.table("t")["k"] == 1


def test_worker_sensors_and_settings() -> None:
    app = _app()
    sensor = faust.Sensor()
    handler = logging.NullHandler()
    config = {"version": 1, "incremental": True}
    worker = faust.Worker(
        app, sensors=[sensor], debug=True, logging_config=config, loghandlers=[handler], install_signal_handlers=False
    )
    assert sensor in list(app.sensors) and worker.app is app
    assert app.settings.debug is True and app.settings.logging_config == config
    assert list(app.settings.loghandlers) == [handler]


def test_ssl_credentials_purpose() -> None:
    assert faust.SSLCredentials(purpose=ssl.Purpose.SERVER_AUTH) is not None
    with pytest.raises(TypeError, match="CLIENT_AUTH makes a server's context"):
        faust.SSLCredentials(purpose=ssl.Purpose.CLIENT_AUTH)


def test_faust_worker_arguments_set_the_settings() -> None:
    app = faust.App("worker-args", broker="memory://")
    worker = faust.Worker(
        app, blocking_timeout=2.0, redirect_stdouts=True, redirect_stdouts_level="INFO", install_signal_handlers=False
    )
    extra = worker.app.settings.extra
    assert (extra["blocking_timeout"], extra["worker_redirect_stdouts"], extra["worker_redirect_stdouts_level"]) == (
        2.0,
        True,
        "INFO",
    )


HONOURED_TESTS: dict[tuple[str, str], Callable[..., Any]] = {
    ("app.timer", "max_drift_correction"): test_timer_max_drift_correction_shortens_the_sleep_after_a_late_wake_up,
    ("app.page", "base"): test_page_base_and_name,
    ("app.page", "name"): test_page_base_and_name,
    ("app.command", "base"): test_command_base_and_its_class_attributes,
    ("app.agent", "help"): test_agent_help_is_listed_by_the_agents_command,
    ("app.topic", "allow_empty"): test_topic_allow_empty,
    ("app.topic", "has_prefix"): test_topic_has_prefix_keeps_the_repartition_topic_name_as_faust_does,
    ("app.Table", "on_recover"): test_table_on_recover_and_is_global,
    ("app.Table", "is_global"): test_table_on_recover_and_is_global,
    ("Worker", "sensors"): test_worker_sensors_and_settings,
    ("Worker", "debug"): test_worker_sensors_and_settings,
    ("Worker", "logging_config"): test_worker_sensors_and_settings,
    ("Worker", "loghandlers"): test_worker_sensors_and_settings,
    # the settings they stand for (their effects: tests/unit/faust/test_faust_settings_honoured.py)
    ("Worker", "blocking_timeout"): test_faust_worker_arguments_set_the_settings,
    ("Worker", "redirect_stdouts"): test_faust_worker_arguments_set_the_settings,
    ("Worker", "redirect_stdouts_level"): test_faust_worker_arguments_set_the_settings,
    ("SSLCredentials", "purpose"): test_ssl_credentials_purpose,
}


def test_every_honoured_argument_has_a_test_of_its_effect() -> None:
    assert set(HONOURED_TESTS) == {(a.call, a.name) for a in _rows(Status.HONOURED)}


def test_no_declaration_accepts_a_faust_argument_outside_the_table() -> None:
    """Every check() call names a declaration the table lists, and nothing logs an argument as
    "accepted and ignored" any more."""
    calls = set()
    for path in (ROOT / "agentstream").rglob("*.py"):
        text = path.read_text()
        assert "ignored(" not in text.replace("# ignored(", ""), f"{path}: an accepted-and-ignored notice"
        if "faust_arguments" in text and not path.name == "faust_arguments.py":
            calls |= set(re.findall(r"""(?:faust_arguments\.|\s)check\(\s*["']([\w.]+)["']""", text))
    assert calls and calls <= {a.call for a in ARGUMENTS}, calls - {a.call for a in ARGUMENTS}


def test_the_reference_lists_every_argument() -> None:
    page = (ROOT / "docs" / "faust-settings.md").read_text()
    assert faust_arguments.render_markdown() in page, "regenerate: make faust-settings-doc"


# -- the table against faust-streaming itself ---------------------------------------------------------
FAUST_SIDE = r"""
import inspect, json
import faust, mode, mode.worker
from faust.agents import Agent
from faust.tables.base import Collection
from faust.auth import SSLCredentials
from faust.worker import Worker
calls = {
    "app.timer": [faust.App.timer], "app.crontab": [faust.App.crontab], "app.task": [faust.App.task],
    "app.page": [faust.App.page], "app.command": [faust.App.command], "app.channel": [faust.App.channel],
    "app.stream": [faust.App.stream], "app.agent": [faust.App.agent, Agent.__init__],
    "app.topic": [faust.App.topic], "app.Table": [faust.App.Table, Collection.__init__, mode.Service.__init__],
    "Service": [mode.Service.__init__], "SSLCredentials": [SSLCredentials.__init__],
    "Worker": [Worker.__init__, mode.worker.Worker.__init__],
}
out = {}
for call, funs in calls.items():
    params = {}
    for fun in funs:
        for p in inspect.signature(inspect.unwrap(fun)).parameters.values():
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
                d = p.default
                plain = isinstance(d, (str, int, float, bool, type(None)))
                params.setdefault(p.name, None if d is p.empty else d if plain else "<" + repr(d))
    out[call] = params
print(json.dumps(out))
"""


def test_each_row_is_an_argument_of_fausts_call_with_fausts_default() -> None:
    """Read from faust-streaming's own signatures (the takeover test's virtualenv): a row names an
    argument the Faust call has, and its default is Faust's (objects such as View: not compared)."""
    import json
    import subprocess

    from tests.faust_takeover.faust_env import ensure_faust_venv

    py, why = ensure_faust_venv()
    if py is None:
        pytest.skip(f"faust-streaming cannot be installed in a test virtualenv: {why}")
    done = subprocess.run([str(py), "-c", FAUST_SIDE], capture_output=True, text=True, timeout=120, check=True)
    theirs: dict[str, dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    for a in ARGUMENTS:
        if a.name == "**kwargs":
            continue
        assert a.name in theirs[a.call], f"{a.call} has no argument {a.name!r} in Faust"
        default = theirs[a.call][a.name]
        if not (isinstance(default, str) and default.startswith("<")):
            assert a.default == default, (
                f"{a.call}({a.name}=): Faust's default is {default!r}, the table says {a.default!r}"
            )
