"""What each topic an app needs is created with (its TopicSpec and the CreateTopics configs built
from it): changelogs compacted, windowed changelogs compact,delete with a retention covering a
window's life, repartition topics delete, Faust's replicas=, deleting=, extra_topic_configs and
changelog_topic= honoured."""

from __future__ import annotations

import pytest

import agentstream
from agentstream.exceptions import ConfigError, TopologyError
from agentstream.tables.windowed import CHANGELOG_ADDITIONAL_RETENTION_MS
from agentstream.transport.base import TopicSpec
from agentstream.transport.kafka.topic_requests import creation_configs, new_topic, replication_for


def make_app(**settings: object) -> agentstream.App:
    return agentstream.App("specs", broker="memory://specs", web_enabled=False, topic_partitions=4, **settings)


def created_with(spec: TopicSpec) -> dict[str, str]:
    return creation_configs(spec)


def test_a_changelog_is_compacted_and_takes_the_tables_extra_topic_configs() -> None:
    app = make_app()
    table = app.Table("totals", default=int, extra_topic_configs={"segment.ms": 60_000, "min.insync.replicas": "2"})
    spec = table.changelog_topic.spec()
    assert spec.name == "specs-totals-changelog" and spec.partitions == 4
    assert created_with(spec) == {"cleanup.policy": "compact", "segment.ms": "60000", "min.insync.replicas": "2"}


def test_a_windowed_changelog_is_compacted_and_deleted_after_a_windows_life() -> None:
    app = make_app()
    app.Table("views", default=int).tumbling(60, expires=3600)
    app.Table("hops", default=int).hopping(10, 5, grace=120)  # expires defaults to the size: grace rules
    views = created_with(app.tables["views"].changelog_topic.spec())
    hops = created_with(app.tables["hops"].changelog_topic.spec())
    assert views == {
        "cleanup.policy": "compact,delete",
        "retention.ms": str(3_660_000 + CHANGELOG_ADDITIONAL_RETENTION_MS),
    }
    assert hops["retention.ms"] == str(10_000 + 120_000 + CHANGELOG_ADDITIONAL_RETENTION_MS)


def test_extra_topic_configs_win_over_the_windowed_defaults() -> None:
    app = make_app()
    app.Table("views", default=int, extra_topic_configs={"retention.ms": "5"}).tumbling(60)
    assert created_with(app.tables["views"].changelog_topic.spec()) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "5",
    }


def test_changelog_topic_given_is_the_tables_changelog() -> None:
    app = make_app()
    topic = app.topic("my-changelog", partitions=6, replicas=3)
    table = app.Table("t", default=int, changelog_topic=topic, extra_topic_configs={"segment.ms": "1"})
    assert table.changelog_topic is topic and table.partitions == 6
    assert "specs-t-changelog" not in app.topics
    spec = topic.spec()
    assert (spec.name, spec.replication_factor) == ("my-changelog", 3)
    assert created_with(spec) == {"cleanup.policy": "compact", "segment.ms": "1"}
    with pytest.raises(TopologyError, match="changelog_topic"):
        app.Table("u", default=int, partitions=2, changelog_topic=app.topic("other", partitions=3))


async def test_a_repartition_topic_is_deleted_by_time_not_compacted() -> None:
    app = make_app()
    source = app.topic("orders", value_type=dict)

    @app.agent(source)
    async def by_customer(stream: agentstream.Stream) -> None:
        async for _ in stream.group_by(lambda v: v["c"], name="by_customer"):
            pass

    await app.discover()
    spec = app.topics["specs-by_customer-repartition"].spec()
    assert created_with(spec) == {"cleanup.policy": "delete"}
    assert created_with(source.spec()) == {}  # a plain topic: the broker's defaults


def test_faust_topic_arguments_replicas_and_deleting() -> None:
    app = make_app()
    spec = app.topic("t", replicas=3, deleting=True, retention=10.0).spec()
    assert spec.replication_factor == 3
    assert created_with(spec) == {"cleanup.policy": "delete", "retention.ms": "10000"}
    assert app.topic("reply", replicas=0).spec().replication_factor is None  # Faust's 0: the app's setting


@pytest.mark.parametrize(("setting", "own", "asked"), [(-1, None, -1), (3, None, 3), (3, 2, 2), (-1, 5, 5)])
def test_the_replication_factor_asked(setting: int, own: int | None, asked: int) -> None:
    app = make_app(topic_replication_factor=setting)
    spec = app.topic("t", replicas=own).spec()
    factor = replication_for(spec, app.settings.topic_replication_factor)
    assert factor == asked
    assert new_topic(spec, factor).replication_factor == asked  # -1 goes on the wire as is (KIP-464)


def test_replication_factor_setting_is_checked() -> None:
    assert make_app().settings.topic_replication_factor == -1  # the broker's default
    assert make_app(topic_replication_factor=None).settings.topic_replication_factor == -1  # Faust's None
    for bad in (0, -2):
        with pytest.raises(ConfigError, match="topic_replication_factor"):
            make_app(topic_replication_factor=bad)
    with pytest.raises(ConfigError, match="repartition_purge_interval"):
        make_app(repartition_purge_interval=-1)
