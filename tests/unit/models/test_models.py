"""Record behaviour: fields, JSON round trips, coercion by annotation, errors naming the field.

This module uses ``from __future__ import annotations`` on purpose: every annotation below is a
string that Record must resolve (including forward and self references).
"""

from __future__ import annotations

import enum
from dataclasses import field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Optional

import orjson
import pytest

from agentstream.exceptions import SerializationError, ValidationError
from agentstream.models import Record


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(Record):
    x: int
    y: int = 0


class Point3(Point):
    z: int = 0


class Customer(Record):
    id: int
    name: str = "anon"


class Order(Record):
    customer: Customer
    lines: list[Line]  # forward reference: Line is defined below
    at: datetime
    total: Decimal
    note: Optional[str] = None
    tags: dict[str, Line] = field(default_factory=dict)
    color: Color = Color.RED
    due: date | None = None


class Line(Record):
    sku: str
    qty: int = 1
    price: float = 0.0


class Node(Record):
    value: int
    children: list[Node] = field(default_factory=list)


class Strict(Record, validation=True):
    n: int
    name: str
    p: Optional[Point] = None
    items: list[int] = field(default_factory=list)


def make_order() -> Order:
    return Order(
        customer=Customer(7, "ann"),
        lines=[Line("a", 2, 1.5), Line("b")],
        at=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        total=Decimal("3.10"),
        note="gift",
        tags={"first": Line("c", 3)},
        color=Color.BLUE,
        due=date(2024, 6, 1),
    )


# -- fields and generated methods ---------------------------------------------------------------


def test_generated_init_accepts_positional_and_keyword_and_defaults() -> None:
    assert Point(1, 2) == Point(x=1, y=2)
    assert Point(1).y == 0
    assert Point(1) != Point(2)
    assert repr(Point(1, 2)).endswith("Point(x=1, y=2)")
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


def test_subclass_inherits_parent_fields_in_order() -> None:
    p = Point3(1, 2, 3)
    assert (p.x, p.y, p.z) == (1, 2, 3)
    assert p.asdict() == {"x": 1, "y": 2, "z": 3}
    assert Point3.loads(b'{"x": 5, "z": 9}') == Point3(5, 0, 9)
    assert Point(1, 2) != Point3(1, 2, 0)


def test_class_options_are_stored_and_inherited() -> None:
    class Tagged(Record, serializer="json", include_metadata=True, namespace="ns.tagged"):
        a: int

    class Child(Tagged):
        b: int = 0

    opts = Tagged._options
    assert (opts.serializer, opts.include_metadata, opts.namespace) == ("json", True, "ns.tagged")
    assert opts.validation is False
    assert Child._options.serializer == "json"
    assert Point._options.namespace.endswith("Point")


def test_default_factory_is_not_shared_between_instances() -> None:
    a = Node.loads(b'{"value": 1}')
    b = Node.loads(b'{"value": 2}')
    a.children.append(Node(3))
    assert b.children == []


# -- encoding -----------------------------------------------------------------------------------


def _untagged(data: object) -> object:
    if isinstance(data, dict):
        return {k: _untagged(v) for k, v in data.items() if k != "__faust"}
    if isinstance(data, list):
        return [_untagged(v) for v in data]
    return data


def test_dumps_uses_json_friendly_representations() -> None:
    raw = orjson.loads(make_order().dumps())
    assert raw["customer"]["__faust"] == {"ns": f"{__name__}.Customer"}  # nested records are tagged
    data = _untagged(raw)
    assert isinstance(data, dict)
    assert data["customer"] == {"id": 7, "name": "ann"}
    assert data["lines"][0] == {"sku": "a", "qty": 2, "price": 1.5}
    assert data["at"] == "2024-05-01T12:30:00Z"  # UTC as Faust writes it (orjson OPT_UTC_Z)
    assert data["total"] == "3.10"
    assert data["color"] == "blue"
    assert data["due"] == "2024-06-01"
    assert data["tags"] == {"first": {"sku": "c", "qty": 3, "price": 0.0}}


def test_orjson_serialises_records_natively() -> None:
    assert orjson.dumps(Point(1, 2)) == b'{"x":1,"y":2}'
    assert orjson.dumps([Point(1)]) == b'[{"x":1,"y":0}]'


def test_asdict_and_to_representation_turn_nested_records_into_dicts() -> None:
    d = make_order().asdict()
    assert d["customer"] == {"id": 7, "name": "ann"}
    assert d["lines"][1] == {"sku": "b", "qty": 1, "price": 0.0}
    assert d["tags"]["first"]["sku"] == "c"
    assert d["total"] == Decimal("3.10")  # values stay Python objects, only records change
    assert make_order().to_representation() == d


# -- decoding -----------------------------------------------------------------------------------


def test_nested_round_trip_restores_every_type() -> None:
    order = make_order()
    back = Order.loads(order.dumps())
    assert back == order
    assert isinstance(back.customer, Customer)
    assert isinstance(back.lines[0], Line)
    assert isinstance(back.tags["first"], Line)
    assert back.at.tzinfo is not None and back.at == order.at
    assert isinstance(back.total, Decimal) and back.total == Decimal("3.10")
    assert back.color is Color.BLUE
    assert back.due == date(2024, 6, 1)


def test_optional_and_defaults_when_keys_are_absent_or_null() -> None:
    raw = b'{"customer": {"id": 1}, "lines": [], "at": 0, "total": 1, "note": null}'
    order = Order.loads(raw)
    assert order.note is None
    assert order.customer.name == "anon"
    assert order.tags == {} and order.color is Color.RED and order.due is None


def test_self_referencing_record_round_trips() -> None:
    tree = Node(1, [Node(2, [Node(3)]), Node(4)])
    assert Node.loads(tree.dumps()) == tree


def test_unknown_keys_are_ignored() -> None:
    assert Point.loads(b'{"x": 1, "y": 2, "extra": [1, 2, 3]}') == Point(1, 2)


def test_numeric_conversions_are_lossless_only_and_other_values_are_kept_as_faust_keeps_them() -> None:
    assert Point.loads(b'{"x": 3.0}').x == 3
    assert type(Point.loads(b'{"x": 3.0}').x) is int
    line = Line.from_data({"sku": "a", "price": 2})
    assert line.price == 2.0 and type(line.price) is float
    # what does not convert losslessly is kept as read (Faust's records keep it), never dropped
    assert Point.loads(b'{"x": 3.5}').x == 3.5
    assert Point.loads(b'{"x": "3"}').x == "3"  # no silent str -> int
    assert Point.loads(b'{"x": true}').x is True
    assert Line.loads(b'{"sku": 5}').sku == 5
    assert Line.loads(b'{"sku": null}').sku is None
    assert not Point.loads(b'{"x": "3"}').is_valid()  # validate() still names the problem
    assert str(Point.loads(b'{"x": "3"}').validate()[0]) == "Point.x: expected int, got '3'"


def test_null_or_missing_takes_the_default_and_optional_fields_default_to_none() -> None:
    class Reading(Record):
        sensor: str
        value: Optional[float]
        unit: str = "C"
        at: int | None
        tags: list[str] = field(default_factory=list)

    r = Reading.loads(b'{"sensor": "s1", "unit": null, "tags": null}')
    assert (r.value, r.unit, r.at, r.tags) == (None, "C", None, [])
    assert Reading("s1") == r  # the constructor too, as Faust's
    assert Reading("s1", 1.5).value == 1.5  # an Optional field before the defaults stays positional
    with pytest.raises(ValidationError, match=r"^Reading\.sensor: required field is missing$"):
        Reading.loads(b'{"value": 1}')


def test_optional_field_followed_by_a_required_one_is_keyword_only() -> None:
    class Base(Record):
        a: int
        note: Optional[str]

    class Child(Base):
        b: int

    class Mixed(Record):
        maybe: "Optional[int]"  # noqa: UP037  (a string annotation, on purpose)
        must: int

    assert Child(1, 2) == Child(a=1, note=None, b=2) and Child(1, 2, note="n").note == "n"
    assert Child.loads(b'{"a": 1, "b": 2}') == Child(1, 2)
    assert Mixed(5).maybe is None and Mixed(5, maybe=1).maybe == 1
    assert Base(1).note is None  # the parent keeps its positional Optional field


def test_datetime_from_iso_string_or_epoch_and_decimal_from_numbers() -> None:
    class Event(Record):
        at: datetime
        amount: Decimal
        when: Optional[date] = None

    e = Event.from_data({"at": 1_700_000_000, "amount": 0.1})
    assert e.at == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert e.amount == Decimal("0.1")  # not 0.1000000000000000055511151231257827...
    e = Event.from_data({"at": "2024-01-02T03:04:05Z", "amount": "12.50", "when": "2024-01-02"})
    assert e.at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert e.amount == Decimal("12.50") and e.when == date(2024, 1, 2)
    assert Event.from_data({"at": 0, "amount": 7}).amount == Decimal(7)
    # text that does not parse is kept, as Faust (which parses neither by default) keeps it
    assert Event.from_data({"at": "yesterday", "amount": 1}).at == "yesterday"
    assert Event.from_data({"at": 0, "amount": "lots"}).amount == "lots"

    class Asked(Record, isodates=True, decimals=True):
        at: datetime
        amount: Decimal = Decimal(0)

    # asked for (isodates=True / decimals=True), parsing refuses what does not parse, as in Faust
    with pytest.raises(ValidationError, match=r"Asked\.at: expected an ISO 8601 datetime, got 'yesterday'"):
        Asked.from_data({"at": "yesterday"})
    with pytest.raises(ValidationError, match=r"Asked\.amount: .*'lots'"):
        Asked.from_data({"at": 0, "amount": "lots"})


def test_union_and_any_fields() -> None:
    class Loose(Record):
        key: int | str
        blob: Any = None

    assert Loose.from_data({"key": 1, "blob": {"a": [1]}}) == Loose(1, {"a": [1]})
    assert Loose.from_data({"key": "k"}).key == "k"
    assert Loose.from_data({"key": 1.5}).key == 1.5


def test_enum_field_keeps_an_unknown_value() -> None:
    order = Order.from_data({"customer": {"id": 1}, "lines": [], "at": 0, "total": 1, "color": "green"})
    assert order.color == "green"
    assert order.validate()[0].field == "color"


def test_records_defined_in_a_function_can_reference_each_other() -> None:
    class Inner(Record):
        v: int

    class Outer(Record):
        inner: Inner
        many: list[Inner]

    o = Outer.loads(b'{"inner": {"v": 1}, "many": [{"v": 2}]}')
    assert o == Outer(Inner(1), [Inner(2)])


def test_from_data_accepts_an_instance_for_a_nested_field() -> None:
    order = Order.from_data({"customer": Customer(3), "lines": [Line("x")], "at": 0, "total": 1})
    assert order.customer == Customer(3) and order.lines == [Line("x")]


# -- errors -------------------------------------------------------------------------------------


def test_missing_required_field_names_it() -> None:
    with pytest.raises(ValidationError, match=r"^Point\.x: required field is missing$") as info:
        Point.loads(b'{"y": 1}')
    assert info.value.model == "Point" and info.value.field == "x"
    assert isinstance(info.value, SerializationError)


def test_nested_wrong_type_is_kept_in_the_nested_record() -> None:
    order = Order.loads(b'{"customer": {"id": "abc"}, "lines": [], "at": 0, "total": 1}')
    assert order.customer == Customer.from_data({"id": "abc"}) and order.customer.id == "abc"
    assert str(order.customer.validate()[0]) == "Customer.id: expected int, got 'abc'"


def test_type_decoder_errors_inside_lists_and_dicts_name_index_and_key() -> None:
    from agentstream.models import type_decoder

    with pytest.raises(ValueError, match=r"^\[1\]\.sku: required field is missing$"):
        type_decoder(list[Line])([{"sku": "a"}, {"qty": 2}])
    with pytest.raises(ValueError, match=r"^\['k'\]: expected int, got 'x'$"):
        type_decoder(dict[str, int])({"k": "x"})
    with pytest.raises(ValueError, match=r"^\[1\]: expected int, got 'b'$"):
        type_decoder(list[int])([1, "b"])
    # inside a record, a field that does not convert keeps what was read (Faust's behaviour)
    base = {"customer": {"id": 1}, "at": 0, "total": 1}
    assert Order.from_data({**base, "lines": "nope"}).lines == "nope"
    assert Order.from_data({**base, "lines": [], "customer": 5}).customer == 5
    assert Order.from_data({**base, "lines": [], "tags": {"k": {}}}).tags == {"k": {}}  # as Faust, which
    # converts a container lazily and fails on access instead


def test_invalid_json_and_non_object_payloads() -> None:
    with pytest.raises(ValidationError, match=r"^Point\.__root__: invalid JSON"):
        Point.loads(b'{"x": 1')
    with pytest.raises(ValidationError, match=r"^Point\.__root__: expected an object for Point, got \[1, 2\]$"):
        Point.loads(b"[1, 2]")


def test_unsupported_field_type_names_the_field() -> None:
    class Opaque:
        pass

    class HasOpaque(Record):
        thing: Opaque

    assert HasOpaque.from_data({"thing": 1}).thing == 1  # kept, as Faust keeps it
    problem = HasOpaque.from_data({"thing": 1}).validate()[0]
    assert str(problem) == "HasOpaque.thing: expected Opaque, got 1"


def test_validation_option_checks_constructor_types() -> None:
    ok = Strict(1, "a", Point(1), [1, 2])
    assert ok.n == 1
    assert Strict("1", "a").n == 1  # type: ignore[arg-type]  # validation=True implies coerce=True, as in Faust
    with pytest.raises(ValidationError, match=r"^Strict\.n: cannot coerce 'x' to int"):
        Strict("x", "a")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"^Strict\.p: expected Point \| None, got \{'x': 1\}$"):
        Strict(1, "a", {"x": 1})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"^Strict\.items\[1\]: expected int, got 'b'$"):
        Strict(1, "a", None, [1, "b"])  # type: ignore[list-item]
    # without validation=True the constructor trusts its caller
    unchecked = Point("not checked")  # type: ignore[arg-type]
    assert unchecked.asdict() == {"x": "not checked", "y": 0}


def test_loads_of_a_validation_record_coerces_and_refuses_as_faust() -> None:
    assert Strict.loads(b'{"n": "42", "name": 1}') == Strict(42, "1")  # Faust: str(1), int("42")
    assert Strict.loads(b'{"n": 1.5, "name": null}') == Strict(1, "None")  # Faust's str(None)
    with pytest.raises(ValidationError, match=r"^Strict\.n: cannot coerce 'abc' to int"):
        Strict.loads(b'{"n": "abc", "name": "a"}')
    with pytest.raises(ValidationError, match=r"^Strict\.n: cannot coerce None to int"):
        Strict.loads(b'{"n": null, "name": "a"}')
    with pytest.raises(ValidationError, match=r"^Strict\.name: cannot be left blank"):
        Strict.loads(b'{"n": 1, "name": ""}')
    assert Strict.loads(b'{"n": 1, "name": "a", "p": {"x": 2}}').p == Point(2)


def test_class_attribute_is_a_field_descriptor_for_group_by() -> None:
    from agentstream.models import FieldDescriptor, Record

    class Account(Record):
        id: str
        balance: int = 0

    assert isinstance(Account.id, FieldDescriptor) and Account.id.field == "id"
    assert Account.balance.getattr(Account("a", 5)) == 5
    assert Account("a").balance == 0
