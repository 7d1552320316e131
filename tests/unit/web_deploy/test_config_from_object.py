"""``app.config_from_object`` as in Faust: a module, class, object or mapping, or the import path of
one; its settings override the App's arguments, environment variables override them."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentstream
from agentstream.exceptions import ConfigError

CONFIG_MODULE = """
import os
from datetime import timedelta

broker = "kafka://cfg-broker:9092"
broker_session_timeout = timedelta(seconds=45)
datadir = "/var/lib/from-config"
web_bind = "0.0.0.0"
canonical_url = "http://worker-a.internal:6066"
BASE = os.sep  # not a setting: not read


class Production:
    topic_partitions = 12
    web_host = "prod.internal"
"""


@pytest.fixture
def config_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module importable from the working directory, as Faust's import_from_cwd finds it."""
    name = f"cfg_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(CONFIG_MODULE)
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


def app(**options: object) -> agentstream.App:
    return agentstream.App(f"cfg-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=2, **options)


def test_a_module_path_overrides_the_apps_arguments(config_module: str) -> None:
    a = app(web_port=7100)
    a.config_from_object(config_module)
    s = a.conf
    assert (s.broker, s.session_timeout, str(s.data_dir)) == ("kafka://cfg-broker:9092", 45.0, "/var/lib/from-config")
    assert (s.web_bind, s.canonical_url) == ("0.0.0.0", "http://worker-a.internal:6066")
    assert s.web_port == 7100  # what the source does not set keeps the App's argument
    assert s.topic_partitions == 2
    assert "BASE" not in s.extra and "os" not in s.extra and "timedelta" not in s.extra


@pytest.mark.parametrize("form", ["{m}:Production", "{m}.Production"])
def test_a_module_attribute_path(config_module: str, form: str) -> None:
    a = app()
    a.config_from_object(form.format(m=config_module))
    assert (a.conf.topic_partitions, a.conf.web_host) == (12, "prod.internal")
    assert a.conf.broker == "memory://"


def test_an_object_a_class_and_a_mapping() -> None:
    class Config:
        topic_partitions = 5
        stream_buffer_maxsize = 123

    a = app()
    a.config_from_object(Config)
    assert (a.conf.topic_partitions, a.conf.buffer_max_records) == (5, 123)
    a.config_from_object(Config())
    assert a.conf.topic_partitions == 5
    a.config_from_object({"version": 2, "web_port": 7200})
    assert (a.id.endswith("-v2"), a.conf.web_port, a.conf.topic_partitions) == (True, 7200, 5)  # calls add up


def test_environment_variables_override_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOPIC_PARTITIONS", "9")
    a = app()
    a.config_from_object({"topic_partitions": 4, "web_port": 7300})
    assert (a.conf.topic_partitions, a.conf.web_port) == (9, 7300)


def test_a_bad_value_in_the_source_names_the_setting() -> None:
    with pytest.raises(ConfigError) as info:
        app().config_from_object({"canonical_url": "http://x:1/path"})
    assert info.value.setting == "canonical_url"


def test_a_source_that_cannot_be_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    a = app(web_port=7400)
    with pytest.raises(ConfigError) as info:
        a.config_from_object("no_such_module_here.settings")
    assert info.value.setting == "config_from_object"
    a.config_from_object("no_such_module_here.settings", silent=True)  # Faust's silent=True: nothing changes
    assert a.conf.web_port == 7400


def test_faust_app_has_it_too() -> None:
    from agentstream.faust import App as FaustApp

    a = FaustApp(f"cfgf-{uuid.uuid4().hex[:6]}", broker="memory://")
    a.config_from_object({"topic_partitions": 3}, force=True)
    assert a.conf.topic_partitions == 3


def test_after_declarations_it_warns_that_they_keep_their_settings(caplog: pytest.LogCaptureFixture) -> None:
    a = app()
    a.topic("early")
    a.config_from_object({"topic_partitions": 6})
    assert a.conf.topic_partitions == 6
    assert any("keep the names and partition counts" in r.getMessage() for r in caplog.records)
