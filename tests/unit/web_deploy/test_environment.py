"""Faust's environment variables beside ``AGENTSTREAM_*``: every variable faust-streaming's Settings
reads is read, with Faust's precedence (variable over App argument) and its ``APP_ENV_PREFIX``,
and goes where the App argument of that setting goes."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.settings import FAUST_SETTING_NAMES, FAUST_VARIABLES, Settings
from agentstream.testing import AppHarness
from tests.faust_takeover.faust_env import faust_python

FAUST_SETTINGS_SCRIPT = """
import json
from faust.types.settings import Settings
print(json.dumps({n: p.env_name for n, p in Settings.SETTINGS.items()}))
"""


@pytest.fixture(scope="module")
def faust_settings() -> dict[str, str | None]:
    """faust-streaming's setting names -> their environment variable, read from the Faust venv."""
    py = faust_python()
    if not py.exists():
        pytest.skip(f"no faust-streaming virtualenv at {py} (make faust-venv)")
    out = subprocess.run([str(py), "-c", FAUST_SETTINGS_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_every_variable_faust_reads_is_read(faust_settings: dict[str, str | None]) -> None:
    expected = {env: name for name, env in faust_settings.items() if env and env != "APP_ENV_PREFIX"}
    assert FAUST_VARIABLES == expected


def test_config_from_object_knows_every_faust_setting_name(faust_settings: dict[str, str | None]) -> None:
    assert set(faust_settings) <= FAUST_SETTING_NAMES


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


def test_a_variable_of_a_setting_agentstream_has_not_goes_where_the_argument_goes() -> None:
    """Same place as App(topic_disable_leader=...): settings.extra, which faust_args logs or refuses."""
    s = Settings.build("x", {}, environ={"TOPIC_DISABLE_LEADER": "true"})
    assert s.extra["topic_disable_leader"] == "true"
    assert Settings.build("x", {"topic_disable_leader": True}, environ={}).extra == {"topic_disable_leader": True}


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
