"""Faust's serializer registry (``faust.serializers.Registry``, ``app.serializers``): encode and
decode keys and values by type and serializer, with the codecs agentstream's topics use.

An app's ``Serializers`` setting (a subclass of :class:`Registry`, or its ``'module:Class'`` path)
makes ``app.serializers``, and then every topic of the app encodes and decodes its keys and
values through that object's ``dumps_key``/``loads_key``/``dumps_value``/``loads_value``, as
Faust's topics do (:class:`RegistryCodec`); tables keep their codecs (their changelog format is
fixed). Without the setting the topics call their codecs directly, so the per-record path has no
extra call.
"""

from __future__ import annotations

from typing import Any

from . import codecs

__all__ = ["Registry", "RegistryCodec"]


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


class RegistryCodec:
    """One side (``"key"`` or ``"value"``) of a topic or table, encoded and decoded through the app's
    registry (the ``Serializers`` setting's object) with the side's type and serializer."""

    __slots__ = ("registry", "type", "serializer", "_dumps", "_loads")

    def __init__(self, registry: Any, side: str, type_: Any, serializer: Any) -> None:
        self.registry = registry
        self.type = type_
        self.serializer = serializer
        self._dumps = getattr(registry, f"dumps_{side}")
        self._loads = getattr(registry, f"loads_{side}")

    def dumps(self, obj: Any) -> bytes | None:
        data: bytes | None = self._dumps(self.type, obj, serializer=self.serializer)
        return data

    def loads(self, data: bytes | None) -> Any:
        return self._loads(self.type, data, serializer=self.serializer)

    def __repr__(self) -> str:
        return f"<RegistryCodec {type(self.registry).__name__} type={self.type!r} serializer={self.serializer!r}>"
