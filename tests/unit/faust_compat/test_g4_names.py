"""Issue 28, G4: every public name of faust-streaming's top-level package and of the sub-modules Faust
apps import from (``faust.types``, ``faust.exceptions``, ``faust.cli``, ``faust.models``...) exists on
``agentstream.faust`` under the same module path, and each one works.

``FAUST_ALL`` is what faust-streaming 0.15.3's ``__all__`` lists hold; ``test_faust_lists_are_these``
reads them from faust-streaming itself (skipped when the Faust virtualenv is not built).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import typing
import warnings
from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace

import pytest

import agentstream
import agentstream.faust as faust
from agentstream import codecs as core_codecs
from agentstream.exceptions import (
    AgentStreamError,
    ConfigError,
    KeyDecodeError,
    PartitionCountMismatch,
    ProducerError,
    TransportError,
    ValidationError,
    ValueDecodeError,
)
from tests.faust_takeover.faust_env import faust_python

FAUST_ALL: dict[str, list[str]] = {
    "faust": [
        "Agent", "App", "Channel", "ChannelT", "Codec", "Event", "EventT", "GSSAPICredentials", "GlobalTable",
        "HoppingWindow", "ModelOptions", "Monitor", "OAuthCredentials", "Record", "SASLCredentials",
        "SSLCredentials", "Schema", "Sensor", "Service", "ServiceT", "SetGlobalTable", "SetTable", "Settings",
        "SlidingWindow", "Stream", "StreamT", "Table", "Topic", "TopicT", "TumblingWindow", "Window", "Worker",
        "current_event", "uuid",
    ],
    "faust.types": [
        "AgentManagerT", "AgentT", "AppT", "ChannelT", "CodecArg", "CodecT", "CollectionT", "ConsumerCallback",
        "ConsumerMessage", "ConsumerT", "EventT", "FieldDescriptorT", "FixupT", "FutureMessage", "HeadersArg",
        "JoinT", "JoinableT", "K", "Message", "MessageSentCallback", "ModelArg", "ModelOptions", "ModelT",
        "PendingMessage", "ProcessingGuarantee", "Processor", "ProducerT", "RecordMetadata", "RegistryT",
        "SchemaT", "SensorT", "ServiceT", "StoreT", "StreamT", "TP", "TableT", "TopicT", "TransactionManagerT",
        "TransportT", "V", "WindowRange", "WindowT",
    ],
    "faust.exceptions": [
        "AlreadyConfiguredWarning", "ConsistencyError", "ConsumerNotStarted", "DecodeError", "FaustError",
        "FaustPredicate", "FaustWarning", "ImproperlyConfigured", "KeyDecodeError", "NotReady",
        "PartitionsMismatch", "ProducerSendError", "SameNode", "SecurityError", "SecurityWarning", "Skip",
        "ValidationError", "ValueDecodeError",
    ],
    "faust.cli": ["AppCommand", "Command", "argument", "call_command", "option"],
    "faust.models": ["FieldDescriptor", "Model", "ModelOptions", "Record", "StringField", "maybe_model", "registry"],
    "faust.models.fields": [
        "BooleanField", "BytesField", "DatetimeField", "DecimalField", "FieldDescriptor", "FloatField",
        "IntegerField", "NumberField", "StringField", "TYPE_TO_FIELD", "field_for_type",
    ],
    "faust.serializers": ["Codec", "Registry", "Schema"],
    "faust.serializers.codecs": ["Codec", "CodecArg", "dumps", "get_codec", "loads", "register"],
    "faust.utils": ["uuid"],
    "faust.windows": ["HoppingWindow", "SlidingWindow", "TumblingWindow", "Window"],
}  # fmt: skip

NAMES = [(module, name) for module, names in FAUST_ALL.items() for name in names]


def test_faust_lists_are_these() -> None:
    py = faust_python()
    if not py.exists():
        pytest.skip("the Faust virtualenv is not built (make faust-venv)")
    modules = list(FAUST_ALL)
    probe = f"import importlib, json; print(json.dumps({{m: sorted(importlib.import_module(m).__all__) for m in {modules!r}}}))"
    done = subprocess.run([str(py), "-W", "ignore", "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {m: sorted(n) for m, n in FAUST_ALL.items()}


@pytest.mark.parametrize(("module", "name"), NAMES, ids=[f"{m}.{n}" for m, n in NAMES])
def test_agentstream_faust_has_the_name(module: str, name: str) -> None:
    ours = importlib.import_module("agentstream." + module)
    assert getattr(ours, name, None) is not None, f"agentstream.{module} has no {name}"


def test_top_level_names_are_answered_by_agentstream_too() -> None:
    for name in FAUST_ALL["faust"]:
        assert getattr(agentstream, name) is getattr(faust, name), name


# -- each name works -------------------------------------------------------------------------------------------------
def test_exception_names_are_agentstreams_tree() -> None:
    from agentstream.faust import exceptions as fx

    assert fx.FaustError is AgentStreamError and issubclass(ConfigError, fx.FaustError)
    assert issubclass(KeyDecodeError, fx.DecodeError) and issubclass(ValueDecodeError, fx.DecodeError)
    assert fx.ProducerSendError is ProducerError and fx.PartitionsMismatch is PartitionCountMismatch
    assert issubclass(fx.NotReady, TransportError) and issubclass(fx.ConsumerNotStarted, fx.NotReady)
    for predicate in (fx.Skip, fx.NotReady, fx.SameNode):
        assert issubclass(predicate, fx.FaustPredicate) and issubclass(predicate, fx.FaustError)
    assert issubclass(fx.ValidationError, ValueError) and issubclass(fx.ConsistencyError, fx.FaustError)
    assert issubclass(fx.AlreadyConfiguredWarning, fx.FaustWarning) and issubclass(fx.FaustWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fx.FaustWarning)
        with pytest.raises(fx.SecurityWarning):
            warnings.warn("insecure", fx.SecurityWarning, stacklevel=1)
    assert faust.FaustError is AgentStreamError and faust.Skip is fx.Skip  # answered at the top level too


def test_a_payload_that_does_not_decode_raises_decode_error() -> None:
    from agentstream.faust.exceptions import DecodeError

    class Point(faust.Record, namespace="g4n.Point"):
        x: int

    with pytest.raises(DecodeError, match="cannot decode Point"):
        core_codecs.codec_for(Point).loads(b"not json")


def test_schema_declares_a_topic_and_codes_as_it() -> None:
    class Point(faust.Record, namespace="g4n.SPoint"):
        x: int

    schema = faust.Schema(key_type=str, value_type=Point, value_serializer="json")
    app = faust.App("g4-schema", broker="memory://")
    topic = app.topic("points", schema=schema)
    assert topic.key_type is str and topic.value_type is Point
    key, _ = schema.dumps_key(app, "k1")
    value, headers = schema.dumps_value(app, Point(x=3), headers=[("h", b"1")])
    assert (key, value, headers) == (b"k1", b'{"x":3,"__faust":{"ns":"g4n.SPoint"}}', [("h", b"1")])
    message = SimpleNamespace(key=key, value=value)  # what loads_* read of a message
    assert schema.loads_key(app, message) == "k1" and schema.loads_value(app, message) == Point(x=3)
    schema.update(allow_empty=True)
    assert schema.allow_empty is True and schema.value_type is Point


def test_a_schema_with_hooks_is_refused_naming_why() -> None:
    with pytest.raises(TypeError, match=r"overrides Schema.loads_value: agentstream topics encode and decode"):

        class Headers(faust.Schema):
            def loads_value(self, app: object, message: object, **kwargs: object) -> object:
                return None


def test_settings_take_fausts_names() -> None:
    settings = faust.Settings("g4-set", broker="kafka://h:1", broker_commit_interval=timedelta(seconds=3))
    assert (settings.id, settings.broker, settings.commit_interval) == ("g4-set", "kafka://h:1", 3.0)
    assert isinstance(settings, agentstream.settings.Settings)
    assert dataclasses.replace(settings, broker="kafka://z:2").commit_interval == 3.0


def test_codec_model_options_window_and_registry() -> None:
    from agentstream.faust.serializers import Registry
    from agentstream.faust.serializers.codecs import get_codec

    class Upper(faust.Codec):
        def _dumps(self, obj: object) -> bytes:
            return str(obj).upper().encode()

        def _loads(self, s: bytes) -> object:
            return s.decode().lower()

    assert (Upper() | get_codec("binary")).loads((Upper() | get_codec("binary")).dumps("ab")) == "ab"

    class Point(faust.Record, namespace="g4n.RPoint"):
        x: Decimal

    assert isinstance(Point._options, faust.ModelOptions) and Point._options.namespace == "g4n.RPoint"
    assert issubclass(faust.TumblingWindow, faust.Window) and issubclass(faust.SlidingWindow, faust.Window)
    registry = Registry()
    data = registry.dumps_value(Point, Point(x=Decimal("1.5")))
    assert registry.loads_value(Point, data) == Point(x=Decimal("1.5"))
    assert registry.loads_key(int, registry.dumps_key(int, 42)) == 42


def test_maybe_model_and_registry() -> None:
    from agentstream.faust.models import maybe_model, registry

    class Tagged(faust.Record, namespace="g4n.Tagged"):
        x: int

    assert registry["g4n.Tagged"] is Tagged
    assert maybe_model({"x": 1, "__faust": {"ns": "g4n.Tagged"}}) == Tagged(x=1)
    assert maybe_model({"x": 1}) == {"x": 1} and maybe_model(5) == 5


def test_types_are_usable_as_faust_uses_them() -> None:
    from agentstream.faust import types as ft

    app = faust.App("g4-guarantee", broker="memory://", processing_guarantee=ft.ProcessingGuarantee.EXACTLY_ONCE)
    assert app.settings.processing_guarantee == "exactly_once"

    def handler(key: ft.K, value: ft.V, codec: ft.CodecArg, headers: ft.HeadersArg, model: ft.ModelArg) -> None:
        pass

    assert set(typing.get_type_hints(handler, localns={"ft": ft})) == {
        "key",
        "value",
        "codec",
        "headers",
        "model",
        "return",
    }
    assert ft.TableT is faust.Table and ft.CollectionT is faust.Table and ft.JoinableT is faust.Stream
    assert ft.PendingMessage(channel=None, key=b"k", value=b"v").partition is None
    with pytest.raises(NotImplementedError, match="Faust fix-ups .* are not supported by agentstream"):
        ft.FixupT()


def test_validation_error_is_faust_shaped() -> None:
    err = ValidationError("Order", "qty", "must be at least 1")
    assert err.reason == "must be at least 1" and err.field == "qty" and isinstance(err, ValueError)
