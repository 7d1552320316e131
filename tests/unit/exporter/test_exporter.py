"""Exporter pieces that need neither a broker nor a JVM: decode specs, executor-side decoding into
Arrow batches, window keys, the Java check, the CLI's argument handling."""

from __future__ import annotations

import datetime as dt
import os
import stat
from pathlib import Path
from typing import Any, Optional

import pytest

import agentstream
from agentstream import codecs
from agentstream.exporter import JavaNotFound, check_java
from agentstream.exporter.runtime import java_major
from agentstream.exporter.schema import converter, side_decoder, split_window_key, table_spec, type_spec
from agentstream.tables.windowed import STREAM_TIME_KEY
from agentstream.tables.windows import window_key


class Address(agentstream.Record):
    city: str
    zip: Optional[str] = None


class Order(agentstream.Record):
    id: int
    amount: float
    paid: bool
    at: dt.datetime
    tags: list[str]
    extra: dict[str, int]
    address: Address
    note: Any = None


ORDER_SPEC = [
    "struct",
    [
        ["id", "long"],
        ["amount", "double"],
        ["paid", "boolean"],
        ["at", "timestamp"],
        ["tags", ["array", "string"]],
        ["extra", ["map", "long"]],
        ["address", ["struct", [["city", "string"], ["zip", "string"]]]],
        ["note", "json"],
    ],
]


def _app() -> agentstream.App:
    return agentstream.App("exp", broker="kafka://127.0.0.1:1", topic_partitions=4)


def test_type_spec_of_a_record() -> None:
    assert type_spec(Order) == ORDER_SPEC
    assert type_spec(int | None) == "long"
    assert type_spec(tuple[int, ...]) == ["array", "long"]
    assert type_spec(tuple[int, str]) == "json"
    assert type_spec(bytes) == "json"


def test_table_spec_plain_record_and_windowed() -> None:
    app = _app()
    counts = app.Table("counts", default=int)
    spec = table_spec(counts)
    assert spec.topic == "exp-counts-changelog" and not spec.windowed
    assert spec.key == {"codec": "str", "type": "string"}  # Faust's raw keys: UTF-8 text
    assert spec.value == {"codec": "json", "type": "long"}  # default=int: a long column

    orders = app.Table("orders", key_type=int, value_type=Order)
    spec = table_spec(orders)
    assert spec.key == {"codec": "utf8", "type": "long"}  # raw key text: b"42"
    assert spec.value == {"codec": "json", "type": ORDER_SPEC}

    views = app.Table("views", default=int).tumbling(60, expires=3600).relative_to_field("ts")
    spec = table_spec(views.table)
    assert spec.window_size_ms == 60_000
    assert spec.value["codec"] == "json" and spec.value["type"] == "long"  # the window codec wrapper is seen through
    assert type(spec).loads(spec.dumps()) == spec


def test_table_spec_other_codecs_ship_the_codec() -> None:
    app = _app()
    s = app.SetTable("sets")
    spec = table_spec(s)
    assert spec.value["codec"] == "pickled"
    decode = side_decoder(spec.value)
    assert decode(s.value_codec.dumps({"b", "a"})) == '["a","b"]'
    raw = app.Table("raw", key_type=bytes, value_serializer="raw")
    spec = table_spec(raw)
    assert spec.key == {"codec": "raw", "type": "binary"}
    assert side_decoder(spec.key)(b"\x00\x01") == b"\x00\x01"


def test_untyped_json_keys_are_text() -> None:
    decode = side_decoder({"codec": "json", "type": "text"})
    assert decode(b'"hello"') == "hello"
    assert decode('"naïve"'.encode()) == "naïve"
    assert decode(b'"a\\"b"') == 'a"b'
    assert decode(b"5") == "5"
    assert decode(b'{"a":1}') == '{"a":1}'


def test_record_values_become_struct_dicts() -> None:
    order = Order(
        id=1,
        amount=2.5,
        paid=True,
        at=dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        tags=["x"],
        extra={"n": 3},
        address=Address(city="Oslo"),
        note={"free": ["form"]},
    )
    raw = codecs.RecordCodec(Order).dumps(order)
    assert raw is not None
    got = side_decoder({"codec": "json", "type": ORDER_SPEC})(raw)
    assert got == {
        "id": 1,
        "amount": 2.5,
        "paid": True,
        "at": order.at,
        "tags": ["x"],
        "extra": [("n", 3)],
        "address": {"city": "Oslo", "zip": None},
        "note": '{"free":["form"]}',
    }


def test_timestamp_converter_naive_is_utc_and_numbers_are_epoch_seconds() -> None:
    conv = converter("timestamp")
    assert conv("2024-01-02T03:04:05") == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert conv(0) == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert conv(None) is None


def test_split_window_key() -> None:
    assert split_window_key(window_key(b'"p"', 120.0)) == (b'"p"', 120_000)
    assert split_window_key(window_key(b"k", 0.06)) == (b"k", 60)
    assert split_window_key(STREAM_TIME_KEY) is None
    assert split_window_key(b"not a window key") is None


# -- executor side: messages -> Arrow batch, without Kafka ----------------------------------------


class _Msg:
    def __init__(self, offset: int, key: bytes | None, value: bytes | None, timestamp: int = 1_700_000_000_000) -> None:
        self.offset, self.key, self.value, self.timestamp = offset, key, value, timestamp


def _reader(spec: Any, start: int, end: int) -> Any:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from agentstream.exporter.source import ChangelogPartition, ChangelogReader, _Columns, _PartitionReader

    reader = ChangelogReader({"bootstrap.servers": "127.0.0.1:1", "spec": spec.dumps()}, spec.spark_schema())
    return _PartitionReader(reader, ChangelogPartition(2, start, end)), _Columns


def test_partition_reader_builds_arrow_batches_windowed() -> None:
    app = _app()
    views = app.Table("views", default=int).tumbling(60)
    part, columns = _reader(table_spec(views.table), 10, 15)
    rows = columns()
    part._add(
        rows,
        [
            _Msg(10, window_key(b"/a", 60.0), b"3"),
            _Msg(11, STREAM_TIME_KEY, b"61000"),  # bookkeeping: skipped
            _Msg(12, window_key(b"/b", 120.0), None),  # an expired window's tombstone
            _Msg(13, None, b"1"),  # keyless: not a table record, skipped
            _Msg(15, window_key(b"/c", 0.0), b"9"),  # past the end offset: not in the snapshot
        ],
    )
    batch = part._batch(rows)
    assert batch.schema.names == [
        "key",
        "window_start",
        "window_end",
        "value",
        "partition",
        "offset",
        "timestamp",
        "raw_key",
        "tombstone",
    ]
    got = batch.to_pylist()
    utc = dt.UTC
    assert [
        (r["key"], r["window_start"], r["window_end"], r["value"], r["partition"], r["offset"], r["tombstone"])
        for r in got
    ] == [
        ("/a", dt.datetime.fromtimestamp(60, utc), dt.datetime.fromtimestamp(120, utc), 3, 2, 10, False),
        ("/b", dt.datetime.fromtimestamp(120, utc), dt.datetime.fromtimestamp(180, utc), None, 2, 12, True),
    ]
    assert got[0]["timestamp"] == dt.datetime.fromtimestamp(1_700_000_000, utc)


def test_partition_reader_record_values() -> None:
    app = _app()
    orders = app.Table("orders", key_type=int, value_type=Order)
    part, columns = _reader(table_spec(orders), 0, 10)
    order = Order(
        id=7,
        amount=1.0,
        paid=False,
        at=dt.datetime(2024, 5, 6, tzinfo=dt.UTC),
        tags=[],
        extra={},
        address=Address(city="Rome", zip="00100"),
    )
    rows = columns()
    part._add(rows, [_Msg(0, b"7", codecs.RecordCodec(Order).dumps(order))])
    (row,) = part._batch(rows).to_pylist()
    assert row["key"] == 7
    assert row["value"]["address"] == {"city": "Rome", "zip": "00100"}
    assert row["value"]["at"] == order.at and row["value"]["extra"] == []


def test_decode_error_names_partition_and_offset() -> None:
    from agentstream.exporter import ExportError

    app = _app()
    orders = app.Table("orders", key_type=int, value_type=Order)
    part, columns = _reader(table_spec(orders), 0, 10)
    with pytest.raises(ExportError, match=r"exp-orders-changelog\[2\] offset 4"):
        part._add(columns(), [_Msg(4, b"7", b"{not json")])


# -- runtime checks ----------------------------------------------------------------------------------


def test_java_major() -> None:
    assert java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert java_major('java version "1.8.0_401"') == 8
    assert java_major('openjdk version "21" 2023-09-19') == 21
    assert java_major("nonsense") is None


def test_missing_java_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFound, match="apt-get install -y openjdk-17-jre-headless"):
        check_java()


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_401\"' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(JavaNotFound, match="needs Java 17"):
        check_java()


def test_cli_export_unknown_table_fails_before_spark(capsys: pytest.CaptureFixture[str]) -> None:
    from agentstream.cli import main

    app = _app()
    app.Table("counts", default=int)
    assert main(["export", "nope", "--out", os.devnull], app=app) == 2
    err = capsys.readouterr().err
    assert "no table 'nope'" in err and "counts" in err


def _rows_both_ways(spec: Any, msgs: list[Any], start: int = 0, end: int = 100) -> tuple[list[Any], list[Any]]:
    """The rows of ``msgs`` decoded in bulk (``_add``) and record by record (``_add_rows``)."""
    part, columns = _reader(spec, start, end)
    bulk, single = columns(), columns()
    part._add(bulk, msgs)
    part._add_rows(single, msgs)
    return part._batch(bulk).to_pylist(), part._batch(single).to_pylist()


def test_bulk_decode_gives_the_rows_the_per_record_path_gives() -> None:
    app = _app()
    counts = app.Table("counts", default=int, key_serializer="json")  # untyped JSON keys: their text
    msgs = [
        _Msg(0, b'"plain"', b"1"),
        _Msg(1, b'"caf\\u00e9"', b"2"),
        _Msg(2, b"42", b"3"),  # escaped, non-string
        _Msg(3, b'"\xff bad utf8"', b"4"),
        _Msg(4, b'""', b"5", timestamp=-1),
        _Msg(5, None, b"6"),  # keyless
        _Msg(6, b'"a"', b"7.5"),
        _Msg(7, b'"b"', b"true"),
        _Msg(8, b'"c"', None),  # float, bool, tombstone
        _Msg(99, b'"late"', b"9"),
        _Msg(100, b'"past end"', b"9"),
    ]
    bulk, single = _rows_both_ways(table_spec(counts), msgs)
    assert bulk == single
    assert [r["key"] for r in bulk] == ["plain", "café", "42", "\ufffd bad utf8", "", "a", "b", "c", "late"]
    assert [r["value"] for r in bulk] == [1, 2, 3, 4, 5, 7, 1, None, 9]
    assert bulk[4]["timestamp"] is None and bulk[7]["tombstone"] is True
    # every key a plain JSON string, no tombstone: the Arrow path for keys, the exact-type shortcut for values
    plain = [_Msg(i, b'"k%d"' % i, b"%d" % i) for i in range(5)]
    bulk, single = _rows_both_ways(table_spec(counts), plain)
    assert bulk == single and [r["key"] for r in bulk] == ["k0", "k1", "k2", "k3", "k4"]
    quoted = [_Msg(0, b'"a"', b"1"), _Msg(1, b'"caf\\u00e9"', b"2"), _Msg(2, b'"x\\"y"', b"3")]  # escapes
    for one in quoted[1:]:
        bulk, single = _rows_both_ways(table_spec(counts), [quoted[0], one])
        assert bulk == single and bulk[1]["key"] in ("café", 'x"y')
    # Faust's raw keys (the default): UTF-8 text, bad bytes replaced; str keys: bad bytes are an error
    raw_keys = app.Table("raw_keys", default=int)
    bulk, single = _rows_both_ways(table_spec(raw_keys), [_Msg(0, b"a", b"1"), _Msg(1, b"\xffb", b"2")])
    assert bulk == single and [r["key"] for r in bulk] == ["a", "\ufffdb"]
    from agentstream.exporter import ExportError

    part, columns = _reader(table_spec(app.Table("str_keys", default=int, key_type=str)), 0, 10)
    with pytest.raises(ExportError, match=r"offset 1"):
        part._add(columns(), [_Msg(0, b"a", b"1"), _Msg(1, b"\xffb", b"2")])


def test_bulk_decode_of_a_bad_value_names_the_record() -> None:
    from agentstream.exporter import ExportError

    counts = _app().Table("counts", default=int)
    part, columns = _reader(table_spec(counts), 0, 10)
    with pytest.raises(ExportError, match=r"exp-counts-changelog\[2\] offset 6"):
        part._add(columns(), [_Msg(5, b'"a"', b"1"), _Msg(6, b'"b"', b"{oops")])


def test_without_bookkeeping_the_source_yields_only_the_exported_columns() -> None:
    pytest.importorskip("pyspark")
    from agentstream.exporter.source import ChangelogPartition, ChangelogReader, _Columns, _PartitionReader

    spec = table_spec(_app().Table("counts", default=int))
    schema = spec.spark_schema(bookkeeping=False)
    reader = ChangelogReader({"bootstrap.servers": "127.0.0.1:1", "spec": spec.dumps(), "bookkeeping": "false"}, schema)
    part = _PartitionReader(reader, ChangelogPartition(1, 0, 10))
    rows = _Columns()
    part._add(rows, [_Msg(0, b"a", b"1"), _Msg(1, b"a", None)])
    batch = part._batch(rows)
    assert batch.schema.names == ["key", "value", "partition", "offset", "timestamp"]
    assert [(r["key"], r["value"], r["partition"]) for r in batch.to_pylist()] == [("a", 1, 1), ("a", None, 1)]


def test_offsets_column_is_exact_with_and_without_gaps() -> None:
    """Contiguous offsets are built as a range; a compacted gap or a skipped keyless record must not
    shift them."""
    counts = _app().Table("counts", default=int)
    cases = [
        [_Msg(3, b'"a"', b"1"), _Msg(4, b'"b"', b"2"), _Msg(5, b'"c"', b"3")],  # contiguous
        [_Msg(3, b'"a"', b"1"), _Msg(5, b'"b"', b"2"), _Msg(9, b'"c"', b"3")],  # compacted gaps
        [_Msg(3, b'"a"', b"1"), _Msg(4, None, b"2"), _Msg(5, b'"c"', b"3")],  # keyless skipped
        [_Msg(3, b'"a"', b"1"), _Msg(4, b'"b"', b"2"), _Msg(12, b'"c"', b"3")],  # last past the end
    ]
    for messages in cases:
        part, columns = _reader(table_spec(counts), 0, 10)
        rows = columns()
        part._add(rows, messages)
        got = [r["offset"] for r in part._batch(rows).to_pylist()]
        assert got == [m.offset for m in messages if m.key is not None and m.offset < 10]
