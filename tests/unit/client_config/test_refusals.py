"""A client or logging setting agentstream cannot honour is refused when the app is built (before
any worker joins a group), naming the setting, why, and the fix; Faust's environment variables
set them as in Faust."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentstream import App
from agentstream.exceptions import ConfigError
from agentstream.settings import Settings


@pytest.mark.parametrize(
    "options,setting,why",
    [
        ({"consumer_auto_offset_reset": "smallest"}, "consumer_auto_offset_reset", "not one of earliest"),
        ({"producer_acks": 2}, "producer_acks", "not an acks value"),
        ({"producer_acks": True}, "producer_acks", "not an acks value"),
        ({"producer_acks": 1, "processing_guarantee": "exactly_once"}, "producer_acks", "transactions need acks=all"),
        ({"producer_compression_type": "brotli"}, "producer_compression_type", "not a compression type"),
        ({"consumer_isolation_level": "dirty"}, "consumer_isolation_level", "not one of read_uncommitted"),
        (
            {"consumer_isolation_level": "read_uncommitted", "processing_guarantee": "exactly_once"},
            "consumer_isolation_level",
            "would read aborted records",
        ),
        ({"broker_session_timeout": 60.0, "broker_request_timeout": 30.0}, "broker_request_timeout", "below"),
        ({"producer_max_request_size": 1000}, "producer_max_request_size", "below producer_max_batch_size"),
        ({"broker_max_poll_interval": 0}, "broker_max_poll_interval", "must be > 0"),
        ({"consumer_max_fetch_size": 0}, "consumer_max_fetch_size", "must be > 0"),
        ({"broker_client_id": ""}, "broker_client_id", "must not be empty"),
        ({"log_format": "xml"}, "log_format", "unknown format"),
        ({"logging_config": ["not", "a", "dict"]}, "logging_config", "dictConfig dictionary"),
        ({"loghandlers": ["stderr"]}, "loghandlers", "logging.Handler"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone", "not a known timezone"),
        ({"timezone": 3}, "timezone", "timezone name or tzinfo"),
    ],
)
def test_refused_at_app_construction(options: dict[str, Any], setting: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        App("refused", broker="kafka://127.0.0.1:1", **options)
    assert info.value.setting == setting
    assert why in str(info.value) and "Fix:" in str(info.value)


def test_a_codec_without_its_library_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cramjam" else real(name, *a))
    with pytest.raises(ConfigError, match="pip install cramjam") as info:
        App("no-lib", broker="kafka://127.0.0.1:1", producer_compression_type="lz4")
    assert info.value.setting == "producer_compression_type"
    App("gzip-ok", broker="kafka://127.0.0.1:1", producer_compression_type="gzip")  # the standard library's


def test_unset_spellings_mean_unset() -> None:
    s = Settings.build("unset", {"producer_compression_type": "none", "consumer_group_instance_id": " "}, environ={})
    assert s.producer_compression_type is None and s.consumer_group_instance_id is None


def test_faust_and_agentstream_environment_variables_set_them() -> None:
    s = Settings.build(
        "env",
        {"consumer_auto_offset_reset": "earliest"},
        environ={
            "CONSUMER_AUTO_OFFSET_RESET": "latest",
            "PRODUCER_COMPRESSION_TYPE": "gzip",
            "PRODUCER_ACKS": "all",
            "BROKER_CLIENT_ID": "from-env",
            "CONSUMER_GROUP_INSTANCE_ID": "pod-3",
            "TIMEZONE": "Europe/Paris",
            "AGENTSTREAM_BROKER_MAX_POLL_INTERVAL": "42",
            "AGENTSTREAM_LOG_FORMAT": "json",
            "AGENTSTREAM_PRODUCER_ACKS": "1",  # AGENTSTREAM_* wins over Faust's variable
        },
    )
    got = (
        s.consumer_auto_offset_reset,
        s.producer_compression_type,
        s.producer_acks,
        s.broker_client_id,
        s.consumer_group_instance_id,
        s.timezone,
        s.broker_max_poll_interval,
        s.log_format,
    )
    assert got == ("latest", "gzip", 1, "from-env", "pod-3", "Europe/Paris", 42.0, "json")


def test_logging_objects_are_app_arguments_only() -> None:
    handler = logging.NullHandler()
    s = Settings.build(
        "objs", {"loghandlers": [handler], "logging_config": {"version": 1}}, environ={"AGENTSTREAM_LOGHANDLERS": "x"}
    )
    assert s.loghandlers == [handler] and s.logging_config == {"version": 1}
