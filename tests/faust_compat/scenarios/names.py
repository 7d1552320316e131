"""Names Faust's ``__all__`` and sub-modules export that apps import."""

from __future__ import annotations

import importlib
from typing import Any

from ..registry import scenario

NAMES = {
    "faust": [
        "App", "Agent", "Channel", "ChannelT", "Codec", "Event", "EventT", "GlobalTable", "HoppingWindow",
        "ModelOptions", "Monitor", "Record", "Schema", "Sensor", "Service", "ServiceT", "SetGlobalTable", "SetTable",
        "Settings", "SlidingWindow", "Stream", "StreamT", "Table", "Topic", "TopicT", "TumblingWindow", "Window",
        "Worker", "current_event", "uuid",
    ],
    "faust.exceptions": [
        "FaustError", "Skip", "SameNode", "NotReady", "DecodeError", "KeyDecodeError", "ValueDecodeError",
        "ProducerSendError", "ImproperlyConfigured", "ValidationError",
    ],
    "faust.cli": ["AppCommand", "Command", "argument", "option"],
    "faust.web": ["Blueprint", "View", "Request", "Response", "Web"],
    "faust.web.views": ["takes_model", "gives_model"],
    "faust.models.fields": ["CharField", "NumberField", "IntegerField", "FloatField", "DecimalField", "BooleanField", "DatetimeField", "BytesField", "FieldDescriptor"],
    "faust.types": [
        "AgentT", "AppT", "ChannelT", "CodecT", "EventT", "K", "V", "Message", "ModelT", "RecordMetadata", "SensorT",
        "StreamT", "TableT", "TopicT", "TP", "TransportT", "WindowT",
    ],
    "faust.serializers": ["codecs", "Codec", "Schema"],
}  # fmt: skip


@scenario("Faust's exported names: __all__, faust.exceptions, cli, web, web.views, models.fields, types, serializers")
async def exported_names() -> Any:
    missing = []
    for module, names in NAMES.items():
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{module}: {exc}")
            continue
        missing += [f"{module}.{n}" for n in names if not hasattr(mod, n)]
    return missing


@scenario("faust.__all__ holds Faust's names")
async def faust_all() -> Any:
    import faust

    return sorted(set(faust.__all__) & set(NAMES["faust"]))
