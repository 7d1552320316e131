"""Spark export on the real broker: real workers fill a table, the worker stops, the table is
exported to Parquet (and once through the CLI), read back, and compared with the changelog's last
values and with the counts computed directly from the input."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentstream.devbroker import DevBroker

from .cluster import (
    ROOT,
    Worker,
    _produce,
    changelog_state,
    feed,
    read_topic,
    sentences,
    stop_all,
    true_counts,
    wait_counts,
)

pytest.importorskip("pyspark", reason="needs the spark extra: pip install 'agentstream[spark]'")
pa_parquet = pytest.importorskip("pyarrow.parquet")

from agentstream.exporter import JavaNotFound, check_java  # noqa: E402
from agentstream.exporter.spark import export_table, read_changelog, spark_session  # noqa: E402
from agentstream.tables.windowed import STREAM_TIME_KEY  # noqa: E402
from agentstream.tables.windows import parse_window_key  # noqa: E402

from .kafka_apps.wordcount import make_app as make_wordcount  # noqa: E402
from .targets import Target  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

try:
    check_java()
except JavaNotFound as exc:  # pragma: no cover - the Makefile installs Java
    pytest.skip(str(exc), allow_module_level=True)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One small local session for the module: starting a JVM is the slow part."""
    session = spark_session(
        "local[2]",
        app_name="agentstream-export-tests",
        conf={"spark.sql.shuffle.partitions": 4, "spark.default.parallelism": 2},
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def _parquet_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pa_parquet.read_table(str(path)).to_pylist()
    return rows


@pytest.mark.parametrize("target", ["kafka-else-dev"], indirect=True)
def test_export_word_counts_equals_changelog_and_direct_count(
    target: Target, spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    t = target
    texts = sentences(2000, seed=11)
    expected = true_counts(texts)
    w = Worker("w1", t.url, tmp_path / "w1", ARTIFACTS / request.node.name, app=t.wordcount, env=t.env)
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        feed(t.bootstrap, texts, topic=t.sentences)
        assert wait_counts(t.bootstrap, expected, topic=t.word_counts) == expected
        assert w.terminate() == 0
    finally:
        stop_all([w])

    topic = t.counts_changelog
    # Faust's raw keys (UTF-8 words), JSON values
    from_changelog = {k.decode(): int(v) for k, v in changelog_state(t.bootstrap, topic).items()}
    assert from_changelog == expected

    # the app as the worker had it: on Kafka, the example under this test's names
    app: Any = make_wordcount(t.ns, t.url) if t.ns else t.wordcount
    lines: list[str] = []
    out = tmp_path / "word_counts.parquet"
    started = time.monotonic()
    summary = export_table(app, "word_counts", out, broker=t.url, spark=spark, progress=lines.append)
    elapsed = time.monotonic() - started
    rows = _parquet_rows(out)
    exported = {r["key"]: int(r["value"]) for r in rows}
    assert all(type(r["value"]) is int for r in rows)  # default=int: a long column, not JSON text
    assert len(rows) == len(exported)  # one row per key
    assert exported == from_changelog == expected
    assert summary["rows"] == len(expected)
    assert sorted(summary["partitions"]) == [0, 1, 2, 3]
    assert sum(1 for line in lines if line.startswith("partition ") and "records to read" in line) == 4
    # Where each value came from: the partition the word is counted in, the last offset of its key.
    last: dict[tuple[int, str], int] = {}
    for p, info in summary["partitions"].items():
        assert info["rows"] == sum(1 for r in rows if r["partition"] == p)
    for r in rows:
        assert r["timestamp"] is not None and r["offset"] >= 0
        last[(r["partition"], r["key"])] = r["offset"]
    assert len(last) == len(rows)
    print(f"\nexport of {summary['records']} changelog records / {len(rows)} keys took {elapsed:.1f}s")

    # All versions: every changelog record, as many as a plain read of the topic returns.
    all_versions = read_changelog(spark, app, "word_counts", latest=False, broker=t.url)
    assert all_versions.count() == len(read_topic(t.bootstrap, topic)) == summary["records"]
    # The last version of every key by offset, computed here, equals the latest export.
    by_key: dict[str, tuple[int, str]] = {}
    for r in all_versions.select("key", "offset", "value").collect():
        if r["key"] not in by_key or r["offset"] > by_key[r["key"]][0]:
            by_key[r["key"]] = (r["offset"], r["value"])
    assert {k: int(v) for k, (_, v) in by_key.items()} == expected


def test_export_cli_json(fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``agentstream -A apps.wordcount export word_counts --format json``: its own JVM, progress lines."""
    texts = sentences(300, seed=12)
    expected = true_counts(texts)
    w = Worker("w1", fresh_broker.url, tmp_path / "w1", ARTIFACTS / request.node.name)
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        feed(fresh_broker.bootstrap, texts)
        assert wait_counts(fresh_broker.bootstrap, expected) == expected
        assert w.terminate() == 0
    finally:
        stop_all([w])
    out = tmp_path / "json-out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentstream",
            "-A",
            "apps.wordcount",
            "export",
            "word_counts",
            "--out",
            str(out),
            "--format",
            "json",
            "--master",
            "local[1]",
            "--broker",
            fresh_broker.url,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if "records to read" in line] == [f"partition {p}" for p in range(4)]
    assert any(line.startswith("exported word_counts") for line in lines), proc.stdout
    # progress while the JVM starts and Spark reads and writes, not a silent minute
    assert any(line.startswith("starting Spark (local[1]") for line in lines), proc.stdout
    assert any(line.startswith("Spark started in") for line in lines), proc.stdout
    assert any(line.startswith("reading ") and "writing json" in line for line in lines), proc.stdout
    got: dict[str, int] = {}
    for part in sorted(out.glob("part-*.json")):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            got[row["key"]] = int(row["value"])
    assert got == expected


def test_export_cli_missing_table_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentstream", "-A", "apps.wordcount", "export", "nope", "--out", str(tmp_path / "x")],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "no table 'nope'" in proc.stderr and "word_counts" in proc.stderr


# -- the windowed pageviews table ---------------------------------------------------------------------

WINDOW = 60
BASE = 60 * 28_333_334  # a window boundary (1_700_000_040)
PAGES = [f"/page/{i}" for i in range(12)]


def _views(n: int, seed: int = 5) -> list[dict[str, Any]]:
    """Views in two windows, all within 90 s of BASE: with 30 s grace the first window closes
    at stream time BASE+90, so no view can be late whatever order partitions are processed in."""
    rnd = random.Random(seed)
    views = [
        {"page": rnd.choice(PAGES), "user": f"u{rnd.randint(0, 50)}", "ts": BASE + rnd.uniform(0, 89.0)}
        for _ in range(n)
    ]
    views.sort(key=lambda v: v["ts"])
    return views


def _window_counts(views: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for v in views:
        start = int(v["ts"] // WINDOW * WINDOW)
        out[(v["page"], start)] = out.get((v["page"], start), 0) + 1
    return out


def _reported_counts(bootstrap: str) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for _, v in read_topic(bootstrap, "page-view-counts"):
        assert v is not None
        d = orjson.loads(v)
        out[(d["page"], d["window_start"])] = d["count"]
    return out


def test_export_windowed_page_views(
    fresh_broker: DevBroker, spark: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    views = _views(1500)
    expected = _window_counts(views)
    assert {start for _, start in expected} == {BASE, BASE + WINDOW}
    w = Worker("w1", fresh_broker.url, tmp_path / "w1", ARTIFACTS / request.node.name, app="apps.pageviews")
    try:
        w.wait_log(r"assigned: .*page-views\[0, 1, 2, 3\]")
        asyncio.run(_produce(fresh_broker.bootstrap, "page-views", [orjson.dumps(v) for v in views]))
        deadline = time.monotonic() + 120
        got: dict[tuple[str, int], int] = {}
        while time.monotonic() < deadline and got != expected:
            time.sleep(1.0)
            got = _reported_counts(fresh_broker.bootstrap)
        assert got == expected
        assert w.terminate() == 0
    finally:
        stop_all([w])

    from_changelog: dict[tuple[str, int], int] = {}
    for k, v in changelog_state(fresh_broker.bootstrap, "pageviews-page_views-changelog").items():
        if k == STREAM_TIME_KEY:
            continue
        kb, start = parse_window_key(k)
        from_changelog[(kb.decode(), int(start))] = int(v)
    assert from_changelog == expected

    df = read_changelog(spark, "apps.pageviews", "page_views", broker=fresh_broker.url)
    assert df.columns == ["key", "window_start", "window_end", "value", "partition", "offset", "timestamp"]
    out = tmp_path / "page_views.parquet"
    df.write.parquet(str(out))
    rows = _parquet_rows(out)
    exported: dict[tuple[str, int], int] = {}
    for r in rows:
        start, end = r["window_start"].timestamp(), r["window_end"].timestamp()
        assert end - start == WINDOW
        exported[(r["key"], int(start))] = int(r["value"])
    assert len(rows) == len(exported)
    assert exported == from_changelog == expected


def test_csv_flattening_of_struct_values(spark: Any, tmp_path: Path) -> None:
    """CSV cannot hold structs: Record values become value_<field> columns, nested data JSON."""
    from agentstream.exporter.spark import CSV_OPTIONS, _csv_ready

    df = spark.createDataFrame(
        [("k", {"page": "/a", "tags": ["x", "y"], "n": 3}, b"\x01")],
        "key string, value struct<page: string, tags: array<string>, n: long>, raw binary",
    )
    flat = _csv_ready(df)
    assert flat.columns == ["key", "value_page", "value_tags", "value_n", "raw"]
    flat.coalesce(1).write.options(**CSV_OPTIONS).csv(str(tmp_path / "out"))
    text = "".join(p.read_text() for p in sorted((tmp_path / "out").glob("part-*.csv")))
    assert text.splitlines() == ["key,value_page,value_tags,value_n,raw", 'k,/a,"[""x"",""y""]",3,AQ==']


PLAIN_SESSION = """
import json, sys
from pyspark.sql import SparkSession
from agentstream.exporter.spark import read_changelog

spark = (SparkSession.builder.master("local[1]").appName("a-users-own-session")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
df = read_changelog(spark, "apps.wordcount", "word_counts", broker=sys.argv[1])
print("ROWS " + json.dumps({r["key"]: int(r["value"]) for r in df.collect()}))
spark.stop()
"""


def test_read_changelog_from_a_plain_spark_session(fresh_broker: DevBroker, tmp_path: Path) -> None:
    """The user's own ``SparkSession.builder...getOrCreate()`` (not :func:`spark_session`), in a process
    whose ``python3`` cannot import aiokafka and without PYSPARK_PYTHON: the source still runs."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "wordcount-word_counts-changelog"
    expected = {f"w{i}": i * 3 for i in range(40)}

    async def fill() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=fresh_broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=fresh_broker.bootstrap)
        await producer.start()
        try:
            for i, (word, n) in enumerate(expected.items()):
                # raw UTF-8 keys: the word_counts table key encoding (Faust's raw keys)
                await producer.send_and_wait(topic, orjson.dumps(n - 1), key=word.encode(), partition=i % 4)
                await producer.send_and_wait(topic, orjson.dumps(n), key=word.encode(), partition=i % 4)
        finally:
            await producer.stop()

    asyncio.run(fill())
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", PLAIN_SESSION, fresh_broker.url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = next(line for line in proc.stdout.splitlines() if line.startswith("ROWS "))
    assert json.loads(rows[5:]) == expected
