"""Faust's ``version=`` and environment variables, as faust-streaming applies them (checked with
faust-streaming 0.11: ``faust.App("vapp", version=2)`` has ``conf.id == "vapp-v2"``, changelog
``vapp-v2-counts-changelog``, user topics unprefixed; ``BROKER_URL`` overrides ``broker=``)."""

from __future__ import annotations

import uuid

import pytest

import agentstream
from agentstream.exceptions import ConfigError
from agentstream.settings import Settings


def test_a_new_version_is_a_new_app_in_agentstream_naming_too() -> None:
    app = agentstream.App("vapp", broker="memory://", version=2)
    counts = app.Table("counts", default=int)

    @app.agent()
    async def a(stream: agentstream.Stream) -> None:  # type: ignore[type-arg]
        async for _ in stream:
            pass

    assert app.id == "vapp-v2"  # the consumer group id
    assert counts.changelog_topic.name == "vapp-v2-counts-changelog"
    assert a.topics[0].name.startswith("vapp-v2-")
    assert app.topic("orders").name == "orders"  # the app's own topics keep their names
    assert app.settings.dead_letter_topic == "vapp-v2-dead-letters"


def test_broker_url_from_fausts_environment_variable_overrides_the_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_URL", "kafka://envhost:1234")
    assert agentstream.App(f"e{uuid.uuid4().hex[:6]}").settings.broker == "kafka://envhost:1234"
    assert agentstream.App(f"e{uuid.uuid4().hex[:6]}", broker="kafka://arg:1").settings.broker == "kafka://envhost:1234"
    monkeypatch.setenv("AGENTSTREAM_BROKER", "kafka://ours:9")  # agentstream's own variable wins
    assert agentstream.App(f"e{uuid.uuid4().hex[:6]}").settings.broker == "kafka://ours:9"


def test_fausts_other_variables_prefix_and_broker_lists() -> None:
    env = {"BROKER_URL": "h1:9092;kafka://h2:9093", "TOPIC_PARTITIONS": "5", "WEB_PORT": "7001"}
    s = Settings.build("x", {}, environ=env)
    assert (s.broker, s.topic_partitions, s.web_port) == ("kafka://h1:9092;h2:9093", 5, 7001)  # one canonical URL
    s = Settings.build("x", {"env_prefix": "MYAPP"}, environ={"MYAPP_BROKER_URL": "kafka://p:1", "BROKER_URL": "x"})
    assert s.broker == "kafka://p:1"
    s = Settings.build("x", {}, environ={"PRODUCER_LINGER_MS": "20"})
    assert s.producer_linger == pytest.approx(0.02)
    with pytest.raises(ConfigError, match="TOPIC_PARTITIONS"):
        Settings.build("x", {}, environ={"TOPIC_PARTITIONS": "many"})
