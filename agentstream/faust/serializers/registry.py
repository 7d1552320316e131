"""``faust.serializers.Registry``: encode and decode keys and values by type and serializer, with the
codecs agentstream's topics use (Faust's ``app.serializers``)."""

from __future__ import annotations

from typing import Any

from agentstream import codecs

__all__ = ["Registry"]


class Registry:
    """``loads_key(typ, data)``, ``dumps_value(typ, obj)``...: the serializer given, else the type's own
    (a Record's ``serializer=``), else this registry's defaults (``raw`` keys, ``json`` values)."""

    def __init__(self, key_serializer: Any = "raw", value_serializer: Any = "json") -> None:
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer

    def loads_key(self, typ: Any, key: bytes | None, *, serializer: Any = None) -> Any:
        return codecs.side_codec(typ, serializer, self.key_serializer).loads(key)

    def loads_value(self, typ: Any, value: bytes | None, *, serializer: Any = None) -> Any:
        return codecs.side_codec(typ, serializer, self.value_serializer).loads(value)

    def dumps_key(self, typ: Any, key: Any, *, serializer: Any = None) -> bytes | None:
        return codecs.side_codec(typ, serializer, self.key_serializer).dumps(key)

    def dumps_value(self, typ: Any, value: Any, *, serializer: Any = None) -> bytes | None:
        return codecs.side_codec(typ, serializer, self.value_serializer).dumps(value)
