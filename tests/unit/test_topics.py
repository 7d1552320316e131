"""``app.topic``'s arguments: every topic option reaches the Topic, Faust's are translated, and a
group of topics passes its options to each member (the options are listed once, in
``agentstream.types.TopicOptions``)."""

from __future__ import annotations

from datetime import timedelta

import pytest

import agentstream
from agentstream.exceptions import TopologyError
from agentstream.topics import TopicGroup
from agentstream.transport.base import TopicSpec
from agentstream.types import TopicOptions


def make_app() -> agentstream.App:
    return agentstream.App("topics-test", broker="memory://topics-test", web_enabled=False, topic_partitions=4)


def test_every_topic_option_reaches_the_topic() -> None:
    app = make_app()
    options: TopicOptions = {
        "key_type": str,
        "value_type": int,
        "partitions": 3,
        "key_serializer": "raw",
        "value_serializer": "json",
        "internal": True,
        "compacted": True,
        "config": {"retention.ms": "1000"},
        "replicas": 3,
        "deleting": True,
        "allow_empty": False,
        "has_prefix": True,
    }
    assert set(options) == TopicOptions.__optional_keys__  # a new option gets a line here
    t = app.topic("t", **options)
    assert (t.key_type, t.value_type, t.partitions) == (str, int, 3)
    assert (t.key_serializer, t.value_serializer, t.internal) == ("raw", "json", True)
    assert (t.allow_empty, t.has_prefix) == (False, True)
    config = {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
    assert t.spec() == TopicSpec("t", 3, True, config, replication_factor=3)
    assert app.topics["t"] is t


def test_left_out_options_take_the_defaults() -> None:
    app = make_app()
    t = app.topic("plain")
    assert (t.key_type, t.value_type, t.internal, t.compacted, t.config) == (None, None, False, False, {})
    assert t.partitions == 4  # topic_partitions
    assert t.value_codec.loads(t.value_codec.dumps({"a": 1})) == {"a": 1}  # the app's serializer (JSON)


def test_faust_arguments_are_translated_next_to_the_options() -> None:
    app = make_app()
    t = app.topic(
        "f", value_type=int, config={"segment.ms": "60000"}, retention=timedelta(seconds=2), compacting=True, replicas=3
    )
    assert t.compacted
    assert t.config == {"retention.ms": "2000", "segment.ms": "60000"}
    assert t.value_type is int
    clash = app.topic("g", config={"retention.ms": "5"}, retention=timedelta(seconds=2))
    assert clash.config == {"retention.ms": "5"}  # the explicit config wins over the translated argument


def test_a_second_declaration_returns_the_first_or_is_refused_when_it_differs() -> None:
    app = make_app()
    t = app.topic("same", value_type=int, partitions=2)
    assert app.topic("same") is t
    assert app.topic("same", value_type=int, partitions=2) is t
    with pytest.raises(TopologyError, match="declared twice"):
        app.topic("same", value_type=str)


def test_several_names_make_a_group_whose_members_take_the_options() -> None:
    app = make_app()
    group = app.topic("a", "b", value_type=int, partitions=2, compacted=True)
    assert isinstance(group, TopicGroup)
    assert group.topics == ("a", "b")
    for name in ("a", "b"):
        member = app.topics[name]
        assert (member.value_type, member.partitions, member.compacted) == (int, 2, True)
