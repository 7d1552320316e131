"""``faust.Schema``: a topic's key and value types and serializers in one object.

``app.topic("t", schema=Schema(key_type=str, value_type=Order))`` declares the topic with them
(:func:`agentstream.faust_args.topic_options` reads these four attributes), and ``loads_*``/
``dumps_*`` encode and decode with the same codecs the topic uses. An app's ``Schema`` setting
(a subclass) is the class of the default schema of a topic or channel declared without one, as in
Faust: its class attributes fill in what the declaration leaves out. A Schema *subclass* that
overrides the encode/decode hooks (Faust's header-driven schemas) is refused when it is defined:
agentstream topics decode with their codecs, so such a hook would be skipped silently.
"""

from __future__ import annotations

from typing import Any

from . import codecs

__all__ = ["Schema"]

_HOOKS = (
    "loads_key",
    "loads_value",
    "dumps_key",
    "dumps_value",
    "on_dumps_key_prepare_headers",
    "on_dumps_value_prepare_headers",
    "decode",
    "compile",
)


class Schema:
    """Key/value types and serializers (Faust's ``faust.Schema``)."""

    key_type: Any = None
    value_type: Any = None
    key_serializer: Any = None
    value_serializer: Any = None
    allow_empty: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        overridden = [name for name in _HOOKS if name in cls.__dict__]
        if overridden:
            raise TypeError(
                f"{cls.__name__} overrides Schema.{overridden[0]}: agentstream topics encode and decode with "
                "their codecs and never call a Schema's hooks. Fix: register a codec "
                "(agentstream.faust.serializers.codecs.register) and pass key_serializer=/value_serializer="
            )

    def __init__(
        self,
        *,
        key_type: Any = None,
        value_type: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        allow_empty: bool | None = None,
    ) -> None:
        self.update(
            key_type=key_type,
            value_type=value_type,
            key_serializer=key_serializer,
            value_serializer=value_serializer,
            allow_empty=allow_empty,
        )

    def update(
        self,
        *,
        key_type: Any = None,
        value_type: Any = None,
        key_serializer: Any = None,
        value_serializer: Any = None,
        allow_empty: bool | None = None,
    ) -> None:
        """Change the given attributes (Faust's ``Schema.update``)."""
        for name, value in (
            ("key_type", key_type),
            ("value_type", value_type),
            ("key_serializer", key_serializer),
            ("value_serializer", value_serializer),
            ("allow_empty", allow_empty),
        ):
            if value is not None:
                setattr(self, name, value)

    def _key_codec(self, serializer: Any = None) -> codecs.Codec:
        return codecs.side_codec(self.key_type, serializer or self.key_serializer, "raw")

    def _value_codec(self, serializer: Any = None) -> codecs.Codec:
        return codecs.side_codec(self.value_type, serializer or self.value_serializer, "json")

    def loads_key(self, app: Any, message: Any, *, loads: Any = None, serializer: Any = None) -> Any:
        """The message's key decoded as the topic would."""
        return self._key_codec(serializer).loads(message.key)

    def loads_value(self, app: Any, message: Any, *, loads: Any = None, serializer: Any = None) -> Any:
        """The message's value decoded as the topic would."""
        return self._value_codec(serializer).loads(message.value)

    def dumps_key(self, app: Any, key: Any, *, serializer: Any = None, headers: Any = None) -> tuple[Any, Any]:
        """``(key bytes, headers)``, encoded as the topic would."""
        return self._key_codec(serializer).dumps(key), headers

    def dumps_value(self, app: Any, value: Any, *, serializer: Any = None, headers: Any = None) -> tuple[Any, Any]:
        """``(value bytes, headers)``, encoded as the topic would."""
        return self._value_codec(serializer).dumps(value), headers

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__}: KT={self.key_type!r} ({self.key_serializer!r}) "
            f"VT={self.value_type!r} ({self.value_serializer!r})>"
        )
