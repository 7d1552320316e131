"""Faust's environment variables beside ``AGENTSTREAM_*``: every variable faust-streaming's Settings
reads is read, with Faust's precedence (variable over App argument) and its ``APP_ENV_PREFIX``,
and goes where the App argument of that setting goes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import uuid

import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.faust_args import translate_settings
from agentstream.settings import (
    FAUST_BOOL_SETTINGS,
    FAUST_INT_SETTINGS,
    FAUST_SECONDS_SETTINGS,
    FAUST_SETTING_NAMES,
    FAUST_VARIABLES,
    Settings,
)
from agentstream.testing import AppHarness
from tests.faust_takeover.faust_env import faust_python

FAUST_SETTINGS_SCRIPT = """
import json
from faust.types.settings import Settings
print(json.dumps({n: [p.env_name, type(p).__name__] for n, p in Settings.SETTINGS.items()}))
"""


@pytest.fixture(scope="module")
def faust_settings() -> dict[str, tuple[str | None, str]]:
    """faust-streaming's setting names -> (their environment variable, their Param type), read from
    the Faust venv."""
    py = faust_python()
    if not py.exists():
        pytest.skip(f"no faust-streaming virtualenv at {py} (make faust-venv)")
    out = subprocess.run([str(py), "-c", FAUST_SETTINGS_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return {name: (env, kind) for name, (env, kind) in json.loads(out.stdout).items()}


def test_every_variable_faust_reads_is_read(faust_settings: dict[str, tuple[str | None, str]]) -> None:
    expected = {env: name for name, (env, _) in faust_settings.items() if env and env != "APP_ENV_PREFIX"}
    assert FAUST_VARIABLES == expected


def test_each_variable_is_parsed_to_fausts_type(faust_settings: dict[str, tuple[str | None, str]]) -> None:
    with_env = {name: kind for name, (env, kind) in faust_settings.items() if env}
    assert {n for n, k in with_env.items() if k == "Bool"} == FAUST_BOOL_SETTINGS
    assert {n for n, k in with_env.items() if k == "Seconds"} == FAUST_SECONDS_SETTINGS
    assert {n for n, k in with_env.items() if k in ("Int", "UnsignedInt", "Port")} == FAUST_INT_SETTINGS


def test_config_from_object_knows_every_faust_setting_name(faust_settings: dict[str, tuple[str | None, str]]) -> None:
    assert set(faust_settings) <= FAUST_SETTING_NAMES


def outcome(options: dict[str, object], environ: dict[str, str]) -> object:
    """The settings (as a comparable dict), or the setting a ConfigError names."""
    try:
        s = Settings.build("x", options, environ=environ)
    except ConfigError as exc:
        return ("refused", exc.setting)
    return {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}


@pytest.mark.parametrize(
    ("variable", "text", "argument"),
    [
        ("APP_DEBUG", "false", False),
        ("TOPIC_DISABLE_LEADER", "yes", True),
        ("BROKER_MAX_POLL_INTERVAL", "300", 300.0),
        ("BROKER_SESSION_TIMEOUT", "30", 30.0),
        ("PRODUCER_ACKS", "1", 1),
        ("TOPIC_REPLICATION_FACTOR", "3", 3),
        ("CONSUMER_AUTO_OFFSET_RESET", "latest", "latest"),
        ("BROKER_CLIENT_ID", "my-client", "my-client"),
        ("STREAM_BUFFER_MAXSIZE", "50", 50),
        ("APP_WEB_TABLES_ENABLED", "off", False),
    ],
)
def test_a_variable_acts_as_the_app_argument_of_its_setting(variable: str, text: str, argument: object) -> None:
    """Honoured, refused or logged: whatever App(setting=value) does, the variable does."""
    faust_name = FAUST_VARIABLES[variable]
    assert outcome({}, {variable: text}) == outcome(translate_settings({faust_name: argument}), {})


def test_web_variables_give_bind_host_and_advertised_url() -> None:
    env = {"WEB_BIND": "0.0.0.0", "WEB_HOST": "pod-3.svc", "WEB_PORT": "7001", "NODE_CANONICAL_URL": "http://w:1"}
    s = Settings.build("x", {"web_bind": "127.0.0.1"}, environ=env)
    assert (s.web_bind, s.web_host, s.web_port, s.canonical_url) == ("0.0.0.0", "pod-3.svc", 7001, "http://w:1")
    s = Settings.build("x", {}, environ={**env, "AGENTSTREAM_WEB_BIND": "127.0.0.2"})
    assert s.web_bind == "127.0.0.2"  # agentstream's own variable wins


async def test_web_host_from_the_environment_is_what_the_group_learns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEB_BIND", "127.0.0.1")
    monkeypatch.setenv("WEB_HOST", "pod-7.workers.svc")
    app = agentstream.App(f"env-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1)
    app.topic("src")
    monkeypatch.delenv("WEB_BIND")
    monkeypatch.delenv("WEB_HOST")
    async with AppHarness(app) as h:
        assert json.loads(h.worker.assignor.member_user_data())["host"] == f"pod-7.workers.svc:{h.web.port}"
        assert h.web.host == "127.0.0.1"


def test_variables_are_read_as_faust_reads_them_with_their_prefix() -> None:
    env = {
        "APP_ENV_PREFIX": "SHOP",
        "SHOP_BROKER_SESSION_TIMEOUT": "30",
        "SHOP_STREAM_BUFFER_MAXSIZE": "77",
        "SHOP_APP_DATADIR": "/var/lib/shop",
        "SHOP_APP_WEB_ENABLED": "false",
        "SHOP_APP_VERSION": "3",
        "BROKER_SESSION_TIMEOUT": "99",  # without the prefix: not this app's
    }
    s = Settings.build("shop", {}, environ=env)
    assert (s.session_timeout, s.buffer_max_records, str(s.data_dir)) == (30.0, 77, "/var/lib/shop")
    assert (s.web_enabled, s.version, s.id) == (False, 3, "shop-v3")


def test_a_variable_that_does_not_parse_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="WEB_PORT"):
        Settings.build("x", {}, environ={"WEB_PORT": "http"})
    with pytest.raises(ConfigError) as info:
        Settings.build("x", {}, environ={"NODE_CANONICAL_URL": "http://w:1/sub/path"})
    assert info.value.setting == "canonical_url"


def test_a_variable_of_an_object_setting_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError, match="BROKER_CREDENTIALS") as info:
        Settings.build("x", {}, environ={"BROKER_CREDENTIALS": "user:pass"})
    assert info.value.setting == "broker_credentials"


def test_producer_linger_wins_over_the_older_linger_ms() -> None:
    s = Settings.build("x", {}, environ={"PRODUCER_LINGER_MS": "20", "PRODUCER_LINGER": "0.5"})
    assert s.producer_linger == 0.5
    assert Settings.build("x", {}, environ={"PRODUCER_LINGER_MS": "20"}).producer_linger == pytest.approx(0.02)
