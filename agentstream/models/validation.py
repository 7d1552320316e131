"""``validation=True``: strict type checks of constructor values (no coercion, unlike decoding)."""

from __future__ import annotations

import collections.abc as cabc
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from .converters import DICT_ORIGINS, LIST_ORIGINS, Converter, conv_bool, conv_float, conv_none, literal_converter
from .errors import FieldError, expected, type_name

__all__ = ["checker"]


def checker(tp: Any) -> Converter | None:
    """Strict type check for ``validation=True`` constructors; ``None`` means anything goes."""
    if tp is Any or tp is object:
        return None
    if tp is None or tp is type(None):
        return conv_none
    if tp is bool:
        return conv_bool
    if tp is int:

        def check_int(v: Any) -> Any:
            if not isinstance(v, int) or isinstance(v, bool):
                raise expected("int", v)

        return check_int
    if tp is float:
        return conv_float
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Union or origin is types.UnionType:
        checks = [checker(a) for a in args]
        if any(c is None for c in checks):
            return None
        names = " | ".join(type_name(a) for a in args)

        def check_union(v: Any) -> Any:
            for check in checks:
                try:
                    check(v)  # type: ignore[misc]
                    return
                except FieldError:
                    continue
            raise expected(names, v)

        return check_union
    if origin is Literal:
        return literal_converter(args)
    if origin is typing.Annotated:
        return checker(args[0])
    if origin in LIST_ORIGINS or origin is tuple:
        container: type = origin
        variadic = origin is not tuple or (len(args) == 2 and args[1] is Ellipsis)
        item = checker(args[0]) if args and variadic else None

        def check_items(v: Any) -> Any:
            if not isinstance(v, container):
                raise expected(type_name(tp), v)
            if item is not None:
                for i, x in enumerate(typing.cast("cabc.Iterable[Any]", v)):
                    try:
                        item(x)
                    except FieldError as exc:
                        exc.path.append(f"[{i}]")
                        raise

        return check_items
    if origin in DICT_ORIGINS:
        value_check = checker(args[1]) if len(args) > 1 else None

        def check_dict(v: Any) -> Any:
            if not isinstance(v, Mapping):
                raise expected(type_name(tp), v)
            if value_check is not None:
                for k, x in v.items():
                    try:
                        value_check(x)
                    except FieldError as exc:
                        exc.path.append(f"[{k!r}]")
                        raise

        return check_dict
    if isinstance(tp, type):

        def check_instance(v: Any) -> Any:
            if not isinstance(v, tp):
                raise expected(tp.__name__, v)

        return check_instance
    return None
