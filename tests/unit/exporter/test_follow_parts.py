"""The pure parts of the streaming export: stream offsets and micro-batch ranges, the compaction of a
partition file, the follow directory's checks, the code zip shipped to a cluster, and the decoding of
``topic_naming='faust'`` tables (Faust's JSON window keys)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import agentstream
from agentstream.exporter.follow_dir import FollowDir, NotAFollowDir, TableChanged
from agentstream.exporter.offsets import PartitionRange
from agentstream.exporter.schema import split_window_key, table_spec
from agentstream.exporter.stream_offsets import (
    ChangelogRewound,
    StreamOffset,
    TopicChanged,
    advance,
    batch_ranges,
    lag,
)
from agentstream.tables.windows import faust_window_key

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TOPIC = "app-t-changelog"
UTC = dt.UTC


# -- stream offsets --------------------------------------------------------------------------------------


def test_offset_json_round_trip_and_topic_check() -> None:
    off = StreamOffset(TOPIC, {1: 7, 0: 3})
    data = off.to_json()
    assert data == {"topic": TOPIC, "offsets": {"0": 3, "1": 7}}
    assert StreamOffset.from_json(data, topic=TOPIC) == off
    with pytest.raises(TopicChanged, match="app-v2-t-changelog.*new --out"):
        StreamOffset.from_json(data, topic="app-v2-t-changelog")


def test_advance_reads_every_partition_to_its_end() -> None:
    start = StreamOffset(TOPIC, {0: 5, 1: 9})
    end = advance(start, [PartitionRange(0, 0, 12), PartitionRange(1, 0, 9), PartitionRange(2, 4, 6)])
    # partition 2 is new since start: it is read from its log start
    assert end.offsets == {0: 12, 1: 9, 2: 6}
    assert batch_ranges(start, end, {2: 4}) == [PartitionRange(0, 5, 12), PartitionRange(2, 4, 6)]


def test_advance_skips_what_was_compacted_away_and_refuses_a_changelog_made_anew() -> None:
    start = StreamOffset(TOPIC, {0: 5, 1: 9, 3: 40})
    # partition 0's log now starts past 5; partition 3 is not reported at all: it keeps its position
    end = advance(start, [PartitionRange(0, 8, 10), PartitionRange(1, 0, 9)])
    assert end.offsets == {0: 10, 1: 9, 3: 40}
    assert batch_ranges(StreamOffset(TOPIC, {0: 8, 1: 9, 3: 40}), end) == [PartitionRange(0, 8, 10)]
    # partition 1 now ends before what was read: the topic was deleted and created again
    with pytest.raises(ChangelogRewound, match=r"\[1\] ends at 7, was read up to 9.*new --out"):
        advance(start, [PartitionRange(0, 0, 10), PartitionRange(1, 0, 7)])


def test_max_records_is_shared_by_the_partitions_that_have_records() -> None:
    start = StreamOffset(TOPIC, {0: 0, 1: 0, 2: 10})
    now = [PartitionRange(0, 0, 100), PartitionRange(1, 0, 3), PartitionRange(2, 0, 10)]
    end = advance(start, now, max_records=10)
    assert end.offsets == {0: 5, 1: 3, 2: 10}  # 10 records shared by partitions 0 and 1
    again = advance(end, now, max_records=10)
    assert again.offsets == {0: 15, 1: 3, 2: 10}
    assert lag(again, {0: 100, 1: 3, 2: 10}) == {0: 85, 1: 0, 2: 0}


# -- compaction -------------------------------------------------------------------------------------------


def _changes(rows: list[tuple[Any, ...]], windowed: bool = False) -> Any:
    """(key, value, offset, tombstone[, window_start seconds]) -> a table like the source's."""
    cols: dict[str, Any] = {"key": [r[0] for r in rows]}
    if windowed:
        cols["window_start"] = pa.array([dt.datetime.fromtimestamp(r[4], UTC) for r in rows], pa.timestamp("us", "UTC"))
    cols["value"] = pa.array([r[1] for r in rows], pa.int64())
    cols["partition"] = pa.array([0] * len(rows), pa.int32())
    cols["offset"] = pa.array([r[2] for r in rows], pa.int64())
    cols["tombstone"] = [r[3] for r in rows]
    return pa.table(cols)


COLUMNS = ["key", "value", "partition", "offset"]


def _state(table: Any) -> dict[Any, Any]:
    return {r["key"]: (r["value"], r["offset"]) for r in table.to_pylist()}


def test_merge_keeps_the_highest_offset_per_key_and_drops_deletions() -> None:
    from agentstream.exporter.compact import merge_latest

    first = merge_latest(None, _changes([("a", 1, 0, False), ("b", 1, 1, False), ("a", 2, 2, False)]), COLUMNS)
    assert _state(first) == {"a": (2, 2), "b": (1, 1)}
    second = merge_latest(first, _changes([("b", None, 5, True), ("c", 7, 4, False), ("a", 9, 1, False)]), COLUMNS)
    # b deleted; a's record at offset 1 is older than the one held (offset 2)
    assert _state(second) == {"a": (2, 2), "c": (7, 4)}
    assert second.column("offset").to_pylist() == sorted(second.column("offset").to_pylist())


def test_merge_is_idempotent_for_a_replayed_batch() -> None:
    from agentstream.exporter.compact import merge_latest

    batch = _changes([("a", 1, 10, False), ("b", None, 11, True), ("c", 3, 12, False)])
    once = merge_latest(_changes([("b", 5, 2, False)]).select(COLUMNS), batch, COLUMNS)
    twice = merge_latest(once, batch, COLUMNS)
    assert _state(once) == _state(twice) == {"a": (1, 10), "c": (3, 12)}
    assert twice.num_rows == 2


def test_merge_windowed_rows_are_per_key_and_window() -> None:
    from agentstream.exporter.compact import merge_latest

    cols = ["key", "window_start", "value", "partition", "offset"]
    t = merge_latest(
        None,
        _changes([("p", 1, 0, False, 60), ("p", 1, 1, False, 120), ("p", 2, 2, False, 60)], windowed=True),
        cols,
    )
    assert sorted((r["window_start"].timestamp(), r["value"]) for r in t.to_pylist()) == [(60, 2), (120, 1)]


def test_merge_struct_keys() -> None:
    from agentstream.exporter.compact import merge_latest

    keys = pa.array([{"id": 1, "c": "x"}, {"id": 1, "c": "x"}, {"id": 2, "c": "x"}])
    changes = pa.table(
        {
            "key": keys,
            "value": pa.array([1, 2, 3], pa.int64()),
            "partition": pa.array([0, 0, 0], pa.int32()),
            "offset": pa.array([0, 1, 2], pa.int64()),
            "tombstone": [False, False, False],
        }
    )
    t = merge_latest(None, changes, COLUMNS)
    assert [(r["key"]["id"], r["value"]) for r in t.to_pylist()] == [(1, 2), (2, 3)]


def test_compactor_replaces_each_partition_file_whole(tmp_path: Path) -> None:
    from agentstream.exporter.compact import compactor, partition_file

    run = compactor(str(tmp_path), COLUMNS)
    batch = _changes([("a", 1, 0, False), ("b", 2, 1, False)])
    other = batch.set_column(2, "partition", pa.array([3, 3], pa.int32()))
    summary = list(run(iter(pa.concat_tables([batch, other]).to_batches())))
    assert summary[0].to_pylist() == [
        {"partition": 0, "records": 2, "rows": 2},
        {"partition": 3, "records": 2, "rows": 2},
    ]
    before = partition_file(tmp_path, 0).stat().st_ino
    list(run(iter(_changes([("a", None, 5, True)]).to_batches())))
    assert partition_file(tmp_path, 0).stat().st_ino != before  # a new file renamed over the old one
    assert _state(pq.read_table(str(partition_file(tmp_path, 0)))) == {"b": (2, 1)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00000.parquet", "part-00003.parquet"]  # no temp files
    assert _state(pq.read_table(str(tmp_path))) == {"b": (2, 1), "a": (1, 0)}  # the directory reads as one dataset


# -- the follow directory ---------------------------------------------------------------------------------


def _app(**kw: Any) -> agentstream.App:
    return agentstream.App("fol", broker="kafka://127.0.0.1:1", topic_partitions=4, **kw)


def test_follow_dir_refuses_foreign_files(tmp_path: Path) -> None:
    (tmp_path / "part-00000-1b2c.snappy.parquet").write_bytes(b"x")  # a batch export's file
    with pytest.raises(NotAFollowDir, match="new directory"):
        FollowDir(tmp_path).check_contents()
    FollowDir(tmp_path / "new").check_contents()  # a directory that does not exist yet is fine


def test_follow_dir_keeps_its_spec_and_refuses_another_table(tmp_path: Path) -> None:
    app = _app()
    declared = table_spec(app.Table("t", default=int))
    typed = table_spec(app.Table("t2", value_type=int))
    d = FollowDir(tmp_path)
    assert d.settle_spec(declared, typed) == typed  # stored for the restarts
    assert d.settle_spec(declared, declared) == typed  # a restart decodes as the first run did
    d.check_contents()
    changed_types = table_spec(_app().Table("t", key_type=int, default=int))
    with pytest.raises(TableChanged, match="other key/value types"):
        d.settle_spec(changed_types, changed_types)
    v1 = table_spec(_app(topic_naming="faust").Table("t", default=int))
    v2 = table_spec(_app(topic_naming="faust", version=2).Table("t", default=int))
    assert v1.topic == declared.topic and v2.topic == "fol-v2-t-changelog"  # a new version: new changelogs
    with pytest.raises(TableChanged, match="fol-v2-t-changelog"):
        d.settle_spec(v2, v2)


# -- topic_naming='faust' tables --------------------------------------------------------------------------


def test_faust_windowed_keys_split() -> None:
    raw = faust_window_key(b'"/a"', 60.0, 60.0)
    assert split_window_key(raw, "faust") == (b'"/a"', 60_000)
    assert split_window_key(raw) is None  # not agentstream's layout
    assert split_window_key(b"not json", "faust") is None


def test_faust_tables_decode_in_the_partition_reader() -> None:
    pytest.importorskip("pyspark")
    from agentstream.exporter.source import ChangelogPartition, ChangelogReader, _Columns, _PartitionReader

    class Msg:
        def __init__(self, offset: int, key: bytes, value: bytes | None) -> None:
            self.offset, self.key, self.value, self.timestamp = offset, key, value, 1_700_000_000_000

    app = _app(topic_naming="faust")
    views = app.Table("views", default=int).tumbling(60)
    plain = app.Table("plain", default=int)
    spec = table_spec(views.table)
    assert spec.window_format == "faust" and spec.key == {"codec": "json", "type": "text"}
    reader = ChangelogReader({"bootstrap.servers": "127.0.0.1:1", "spec": spec.dumps()}, spec.spark_schema())
    part = _PartitionReader(reader, ChangelogPartition(0, 0, 10))
    rows = _Columns()
    part._add(rows, [Msg(0, faust_window_key(b'"na\\u00efve"', 120.0, 60.0), b"4"), Msg(1, b'"x"', b"1")])
    got = part._batch(rows).to_pylist()
    assert [(r["key"], r["window_start"], r["value"]) for r in got] == [
        ("naïve", dt.datetime.fromtimestamp(120, UTC), 4)
    ]
    plain_spec = table_spec(plain)
    assert plain_spec.key == {"codec": "json", "type": "text"}  # Faust's JSON keys, no pickled codec
    reader = ChangelogReader(
        {"bootstrap.servers": "127.0.0.1:1", "spec": plain_spec.dumps()}, plain_spec.spark_schema()
    )
    part = _PartitionReader(reader, ChangelogPartition(0, 0, 10))
    rows = _Columns()
    part._add(rows, [Msg(0, plain.key_codec.dumps("naïve"), b"3"), Msg(1, b'"w"', b"5")])
    assert [(r["key"], r["value"]) for r in part._batch(rows).to_pylist()] == [("naïve", 3), ("w", 5)]


# -- the code shipped to a cluster ------------------------------------------------------------------------


def test_code_zip_carries_agentstream_and_the_app_and_imports_alone(tmp_path: Path) -> None:
    from agentstream.exporter.deploy import code_zip

    root = Path(agentstream.__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    try:
        path = code_zip(["apps.wordcount"], tmp_path)
    finally:
        sys.path.remove(str(root))
    assert code_zip(["apps.wordcount"], tmp_path) == path  # same code, same name
    names = zipfile.ZipFile(path).namelist()
    assert "agentstream/__init__.py" in names and "agentstream/exporter/source.py" in names
    assert "apps/wordcount.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".so", ".json"))]
    # A Python with the dependencies but without this checkout on its path imports the zip's agentstream.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = (
        f"import sys; sys.path.insert(0, {str(path)!r}); import agentstream.exporter.compact, apps.wordcount; "
        "print(agentstream.__file__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(path))


def test_progress_line() -> None:
    from agentstream.exporter.follow import progress_line

    line = progress_line(3, {0: 40, 2: 80, 1: 0}, 0.8412, {0: 0, 1: 0, 2: 5}, 5100, "/out")
    assert line == "batch 3: 120 records (p0 40, p2 80) in 0.84s; lag p0=0 p1=0 p2=5; 5100 rows in /out"


def test_a_failed_query_reports_agentstreams_error_with_its_fix() -> None:
    from agentstream.exporter.follow import _first_line

    wrapped = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: Python worker failed\n"
        'Traceback (most recent call last):\n  File "stream.py", line 90, in latestOffset\n'
        "agentstream.exporter.stream_offsets.ChangelogRewound: t[1] ends at 7, was read up to 9. Fix: new --out\n"
        "\tat org.apache.spark.sql.execution.python.PythonException"
    )
    assert _first_line(Exception(wrapped)) == "ChangelogRewound: t[1] ends at 7, was read up to 9. Fix: new --out"
    assert _first_line(Exception("boom\nmore")) == "boom"


# -- issue 45 finding 10: the follow directory survives crashes and a second follower ---------------------


def test_a_second_follower_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    from agentstream.exporter.follow_dir import FollowerRunning

    first = FollowDir(tmp_path)
    fd = first.lock()
    try:
        with pytest.raises(FollowerRunning, match=rf"pid {os.getpid()}.*Fix: stop it first"):
            FollowDir(tmp_path).lock()
    finally:
        first.unlock(fd)
    FollowDir(tmp_path).unlock(FollowDir(tmp_path).lock())  # free again once the first stopped
    FollowDir(tmp_path).check_contents()  # the lock file is the directory's own


def test_a_follower_removes_the_temporary_files_a_crashed_one_left(tmp_path: Path) -> None:
    from agentstream.exporter.compact import compactor, partition_file

    list(compactor(str(tmp_path), COLUMNS)(iter(_changes([("a", 1, 0, False)]).to_batches())))
    d = FollowDir(tmp_path)
    d.settle_spec(table_spec(_app().Table("t", default=int)), table_spec(_app().Table("t", default=int)))
    orphans = [tmp_path / ".part-00000.parquet.0123abcd.tmp", d.meta_dir / "export.tmp"]
    for p in orphans:
        p.write_bytes(b"half-written")
    fd = d.lock()
    try:
        assert sorted(d.remove_orphans()) == sorted(orphans)
    finally:
        d.unlock(fd)
    assert not any(p.exists() for p in orphans)
    assert partition_file(tmp_path, 0).exists() and d.meta_file.exists()  # the real files stay
    d.check_contents()


@pytest.mark.parametrize("content", [b"", b"{not json", b"[]", b'{"declared": 5, "spec": null}'])
def test_an_empty_or_bad_export_json_is_named_with_the_fix(tmp_path: Path, content: bytes) -> None:
    from agentstream.exporter.follow_dir import BadExportMeta
    from agentstream.exporter.offsets import ExportError

    d = FollowDir(tmp_path)
    d.meta_dir.mkdir()
    d.meta_file.write_bytes(content)
    spec = table_spec(_app().Table("t", default=int))
    with pytest.raises(BadExportMeta, match=r"export\.json (is empty|is not an export).*Fix: delete") as info:
        d.settle_spec(spec, spec)
    assert isinstance(info.value, ExportError)  # the CLI prints it as one line, no traceback


def test_the_swap_and_export_json_are_made_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentstream.exporter.compact import compactor

    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    d = FollowDir(tmp_path)
    spec = table_spec(_app().Table("t", default=int))
    d.settle_spec(spec, spec)
    # export.json's bytes before its rename, then the rename itself
    assert synced == [str(d.meta_file.with_suffix(".tmp")), str(d.meta_dir)]
    synced.clear()
    list(compactor(str(tmp_path), COLUMNS)(iter(_changes([("a", 1, 0, False)]).to_batches())))
    assert len(synced) == 2 and synced[0].endswith(".tmp") and synced[1] == str(tmp_path)
