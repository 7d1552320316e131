"""Every Faust setting is honoured, refused at start, or not applicable (issue 27).

The names and defaults come from faust-streaming itself (the test-only virtualenv of the
takeover test); agentstream's table (agentstream/faust_settings.py) must list each one, with
Faust's default, and do what it says: an honoured one reaches the agentstream setting, a refused
one makes ``App(...)`` raise ConfigError naming it (only when it asks for more than Faust's
default), a not-applicable one is accepted. docs/faust-settings.md is the table, rendered.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream import faust_settings
from agentstream.faust_settings import FAUST_SETTINGS, Status
from tests.faust_takeover.faust_env import ensure_faust_venv

ROOT = Path(__file__).resolve().parents[3]

FAUST_SIDE = r"""
import json, enum
from faust.types.settings import Settings
out = {}
for name, s in Settings.SETTINGS.items():
    d = s.default
    if isinstance(d, enum.Enum):
        d = d.value
    elif not isinstance(d, (str, int, float, bool, type(None))):
        d = repr(d) if name != "web_transport" else str(d)
    out[name] = d
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def faust_defaults() -> dict[str, Any]:
    py, why = ensure_faust_venv()
    if py is None:
        pytest.skip(f"faust-streaming cannot be installed in a test virtualenv: {why}")
    done = subprocess.run([str(py), "-c", FAUST_SIDE], capture_output=True, text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_every_faust_setting_is_in_the_table_with_faust_s_default(faust_defaults: dict[str, Any]) -> None:
    assert sorted(faust_defaults) == sorted(FAUST_SETTINGS), "the table must list exactly Faust's settings"
    computed = {n for n, e in FAUST_SETTINGS.items() if e.default is faust_settings._UNSET}
    for name, default in faust_defaults.items():
        if name in computed or isinstance(default, str) and default.startswith("<"):
            continue  # computed from other settings (timezone, client id) or an object without a value
        ours = FAUST_SETTINGS[name].default
        assert str(ours) == str(default), f"{name}: Faust's default is {default!r}, the table says {ours!r}"


def test_not_applicable_settings_are_a_handful_each_with_a_reason() -> None:
    na = [e for e in FAUST_SETTINGS.values() if e.status is Status.NOT_APPLICABLE]
    # Aerospike's four, the three api_version ones aiokafka deprecated, Faust's Cython switch, and
    # the two ack settings Faust deprecated in 1.0 (no effect there)
    assert len(na) <= 10, [e.name for e in na]
    assert all(len(e.how) > 20 for e in FAUST_SETTINGS.values() if e.status is not Status.HONOURED)


# A value that asks for more than Faust's default, per refused setting.
ASKS = {
    "timezone": "Europe/Paris",
    "agent_supervisor": "mode.CrashingSupervisor",
    "blocking_timeout": 5.0,
    "broker_consumer": "kafka://a:9092",
    "broker_producer": "kafka://a:9092",
    "broker_api_version": "2.0.0",
    "broker_check_crcs": False,
    "broker_client_id": "me",
    "broker_commit_every": 100,
    "broker_commit_livelock_soft_timeout": 10.0,
    "broker_max_poll_interval": 10.0,
    "broker_request_timeout": 10.0,
    "consumer_api_version": "2.0.0",
    "consumer_max_fetch_size": 1024,
    "consumer_auto_offset_reset": "latest",
    "consumer_group_instance_id": "w1",
    "consumer_metadata_max_age_ms": 1000,
    "consumer_connections_max_idle_ms": 1000,
    "logging_config": {"version": 1},
    "loghandlers": ["h"],
    "producer_acks": 1,
    "producer_api_version": "2.0.0",
    "producer_compression_type": "gzip",
    "producer_max_request_size": 1000,
    "producer_partitioner": lambda *a: 0,
    "producer_request_timeout": 10.0,
    "producer_threaded": True,
    "producer_metadata_max_age_ms": 1000,
    "producer_connections_max_idle_ms": 1000,
    "recovery_consistency_check": False,
    "reply_expires": 10.0,
    "reply_to": "replies",
    "reply_to_prefix": "r-",
    "stream_processing_timeout": 10.0,
    "stream_publish_on_commit": True,
    "stream_recovery_delay": 3.0,
    "stream_wait_empty": False,
    "table_key_index_size": 10,
    "topic_allow_declare": False,
    "topic_disable_leader": True,
    "topic_replication_factor": 3,
    "cache": "redis://",
    "web": "other://",
    "web_application_options": {"client_max_size": 1},
    "web_cors_options": {"*": {}},
    "web_stats_enabled": False,
    "web_graph_enabled": True,
    "web_router_enabled": False,
    "web_tables_enabled": False,
    "web_metrics_enabled": True,
    "web_in_thread": True,
    "web_ssl_context": object(),
    "web_transport": "unix:///tmp/s",
    "canonical_url": "http://me:1",
    "worker_redirect_stdouts": False,
    "worker_redirect_stdouts_level": "INFO",
    "id_format": "{id}.{self.version}",
    "stream_ack_cancelled_tasks": False,
    "stream_ack_exceptions": False,
}
CLASS_SETTINGS = {
    "Event", "Schema", "Table", "SetTable", "GlobalTable", "SetGlobalTable", "TableManager", "Serializers",
    "Worker", "PartitionAssignor", "LeaderAssignor", "Router", "HttpClient", "Monitor", "ConsumerScheduler",
}  # fmt: skip
REFUSED = sorted(n for n, e in FAUST_SETTINGS.items() if e.status is Status.REFUSED)


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_setting_stops_the_app_at_start_naming_it(name: str) -> None:
    value = type("Custom", (), {}) if name in CLASS_SETTINGS else ASKS[name]
    with pytest.raises(agentstream.ConfigError) as err:
        agentstream.App("settings-table", **{name: value})
    assert err.value.setting == name and name in str(err.value)
    # its Faust default asks for nothing more: accepted
    default = FAUST_SETTINGS[name].default
    if default not in (faust_settings._UNSET, None) and name not in CLASS_SETTINGS:
        agentstream.App("settings-table", **{name: default})


HONOURED_VALUES: dict[str, tuple[Any, str, Any]] = {
    # Faust name: (value, agentstream setting, what it becomes)
    "datadir": ("/tmp/faust-data", "data_dir", Path("/tmp/faust-data")),
    "tabledir": ("my-tables", "tabledir", "my-tables"),
    "debug": (True, "debug", True),
    "version": (3, "version", 3),
    "broker": ("kafka://a:9092", "broker", "kafka://a:9092"),
    "url": ("kafka://b:9092", "broker", "kafka://b:9092"),
    "broker_commit_interval": (0.5, "commit_interval", 0.5),
    "broker_heartbeat_interval": (1.0, "heartbeat_interval", 1.0),
    "broker_max_poll_records": (10, "max_poll_records", 10),
    "broker_rebalance_timeout": (5.0, "rebalance_timeout", 5.0),
    "broker_session_timeout": (6.0, "session_timeout", 6.0),
    "processing_guarantee": ("exactly_once", "processing_guarantee", "exactly_once"),
    "stream_buffer_maxsize": (10, "buffer_max_records", 10),
    "store": ("memory://", "store", "memory://"),
    "table_cleanup_interval": (5.0, "table_cleanup_interval", 5.0),
    "table_standby_replicas": (0, "table_standby_replicas", 0),
    "topic_partitions": (3, "topic_partitions", 3),
    "producer_linger": (0.01, "producer_linger", 0.01),
    "producer_linger_ms": (20, "producer_linger", 0.02),
    "producer_max_batch_size": (1000, "producer_max_batch_size", 1000),
    "web": ("aiohttp://localhost", "web", "aiohttp://localhost"),  # Faust picks the driver by the scheme
    "web_enabled": (False, "web_enabled", False),
    "web_port": (7000, "web_port", 7000),
    "web_host": ("10.0.0.1", "web_host", "10.0.0.1"),
    "web_bind": ("10.0.0.2", "web_bind", "10.0.0.2"),
    "topic_replication_factor": (3, "topic_replication_factor", 3),
    "canonical_url": ("http://me:1", "canonical_url", "http://me:1"),
    "web_stats_enabled": (False, "web_stats_enabled", False),
    "web_router_enabled": (False, "web_router_enabled", False),
    "web_tables_enabled": (False, "web_tables_enabled", False),
    "web_application_options": ({"client_max_size": 1}, "web_application_options", {"client_max_size": 1}),
    "timezone": ("Europe/Paris", "timezone", "Europe/Paris"),
    "broker_check_crcs": (False, "broker_check_crcs", False),
    "broker_client_id": ("me", "broker_client_id", "me"),
    "broker_max_poll_interval": (10.0, "broker_max_poll_interval", 10.0),
    "broker_request_timeout": (100.0, "broker_request_timeout", 100.0),
    "consumer_max_fetch_size": (2048, "consumer_max_fetch_size", 2048),
    "consumer_auto_offset_reset": ("latest", "consumer_auto_offset_reset", "latest"),
    "consumer_group_instance_id": ("w1", "consumer_group_instance_id", "w1"),
    "consumer_metadata_max_age_ms": (1000, "consumer_metadata_max_age_ms", 1000),
    "consumer_connections_max_idle_ms": (1000, "consumer_connections_max_idle_ms", 1000),
    "logging_config": ({"version": 1}, "logging_config", {"version": 1}),
    "producer_acks": (1, "producer_acks", 1),
    "producer_compression_type": ("gzip", "producer_compression_type", "gzip"),
    "producer_max_request_size": (2_000_000, "producer_max_request_size", 2_000_000),
    "producer_request_timeout": (10.0, "producer_request_timeout", 10.0),
    "producer_metadata_max_age_ms": (1000, "producer_metadata_max_age_ms", 1000),
    "producer_connections_max_idle_ms": (1000, "producer_connections_max_idle_ms", 1000),
}


@pytest.mark.parametrize("name", sorted(HONOURED_VALUES))
def test_an_honoured_setting_reaches_agentstream_s(name: str) -> None:
    assert FAUST_SETTINGS[name].status is Status.HONOURED
    value, ours, becomes = HONOURED_VALUES[name]
    app = agentstream.App("settings-table", **{name: value})
    assert getattr(app.settings, ours) == becomes


def test_every_honoured_setting_is_shown_somewhere() -> None:
    """Each honoured name is either checked above (it reaches a setting) or consumed by a feature
    whose own tests show it (the serializers, autodiscover, credentials, the classes...)."""
    by_feature = {
        "autodiscover", "origin", "env_prefix", "key_serializer", "value_serializer", "broker_credentials",
        "ssl_context", "Agent", "Stream", "Topic", "reply_create_topic", "web_ssl_context", "web_cors_options",
        "loghandlers", "broker_commit_every", "reply_expires", "reply_to", "reply_to_prefix",
        "stream_processing_timeout", "stream_wait_empty", "topic_allow_declare", "topic_disable_leader",
        "worker_redirect_stdouts", "worker_redirect_stdouts_level", "Table", "SetTable", "GlobalTable",
        "SetGlobalTable", "Worker", "Monitor", "blocking_timeout", "stream_recovery_delay",
        "broker_commit_livelock_soft_timeout",
        # tests/unit/faust/test_faust_settings_honoured_round_two.py
        "id_format", "agent_supervisor", "table_key_index_size", "cache", "web_graph_enabled", "web_metrics_enabled",
        "stream_publish_on_commit", "producer_partitioner", "HttpClient",
        "broker_consumer", "broker_producer", "web_transport",
        # tests/unit/faust/test_faust_class_settings.py
        "Event", "Schema", "Serializers", "TableManager", "PartitionAssignor", "LeaderAssignor",
    }  # fmt: skip  # the last ten: tests/unit/faust/test_faust_settings_honoured.py
    honoured = {n for n, e in FAUST_SETTINGS.items() if e.status is Status.HONOURED}
    assert honoured == set(HONOURED_VALUES) | by_feature


def test_tabledir_places_the_table_stores(tmp_path: Path) -> None:
    app = agentstream.App("tabledir-app", data_dir=str(tmp_path), tabledir="stores")
    assert app.settings.table_root() == tmp_path / "tabledir-app" / "stores"
    app = agentstream.App("tabledir-app", data_dir=str(tmp_path), tabledir=str(tmp_path / "abs"))
    assert app.settings.table_root() == tmp_path / "abs" / "tabledir-app"


@pytest.mark.asyncio
async def test_debug_turns_on_asyncio_debug_mode_in_the_worker() -> None:
    import asyncio

    from agentstream.testing import AppHarness

    app = agentstream.App("debug-app", topic_partitions=1, debug=True)

    @app.agent(app.topic("t"))
    async def agent(stream: Any) -> None:
        async for _ in stream:
            pass

    loop = asyncio.get_running_loop()
    loop.set_debug(False)
    async with AppHarness(app):
        assert loop.get_debug()
    loop.set_debug(False)


def test_the_docs_page_is_the_table() -> None:
    page = (ROOT / "docs" / "faust-settings.md").read_text()
    from agentstream import faust_arguments

    assert page == faust_settings.render_markdown() + faust_arguments.render_markdown(), (
        "regenerate: make faust-settings-doc"
    )
