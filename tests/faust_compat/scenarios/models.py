"""Records: validate()/is_valid()/derive(), custom field types, nested polymorphic records."""

from __future__ import annotations

from typing import Any

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
