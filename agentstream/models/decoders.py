"""Generated decoders: one straight-line function per Record class, as dataclasses generates
``__init__``: the field names are constants and the common exact-type case is checked inline, so
decoding a record runs no loops, builds no intermediate dicts and calls nothing for scalars that
already have the right type.

Decoding is Faust's: a value that does not convert to its field's type is kept as it was read
(``"42"`` in an ``int`` field stays ``"42"``), a ``null`` or missing field with a default takes the
default, and only a missing required field, a failed ``coerce=True`` conversion or a broken
``validation=True`` rule refuses the record. The leniency costs nothing on the clean path: it is the
``except`` branch of a conversion that already failed.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .converters import FAST_TYPES, Converter, conv_any
from .errors import FieldError, show

__all__ = ["FieldSpec", "MISSING", "compile_decoder"]

MISSING: Any = dataclasses.MISSING


class FieldSpec(typing.NamedTuple):
    """Everything decoding needs about one field, precomputed per class."""

    name: str
    convert: Converter
    default: Any  # MISSING when there is none
    factory: Callable[[], Any] | None
    key: str | None = None  # the key it is read from (Faust's input_name) when not ``name``
    strict: bool = False  # a conversion failure refuses the record (coerce=True); else the value is kept


def _not_an_object(cls: type, data: Any) -> Any:
    """Slow path of a decoder: accept instances and other Mappings, reject everything else."""
    if isinstance(data, cls):
        return data
    if isinstance(data, Mapping):
        return dict(data)
    raise FieldError(f"expected an object for {cls.__name__}, got {show(data)}")


def _missing(name: str) -> FieldError:
    err = FieldError("required field is missing")
    err.path.append(name)
    return err


def compile_decoder(
    cls: type, specs: list[FieldSpec], post_init: bool, check: Callable[[Any], None] | None = None
) -> Callable[[Any], Any]:
    """Generate a straight-line decoder for ``cls`` (as dataclasses generates ``__init__``).

    One function per class with the field names as constants and the common exact-type case
    checked inline: no loops, dict building or per-field calls for already-correct scalars.
    ``check(obj)``, when given, runs on the finished record and raises :class:`FieldError`.
    """
    ns: dict[str, Any] = {
        "cls": cls,
        "_new": object.__new__,
        "_MISSING": MISSING,
        "FieldError": FieldError,
        "_missing": _missing,
        "_not_an_object": _not_an_object,
    }
    lines = [
        "def decode(data):",
        "    if type(data) is not dict:",
        "        data = _not_an_object(cls, data)",
        "        if type(data) is not dict:",  # an instance passed where data was expected
        "            return data",
    ]
    for i, spec in enumerate(specs):
        v, key = f"_v{i}", repr(spec.key or spec.name)
        ns[f"_c{i}"] = spec.convert
        if spec.factory is None and spec.default is MISSING:
            lines += [
                "    try:",
                f"        {v} = data[{key}]",
                "    except KeyError:",
                f"        raise _missing({key}) from None",
            ]
            indent = "    "
        else:  # missing or null: the default (Faust's `x if x is not None else default`)
            ns[f"_d{i}"] = spec.default
            ns[f"_f{i}"] = spec.factory
            fallback = f"_f{i}()" if spec.factory is not None else f"_d{i}"
            lines += [
                f"    {v} = data.get({key})",
                f"    if {v} is None:",
                f"        {v} = {fallback}",
                "    else:",
            ]
            indent = "        "
        if spec.convert is conv_any:
            lines.append(f"{indent}pass")
            continue
        fast = FAST_TYPES.get(spec.convert)
        if fast is not None:
            ns[f"_t{i}"] = fast
            lines.append(f"{indent}if type({v}) is not _t{i}:")
            indent += "    "
        lines += [f"{indent}try:", f"{indent}    {v} = _c{i}({v})", f"{indent}except FieldError as exc:"]
        if spec.strict:
            lines += [f"{indent}    exc.path.append({key})", f"{indent}    raise"]
        else:  # Faust keeps what it read when it does not convert
            lines.append(f"{indent}    pass")
    values = ", ".join(f"{s.name!r}: _v{i}" for i, s in enumerate(specs))
    lines += ["    obj = _new(cls)", f"    obj.__dict__ = {{{values}}}"]
    if post_init:
        lines.append("    obj.__post_init__()")
    if check is not None:
        ns["_check"] = check
        lines.append("    _check(obj)")
    lines.append("    return obj")
    exec("\n".join(lines), ns)
    decode = typing.cast("Callable[[Any], Any]", ns["decode"])
    decode.__qualname__ = f"{cls.__qualname__}._decoder"
    return decode
