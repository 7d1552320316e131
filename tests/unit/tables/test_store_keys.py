"""The store-only index entries of :mod:`agentstream.tables.window_index` against a plain model:
new entries and removals wait in memory and reach the store in batches, and every read (a due
scan, a range scan) still answers as if each change had been written at once."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentstream.tables.partition import TablePartition
from agentstream.tables.store import Store, store_for
from agentstream.tables.window_index import StoreIndex, StoreKeys, drop_entries

PREFIX, END = b"\xff\xff\xff\xfeX", b"\xff\xff\xff\xfeY"


@pytest.fixture(params=["memory", "rocksdb"])
def part(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    store: Store = store_for(f"{request.param}://", tmp_path / "p")
    store.put(b"data", b"v")  # the partition's own data, around the index range
    store.put(b"\xff\xff\xff\xffafter", b"v")
    yield TablePartition(SimpleNamespace(name="t"), 0, store, None, 0)  # the index uses only its store
    store.close()


def in_store(part: Any) -> list[bytes]:
    return [k for k, _ in part.store.items(PREFIX, END)]


@pytest.mark.parametrize("seed", range(4))
def test_store_keys_answer_like_a_sorted_set(part: Any, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentstream.tables import window_index

    monkeypatch.setattr(window_index, "ADD_BATCH", 16)  # many batches in a short run
    rnd = random.Random(seed)
    keys = StoreKeys(part, PREFIX, END)
    model: set[bytes] = set()
    for _ in range(1500):
        group = bytes([rnd.randrange(4)])
        key = group + bytes([rnd.randrange(40)])
        op = rnd.random()
        if op < 0.4:
            keys.add(key, group)
            model.add(key)
        elif op < 0.7:
            batch = [bytes([rnd.randrange(4)]) + bytes([rnd.randrange(40)]) for _ in range(rnd.randrange(1, 4))]
            keys.remove(batch, [k[:1] for k in batch])
            model.difference_update(batch)
        else:
            lo, hi = sorted(rnd.randrange(41) for _ in range(2))
            got = keys.scan(group, group + bytes([lo]), group + bytes([hi]))
            assert got == sorted(k for k in model if k[:1] == group and lo <= k[1] < hi)
    keys.flush()
    assert [k[len(PREFIX) :] for k in in_store(part)] == sorted(model)
    assert part.store.get(b"data") == b"v"


@pytest.mark.parametrize("seed", range(4))
def test_store_index_takes_due_entries_once_in_order(part: Any, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentstream.tables import window_index

    monkeypatch.setattr(window_index, "ADD_BATCH", 16)
    rnd = random.Random(seed)
    index = StoreIndex(part, PREFIX, END)
    model: set[tuple[int, bytes]] = set()
    limit = 0
    for _ in range(1500):
        if rnd.random() < 0.6:
            end = limit + rnd.randrange(-5, 60)  # some below what was taken already (late ones)
            wk = bytes([rnd.randrange(30)])
            index.add(end, wk)
            model.add((end, wk))
        else:
            limit += rnd.randrange(0, 12)
            due = sorted(e for e in model if e[0] <= limit)
            assert index.due(limit) == [wk for _, wk in due]
            model.difference_update(due)
    index.due(1 << 40)
    index.done_adding()
    assert in_store(part) == []  # every entry taken was deleted from the store
    assert part.store.get(b"data") == b"v"


def test_drop_entries_deletes_the_range_only(part: Any) -> None:
    part.store.write_many([PREFIX + b"%05d" % i for i in range(2500)], [b""] * 2500)
    assert drop_entries(part, PREFIX, END) == 2500
    assert in_store(part) == []
    assert [k for k, _ in part.store.items()] == [b"data", b"\xff\xff\xff\xffafter"]
