"""Settings: precedence and errors that name the setting and the fix."""

from __future__ import annotations

import pytest

from agentstream.exceptions import ConfigError
from agentstream.settings import Settings


def test_environment_overrides_app_arguments() -> None:
    s = Settings.build("a", {"commit_interval": 5.0}, environ={"AGENTSTREAM_COMMIT_INTERVAL": "0.25"})
    assert s.commit_interval == 0.25


def test_cli_replace_overrides_everything_and_validates() -> None:
    s = Settings.build("a", {}, environ={"AGENTSTREAM_WEB_PORT": "7000"})
    assert s.replace(web_port=7001).web_port == 7001
    with pytest.raises(ConfigError, match="web_port"):
        s.replace(web_port=70000)


@pytest.mark.parametrize(
    "options,setting",
    [
        ({"broker": ["kafka://h:1", "memory://"]}, "broker"),  # bare host:port is Faust's form, accepted
        ({"on_agent_error": "explode"}, "on_agent_error"),
        ({"heartbeat_interval": 20.0, "session_timeout": 10.0}, "heartbeat_interval"),
        ({"topic_partitions": 0}, "topic_partitions"),
        ({"processing_guarantee": "maybe"}, "processing_guarantee"),
        ({"consumer_fetch_max_wait": -1}, "consumer_fetch_max_wait"),
        ({"producer_max_batch_size": 0}, "producer_max_batch_size"),
        ({"producer_linger": -0.1}, "producer_linger"),
    ],
)
def test_errors_name_the_setting_and_the_fix(options: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", options, environ={})
    assert info.value.setting == setting and "Fix:" in str(info.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="AGENTSTREAM_COMMIT_INTERVAL"):
        Settings.build("a", {}, environ={"AGENTSTREAM_COMMIT_INTERVAL": "soon"})


def test_fetch_wait_and_batch_size_reach_the_clients() -> None:
    from agentstream import App

    app = App("a", broker="memory://", consumer_fetch_max_wait=0.05, producer_max_batch_size=65536)
    assert app.consumer_settings()["fetch_max_wait_ms"] == 50
    assert app.producer_settings()["max_batch_size"] == 65536
