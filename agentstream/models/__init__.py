"""Typed records: the shape of the values (and keys) that flow through streams and tables.

A :class:`Record` subclass is turned into a :mod:`dataclasses` dataclass when it is defined, so
``orjson`` serialises instances natively (no per-field Python on the encode path). Decoding goes
the other way through a decoder generated once per class from its annotations, so the hot path
never introspects types.

One concern per module (imports point down this list):

- :mod:`.record`: the :class:`Record` base class, the namespace registry, nested-record decoding;
- :mod:`.decoders`: the generated per-class decoder;
- :mod:`.wire`: Faust's per-field wire options (``input_name``/``output_name``/``exclude``, ``coerce``...);
- :mod:`.encoding`: JSON encoding (``json_dumps``, Faust's ``__faust`` tag);
- :mod:`.validation`: strict constructor checks (``validation=True``);
- :mod:`.converters`: per-type converters (``type_decoder``);
- :mod:`.options`, :mod:`.errors`: class options; :class:`FieldError` and how values are shown.

.. code-block:: python

    class Point(Record):
        x: int
        y: int = 0

    Point.loads(b'{"x": 1}')          # Point(x=1, y=0)
    Point(x=1).dumps()                # b'{"x":1,"y":0}'
"""

from __future__ import annotations

from .converters import Converter, type_decoder
from .encoding import json_default, json_dumps, set_serializer_codecs
from .errors import FieldError
from .options import FAUST_KEY, FAUST_ONLY_OPTIONS, RecordOptions
from .record import FieldDescriptor, Record, lookup_model, registry, type_hints
from .wire import wire_fields

_type_hints = type_hints  # the exporter's schema inference imports this name

__all__ = [
    "Converter",
    "FAUST_KEY",
    "FAUST_ONLY_OPTIONS",
    "FieldDescriptor",
    "FieldError",
    "Record",
    "RecordOptions",
    "json_default",
    "json_dumps",
    "lookup_model",
    "registry",
    "set_serializer_codecs",
    "type_decoder",
    "type_hints",
    "wire_fields",
]
