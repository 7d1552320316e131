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


@pytest.mark.parametrize("options,setting", [
    ({"broker": "localhost:9092"}, "broker"),
    ({"on_agent_error": "explode"}, "on_agent_error"),
    ({"heartbeat_interval": 20.0, "session_timeout": 10.0}, "heartbeat_interval"),
    ({"topic_partitions": 0}, "topic_partitions"),
    ({"processing_guarantee": "maybe"}, "processing_guarantee"),
])
def test_errors_name_the_setting_and_the_fix(options: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.build("a", options, environ={})
    assert info.value.setting == setting and "Fix:" in str(info.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="AGENTSTREAM_COMMIT_INTERVAL"):
        Settings.build("a", {}, environ={"AGENTSTREAM_COMMIT_INTERVAL": "soon"})
