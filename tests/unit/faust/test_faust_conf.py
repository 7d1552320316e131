"""Faust's ``app.conf`` (issue 40, item 6): Faust's names read the effective value, assignments take
effect or are refused as at start, Faust's older names and App(monitor=, config_source=) are
honoured, explicit None means Faust's default, and datadir's ``{conf.name}`` is expanded."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

import agentstream
from agentstream.sensors import Monitor


def _app(**options: object) -> agentstream.App:
    return agentstream.App("conf-app", broker="memory://", **options)


def test_faust_names_read_the_effective_value() -> None:
    app = _app(broker_commit_interval=0.5, datadir="/tmp/d1", value_serializer="raw", origin="proj")
    conf = app.conf
    assert conf.broker_commit_interval == 0.5 == conf.commit_interval
    assert conf.datadir == Path("/tmp/d1")
    assert conf.value_serializer == "raw" and conf.key_serializer == "raw"
    assert conf.origin == "proj"
    assert conf.producer_linger_ms == pytest.approx(app.settings.producer_linger * 1000)
    # a Faust setting not given reads as what runs: agentstream's value, or Faust's default
    assert conf.broker_session_timeout == app.settings.session_timeout
    assert conf.reply_to_prefix == "f-reply-" and conf.autodiscover is False
    with pytest.raises(AttributeError):
        conf.no_such_setting  # noqa: B018


def test_assignments_take_effect_or_are_refused_as_at_start() -> None:
    app = _app()
    settings = app.settings
    app.conf.broker_commit_interval = 4.0
    app.conf.num_standby_replicas = 2  # Faust's older name
    app.conf.value_serializer = "raw"
    assert (settings.commit_interval, settings.table_standby_replicas) == (4.0, 2)
    assert app.settings is settings  # updated in place: the worker's reference sees it
    assert app.value_serializer == "raw"
    with pytest.raises(agentstream.ConfigError) as err:
        app.conf.broker_commit_interval = -1
    assert err.value.setting == "commit_interval"
    assert settings.commit_interval == 4.0  # a refused assignment changes nothing
    with pytest.raises(agentstream.ConfigError) as err:
        app.conf.web_in_thread = True
    assert err.value.setting == "web_in_thread"


def test_on_configured_receivers_assign_through_conf() -> None:
    app = _app()

    @app.on_configured.connect
    def configure(sender: object, conf: object, **kwargs: object) -> None:
        conf.topic_partitions = 3  # type: ignore[attr-defined]

    app.on_configured.send(app, app.conf)
    assert app.settings.topic_partitions == 3


def test_faust_older_names_are_honoured() -> None:
    app = _app(
        default_partitions=5, num_standby_replicas=1, replication_factor=2, client_id="me", create_reply_topic=True
    )
    s = app.settings
    assert (s.topic_partitions, s.table_standby_replicas, s.topic_replication_factor, s.broker_client_id) == (
        5,
        1,
        2,
        "me",
    )
    assert app.conf.reply_create_topic is True and app.conf.default_partitions == 5
    with pytest.raises(agentstream.ConfigError):
        _app(default_partitions=5, topic_partitions=6)  # both: refused, as Faust does


def test_app_monitor_and_config_source_are_honoured() -> None:
    monitor = Monitor()
    app = _app(monitor=monitor)
    assert app.monitor is monitor and monitor in list(app.sensors)
    source = types.SimpleNamespace(topic_partitions=7, broker_commit_interval=0.25)
    app = agentstream.App("conf-src", broker="memory://", topic_partitions=2, config_source=source)
    assert (app.settings.topic_partitions, app.settings.commit_interval) == (7, 0.25)


def test_config_from_object_goes_through_the_refusal_check() -> None:
    app = _app()
    with pytest.raises(agentstream.ConfigError) as err:
        app.config_from_object({"web_transport": "udp://x"})
    assert err.value.setting == "web_transport"
    with pytest.raises(agentstream.ConfigError) as err:
        app.config_from_object({"producer_threaded": True})
    assert err.value.setting == "producer_threaded"


def test_explicit_none_means_faust_s_default() -> None:
    app = _app(web_host=None, broker_credentials=None, canonical_url=None, producer_compression_type=None)
    assert app.settings.web_host == "" and app.settings.canonical_url == ""
    assert agentstream.App("conf-none", broker=None).settings.broker == agentstream.App("conf-none2").settings.broker


def test_datadir_is_expanded_as_faust_does() -> None:
    assert _app(datadir="/tmp/{conf.name}-data").settings.data_dir == Path("/tmp/conf-app-data")
    assert _app(datadir="/tmp/{conf.name}-data", version=2).conf.datadir == Path("/tmp/conf-app-data")
    with pytest.raises(agentstream.ConfigError) as err:
        _app(datadir="/tmp/{conf.nope}")
    assert err.value.setting == "data_dir"


def test_conf_is_one_object() -> None:
    app = _app()
    assert app.conf is app.conf


async def test_on_configured_assignments_reach_the_running_worker() -> None:
    from agentstream.testing import AppHarness

    app = agentstream.App("conf-worker", topic_partitions=1)

    @app.on_configured.connect
    def configure(sender: object, conf: object, **kwargs: object) -> None:
        conf.num_standby_replicas = 1  # type: ignore[attr-defined]
        conf.broker_commit_every = 5  # type: ignore[attr-defined]

    @app.agent(app.topic("src"))
    async def agent(stream: object) -> None:
        async for _ in stream:  # type: ignore[attr-defined]
            pass

    async with AppHarness(app) as h:
        assert h.worker.assignor.standby_replicas == 1
        assert h.worker.settings.extra["broker_commit_every"] == 5
