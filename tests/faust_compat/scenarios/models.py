"""Records: validate()/is_valid()/derive(), custom field types, nested polymorphic records."""

from __future__ import annotations

import json
from typing import Any, Optional

import faust

from ..registry import scenario


@scenario("Record validate()/is_valid()/derive() and field types CharField, NumberField (validation=True)")
async def record_validation_and_fields() -> Any:
    from faust.models.fields import CharField, IntegerField, NumberField

    class Order(faust.Record, validation=True):
        sku: str = CharField(max_length=5)
        quantity: int = IntegerField(min_value=1, max_value=10)
        price: float = NumberField(min_value=0)

    good = Order(sku="abc", quantity=2, price=1.5)
    print("good", good.is_valid(), [str(e) for e in good.validate()])
    try:
        Order(sku="toolongsku", quantity=20, price=1.0)
        print("bad constructed")
    except Exception as exc:  # what Faust raises is the reference
        print("bad raised", type(exc).__name__)
    derived = good.derive(quantity=3)
    print("derived", type(derived).__name__, derived.sku, derived.quantity, derived.price)
    return None


@scenario("Records validate lazily (validation=False): is_valid() False and validate() lists errors")
async def record_lazy_validation() -> Any:
    from faust.models.fields import CharField

    class Tag(faust.Record):
        name: str = CharField(max_length=3)

    tag = Tag(name="toolong")
    print("valid", tag.is_valid(), len(tag.validate()), [type(e).__name__ for e in tag.validate()])
    return None


class Animal(faust.Record, abstract=True, polymorphic_fields=True):
    name: str


class Dog(Animal, namespace="compat.Dog"):
    barks: bool = True


class Cat(Animal, namespace="compat.Cat"):
    lives: int = 9


class Shelter(faust.Record, polymorphic_fields=True, namespace="compat.Shelter"):
    first: Animal
    second: Animal


@scenario("Nested polymorphic Records decode to their own class, not the base")
async def nested_polymorphic_records() -> Any:
    data = Shelter(first=Dog(name="rex"), second=Cat(name="tom")).dumps()
    back = Shelter.loads(data)
    print("decoded", type(back.first).__name__, type(back.second).__name__)
    return None


class Messy(faust.Record, serializer="json"):
    name: str
    count: int
    opt: Optional[int]  # noqa: UP045  (Faust reads typing.Optional)
    dflt: int = 5


class MessyChecked(faust.Record, validation=True, serializer="json"):
    name: str
    count: int
    opt: Optional[int]  # noqa: UP045  (Faust reads typing.Optional)
    dflt: int = 5


class MessyCoerced(faust.Record, coerce=True, serializer="json"):
    name: str
    count: int
    opt: Optional[int]  # noqa: UP045  (Faust reads typing.Optional)
    dflt: int = 5


MESSY = [
    {"name": "n", "count": 1},  # Optional[int] without a default: None
    {"name": None, "count": 1},  # null in a str field
    {"name": "n", "count": "42"},
    {"name": "n", "count": 1.5},
    {"name": "n", "count": "abc"},
    {"name": "n", "count": None},
    {"name": "n", "count": 1, "dflt": None},  # null takes the default
    {"name": 7, "count": True},
    {"name": "", "count": 1},  # blank: validation=True refuses it
    {"count": 1},  # a required field missing: refused by all
]


def _decoded(cls: Any, payload: Any) -> Any:
    try:
        rec = cls.loads(json.dumps(payload).encode(), serializer="json")
    except Exception:  # the exception classes differ; that it is refused is the behaviour
        return "refused"
    return {k: f"{type(getattr(rec, k)).__name__}:{getattr(rec, k)!r}" for k in ("name", "count", "opt", "dflt")}


@scenario("Records decode as Faust's: kept values, Optional defaults None, validation=True/coerce=True coerce")
async def records_decode_as_faust() -> Any:
    out = {cls.__name__: [_decoded(cls, p) for p in MESSY] for cls in (Messy, MessyChecked, MessyCoerced)}
    built = Messy(name="n", count="42")  # the constructor too: opt defaults to None, "42" kept
    out["constructed"] = [built.opt, built.count, MessyChecked(name=None, count="42").name]
    return out
