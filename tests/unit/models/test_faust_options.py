"""Issue 27 (Records): Faust's field and class options that change the data, checked against faust-streaming.

One program (``PROGRAM``) runs in-process under agentstream and, when the Faust virtualenv exists
(tests/faust_takeover/faust_env.py), under faust-streaming in a subprocess. Each side encodes the same records
(``WIRE``: Faust's bytes, key order included, written down from faust-streaming 0.15.3) and decodes the other
side's bytes; both must read the same values (``READ``). So agentstream writes Faust's bytes, reads Faust's
bytes, and Faust reads agentstream's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

import agentstream.faust as faust
from agentstream.exceptions import ValidationError
from agentstream.faust.models.fields import IntegerField, StringField
from tests.faust_takeover.faust_env import faust_python

ROOT = Path(__file__).resolve().parents[3]

PROGRAM = """
from datetime import datetime
from decimal import Decimal
from typing import List, Optional


class Account(faust.Record, namespace="fo.Account", decimals=True, isodates=True):
    user_id: str = StringField(input_name="userId")  # read and written as "userId"
    full_name: str = StringField(input_name="fullName")
    password: str = StringField(exclude=True, required=False, default="")  # never written
    balance: Decimal = DecimalField(input_name="Balance", required=False, default=Decimal("0"))
    opened: Optional[datetime] = None
    tags: List[str] = None


class Audit(faust.Record, namespace="fo.Audit"):
    account: Account
    note: str = StringField(output_name="Note", required=False, default="")  # written as "Note", read as "note"
    secret: str = StringField(exclude=True, required=False, default="none")


class Coerced(faust.Record, namespace="fo.Coerced", coerce=True):
    n: int
    x: float
    d: Decimal
    s: str
    ok: bool = False
    at: Optional[datetime] = None


class Raw(faust.Record, namespace="fo.Raw", isodates=False, decimals=False):
    at: datetime
    d: Decimal


class Pt:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"Pt({self.text!r})"


class Shapes(faust.Record, namespace="fo.Shapes", coercions={Pt: Pt}):
    p: Pt
    ps: List[Pt] = None


def shape(x):
    if isinstance(x, faust.Record):
        names = [f for c in reversed(type(x).__mro__) for f in getattr(c, "__annotations__", {})]
        return {"type": type(x).__name__, **{f: shape(getattr(x, f)) for f in dict.fromkeys(names) if f[0] != "_"}}
    if isinstance(x, list):
        return [shape(v) for v in x]
    return repr(x)


def run(payloads):
    records = {
        "account": Account(
            user_id="u1", full_name="Ann Lee", password="hunter2", balance=Decimal("12.50"),
            opened=datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc), tags=["a"],
        ),
        "audit": Audit(account=Account(user_id="u2", full_name="Bo", password="pw"), note="n1", secret="s"),
        "coerced": Coerced(n="5", x="2", d="1.25", s=3, ok=1, at="2024-05-01T12:30:00+00:00"),
    }
    wire = {name: dumps(record).decode() for name, record in records.items()}
    models = {"account": Account, "audit": Audit, "coerced": Coerced, "raw": Raw, "shapes": Shapes}
    read = {name: shape(loads(models[name.split("/")[0]], text.encode())) for name, text in payloads.items()}
    return {"wire": wire, "read": read}
"""

FAUST_IMPORTS = """
import json, sys
from datetime import timezone
import faust
from faust.models.fields import StringField, DecimalField
def dumps(x): return x.dumps(serializer="json")
def loads(cls, b): return cls.loads(b, serializer="json")
"""
FAUST_MAIN = "\nprint(json.dumps(run(json.load(sys.stdin))))\n"
AGENTSTREAM_IMPORTS = """
from datetime import timezone
import agentstream.faust as faust
from agentstream.faust.models.fields import StringField, DecimalField
def dumps(x): return x.dumps()
def loads(cls, b): return cls.loads(b)
"""

# faust-streaming 0.15.3's bytes for PROGRAM's records (run test_faust_writes_and_reads_the_same to see them again).
WIRE = {
    "account": '{"userId":"u1","fullName":"Ann Lee","Balance":"12.50","opened":"2024-05-01T12:30:00Z",'
    '"tags":["a"],"__faust":{"ns":"fo.Account"}}',
    "audit": '{"account":{"userId":"u2","fullName":"Bo","Balance":"0","opened":null,"tags":null,'
    '"__faust":{"ns":"fo.Account"}},"Note":"n1","__faust":{"ns":"fo.Audit"}}',
    "coerced": '{"n":5,"x":2.0,"d":"1.25","s":"3","ok":true,"at":"2024-05-01T12:30:00Z","__faust":{"ns":"fo.Coerced"}}',
}
# Payloads only read (what another producer may send): excluded keys present, text to coerce, raw text kept.
EXTRA_READS = {
    "account/with_password": '{"userId":"u3","fullName":"Cy","password":"leaked?","user_id":"ignored"}',
    "audit/note_in": '{"account":{"userId":"u4","fullName":"Di"},"note":"read as note","Note":"not read"}',
    "coerced/text": '{"n":"7","x":1,"d":"0.1","s":42,"ok":0}',
    "raw/text": '{"at":"2024-05-01T12:30:00+00:00","d":"1.5"}',
    "shapes/user": '{"p":"a","ps":["b","c"]}',
}

_UTC = "datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc)"
# What both frameworks read from WIRE and EXTRA_READS.
READ = {
    "account": {
        "type": "Account",
        "user_id": "'u1'",
        "full_name": "'Ann Lee'",
        "password": "''",  # excluded: not on the wire, so the default
        "balance": "Decimal('12.50')",
        "opened": _UTC,
        "tags": ["'a'"],
    },
    "audit": {
        "type": "Audit",
        "account": {
            "type": "Account",
            "user_id": "'u2'",
            "full_name": "'Bo'",
            "password": "''",
            "balance": "Decimal('0')",
            "opened": "None",
            "tags": "None",
        },
        "note": "''",  # written as "Note", read as "note" (Faust's output_name is one-way)
        "secret": "'none'",
    },
    "coerced": {
        "type": "Coerced",
        "n": "5",
        "x": "2.0",
        "d": "Decimal('1.25')",
        "s": "'3'",
        "ok": "True",
        "at": _UTC,
    },
    "account/with_password": {
        "type": "Account",
        "user_id": "'u3'",
        "full_name": "'Cy'",
        "password": "'leaked?'",  # exclude is about writing: a key that is sent is read, as in Faust
        "balance": "Decimal('0')",
        "opened": "None",
        "tags": "None",
    },
    "audit/note_in": {
        "type": "Audit",
        "account": {
            "type": "Account",
            "user_id": "'u4'",
            "full_name": "'Di'",
            "password": "''",
            "balance": "Decimal('0')",
            "opened": "None",
            "tags": "None",
        },
        "note": "'read as note'",
        "secret": "'none'",
    },
    "coerced/text": {
        "type": "Coerced",
        "n": "7",
        "x": "1.0",
        "d": "Decimal('0.1')",
        "s": "'42'",
        "ok": "False",
        "at": "None",
    },
    "raw/text": {"type": "Raw", "at": "'2024-05-01T12:30:00+00:00'", "d": "'1.5'"},
    "shapes/user": {"type": "Shapes", "p": "Pt('a')", "ps": ["Pt('b')", "Pt('c')"]},
}


def _agentstream_run(payloads: dict[str, str]) -> dict[str, Any]:
    module = types.ModuleType("faust_options_program")  # annotations resolve in the module's globals
    sys.modules[module.__name__] = module
    try:
        exec(AGENTSTREAM_IMPORTS + PROGRAM, module.__dict__)  # the same source Faust runs
        return module.run(payloads)  # type: ignore[no-any-return]
    finally:
        del sys.modules[module.__name__]


def _faust_run(payloads: dict[str, str]) -> dict[str, Any]:
    py = faust_python()
    if not py.exists():
        pytest.skip("the Faust virtualenv is not built (make faust-venv)")
    done = subprocess.run(
        [str(py), "-W", "ignore", "-c", FAUST_IMPORTS + PROGRAM + FAUST_MAIN],
        input=json.dumps(payloads),
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_agentstream_writes_fausts_bytes_and_reads_them() -> None:
    ran = _agentstream_run({**WIRE, **EXTRA_READS})
    assert ran["wire"] == WIRE
    assert ran["read"] == READ


def test_faust_writes_the_same_bytes_and_reads_agentstreams() -> None:
    """The oracle: faust-streaming writes WIRE and reads agentstream's bytes as READ (skipped without its venv)."""
    ours = _agentstream_run({})["wire"]
    ran = _faust_run({**ours, **EXTRA_READS})
    assert ran["wire"] == WIRE
    assert ran["read"] == READ


# -- what the cross-check cannot show --------------------------------------------------------------------------------
class Person(faust.Record, namespace="fo.Person", include_metadata=False):
    name: str = StringField(input_name="Name")
    ssn: str = StringField(exclude=True, required=False, default="")


class Team(faust.Record, namespace="fo.Team", include_metadata=False):
    lead: Person
    members: list[Any]


def test_an_excluded_field_stays_off_the_wire_everywhere() -> None:
    """Without the ``__faust`` blob, nested and untyped records too: no path writes an excluded field."""
    ann = Person(name="ann", ssn="123-45")
    assert ann.dumps() == b'{"Name":"ann"}'
    assert Team(lead=ann, members=[ann, {"p": ann}]).dumps() == (
        b'{"lead":{"Name":"ann"},"members":[{"Name":"ann"},{"p":{"Name":"ann"}}]}'
    )
    assert ann.asdict() == ann.to_representation() == {"Name": "ann"}
    assert Person.loads(ann.dumps()) == Person(name="ann")


def test_a_plain_record_defined_before_still_hides_excluded_fields() -> None:
    """A record class without options, encoded natively by orjson until then, may later hold a record with
    excluded fields in an untyped field: a fresh interpreter defines and encodes it first."""
    program = """
from typing import Any
import agentstream.faust as faust
from agentstream.faust.models.fields import StringField

class Box(faust.Record, namespace="fo.Box", include_metadata=False):
    item: Any

class Flat(faust.Record, namespace="fo.Flat", include_metadata=False):
    n: int

print(Box(item=1).dumps().decode(), Flat(n=1).dumps().decode())

class Secret(faust.Record, namespace="fo.Secret", include_metadata=False):
    name: str
    pin: str = StringField(exclude=True, required=False, default="")

print(Box(item=Secret(name="b", pin="1234")).dumps().decode(), Flat(n=2).dumps().decode())
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ['{"item":1} {"n":1}', '{"item":{"name":"b"}} {"n":2}']


def test_a_renamed_field_keeps_its_names_in_subclasses() -> None:
    class Employee(Person, namespace="fo.Employee"):
        badge: int = IntegerField(output_name="Badge", required=False, default=0)

    bob = Employee(name="bob", ssn="s", badge=7)
    assert bob.dumps() == b'{"Name":"bob","Badge":7}'
    assert Employee.loads(b'{"Name":"bob","badge":7}') == Employee(name="bob", badge=7)


def test_a_missing_renamed_required_field_names_the_key_read() -> None:
    with pytest.raises(ValidationError, match="Person.Name: required field is missing"):
        Person.loads(b'{"name":"x"}')


def test_coerce_converts_constructor_values_and_refuses_what_does_not_convert() -> None:
    class Qty(faust.Record, namespace="fo.Qty", coerce=True):
        n: int
        label: str = StringField(trim_whitespace=True, required=False, default="")
        raw: str = StringField(coerce=False, required=False, default="")

    assert Qty(n="3", label="  a ", raw=5) == Qty(n=3, label="a", raw=5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"Qty.n: cannot coerce 'x' to int"):
        Qty(n="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"Qty.n: cannot coerce 'x' to int"):
        Qty.loads(b'{"n":"x"}')


def test_coerce_and_validation_together() -> None:
    class Level(faust.Record, namespace="fo.Level", coerce=True, validation=True):
        n: int = IntegerField(max_value=5)

    assert Level(n="4").n == 4  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="Level.n: cannot be more than 5"):
        Level(n="6")  # type: ignore[arg-type]


def test_a_class_date_parser_parses_datetime_fields() -> None:
    class Stamp(faust.Record, namespace="fo.Stamp", date_parser=lambda v: datetime.fromtimestamp(v / 1000, UTC)):
        at: datetime

    assert Stamp.loads(b'{"at": 86400000}').at == datetime(1970, 1, 2, tzinfo=UTC)
    with pytest.raises(ValidationError, match="Stamp.at: date_parser refused 'x'"):
        Stamp.loads(b'{"at": "x"}')


def test_class_options_without_a_meaning_here_are_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"class .*Bad\(Record, blessed_key=...\): not supported by agentstream"):

        class Bad(faust.Record, blessed_key="__x"):  # type: ignore[call-arg]
            a: int


def test_lazy_creation_is_accepted_and_make_final_does_nothing() -> None:
    class Later(faust.Record, namespace="fo.Later", lazy_creation=True):  # type: ignore[call-arg]
        a: int

    Later.make_final()
    assert Later.loads(b'{"a": 1}') == Later(a=1)


def test_decimals_and_polymorphic_options_are_kept_on_the_class() -> None:
    class Opts(faust.Record, namespace="fo.Opts", decimals=False, polymorphic_fields=True, allow_blessed_key=True):
        d: Decimal

    assert not Opts._options.decimals and Opts._options.polymorphic_fields and Opts._options.allow_blessed_key
    assert Opts.loads(b'{"d": "1.5"}').d == "1.5"  # decimals=False: Faust keeps the decoded text


def test_dumps_and_loads_take_fausts_serializer_argument() -> None:
    """Faust's precedence: ``dumps(serializer=)`` before the class option, ``loads`` the class option first
    (bytes as faust-streaming 0.15.3 wrote them)."""

    class Pb(faust.Record, namespace="fo.Pb"):
        a: int

    class Qb(faust.Record, namespace="fo.Qb", serializer="json|binary"):
        a: int

    assert Pb(a=1).dumps(serializer="json|binary") == b"eyJhIjoxLCJfX2ZhdXN0Ijp7Im5zIjoiZm8uUGIifX0="
    assert Pb.loads(Pb(a=1).dumps(serializer="json|binary"), serializer="json|binary") == Pb(a=1)
    assert Qb(a=2).dumps(serializer="json") == b'{"a":2,"__faust":{"ns":"fo.Qb"}}'
    assert Qb.loads(Qb(a=2).dumps(), serializer="json") == Qb(a=2)  # the class's json|binary wins


def test_the_exporter_names_columns_as_the_bytes_do() -> None:
    """Columns of a Record are its keys on the wire: renamed as written, excluded fields absent."""
    from agentstream.exporter.schema import converter, type_spec

    class Row(faust.Record, namespace="fo.Row"):
        full_name: str = StringField(input_name="fullName")
        password: str = StringField(exclude=True, required=False, default="")
        age: int = 0

    spec = type_spec(Row)
    assert spec == ["struct", [["fullName", "string"], ["age", "long"]]]
    to_row = converter(spec)
    assert to_row(orjson.loads(Row(full_name="Ann", password="pw", age=3).dumps())) == {"fullName": "Ann", "age": 3}
    assert to_row(Row(full_name="Bo", password="pw")) == {"fullName": "Bo", "age": 0}
