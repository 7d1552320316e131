"""Faust's ``faust.serializers.codecs`` API over agentstream's codec registry.

Faust codecs subclass :class:`Codec` and implement ``_dumps``/``_loads``; ``register(name,
codec)`` makes ``value_serializer=name`` work, and ``a | b`` chains codecs (``dumps`` runs
``a`` then ``b``, ``loads`` the reverse), e.g. ``codecs.get('json') | codecs.get('binary')``.
Codecs registered here are the same objects agentstream's topics use.

There is one codec interface, :class:`agentstream.codecs.Codec` (``dumps``/``loads``, ``None``
kept as ``None``); Faust's ``Codec`` here is a base class that implements it on top of Faust's
``_dumps``/``_loads`` hooks, so a Faust codec is an agentstream codec (``register`` checks it so).
"""

from __future__ import annotations

from typing import Any

from agentstream import codecs as _codecs

__all__ = ["Codec", "CodecArg", "register", "get_codec", "dumps", "loads", "codecs"]


class Codec:
    """Base class of Faust-style codecs: override ``_dumps(obj) -> bytes`` and ``_loads(bytes)``;
    ``dumps``/``loads`` (agentstream's codec interface) call them and the chained children."""

    def __init__(self, children: tuple[Codec | Any, ...] | None = None, **kwargs: Any) -> None:
        self.children: tuple[Any, ...] = tuple(children or ())
        self.nodes: tuple[Any, ...] = (self,) + self.children
        self.kwargs = kwargs

    def _dumps(self, obj: Any) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} must implement _dumps")

    def _loads(self, s: bytes) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement _loads")

    def dumps(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        data: Any = self._dumps(obj)
        for child in self.children:
            data = child.dumps(data)
        return data  # type: ignore[no-any-return]

    def loads(self, s: bytes | None) -> Any:
        if s is None:
            return None
        data: Any = s
        for child in reversed(self.children):
            data = child.loads(data)
        return self._loads(data)

    def clone(self, *children: Any) -> Codec:
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.children = self.children + children
        new.nodes = (new,) + new.children
        return new

    def __or__(self, other: Any) -> Codec:
        return self.clone(other)

    def __repr__(self) -> str:
        return " | ".join(type(n).__name__ for n in self.nodes)


class _Wrapped(Codec):
    """An agentstream codec (``json``, ``raw``...) usable in ``|`` chains."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def _dumps(self, obj: Any) -> bytes:
        return self.inner.dumps(obj)  # type: ignore[no-any-return]

    def _loads(self, s: bytes) -> Any:
        return self.inner.loads(s)


CodecArg = _codecs.Codec | Codec | str | None
"""A codec given by object or registered name (Faust's ``CodecArg``)."""


def register(name: str, codec: Any) -> None:
    """Make ``codec`` available as ``key_serializer``/``value_serializer``/Record ``serializer=name``."""
    _codecs.register(name, codec)


def get_codec(name_or_codec: Any) -> Codec:
    """A registered codec by name (or the codec itself), composable with ``|``."""
    if isinstance(name_or_codec, Codec):
        return name_or_codec
    inner = _codecs.get(name_or_codec) if isinstance(name_or_codec, str) else name_or_codec
    return inner if isinstance(inner, Codec) else _Wrapped(inner)


get = get_codec


def dumps(codec: Any, obj: Any) -> bytes | None:
    """Encode with a codec given by name or object (Faust's ``codecs.dumps``)."""
    return get_codec(codec).dumps(obj) if codec is not None else obj


def loads(codec: Any, s: bytes | None) -> Any:
    """Decode with a codec given by name or object (Faust's ``codecs.loads``)."""
    return get_codec(codec).loads(s) if codec is not None else s


codecs = _codecs._registry
