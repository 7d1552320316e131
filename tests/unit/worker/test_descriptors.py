"""Issue 45 finding 7: file descriptors. The worker raises its soft open-file limit to the hard one
at start, each RocksDB store bounds the files it keeps open, and ``/status`` counts descriptors."""

from __future__ import annotations

import asyncio
import os
import resource
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from agentstream.tables.rocksdb import MAX_OPEN_FILES, RocksDBStore
from agentstream.testing import AppHarness
from agentstream.worker.worker import Worker

from ..restore_checkpoint.test_clean_restart import counting_app


@pytest.fixture
def low_soft_limit() -> Iterator[tuple[int, int]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 256)
    if hard != resource.RLIM_INFINITY and hard <= low:
        pytest.skip(f"the hard limit ({hard}) leaves nothing to raise")
    resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
    try:
        yield low, hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_worker_raises_its_soft_descriptor_limit_to_the_hard_one(
    tmp_path: Path, low_soft_limit: tuple[int, int]
) -> None:
    low, hard = low_soft_limit
    app = counting_app(f"fd-{uuid.uuid4().hex[:6]}", f"memory://fd-{uuid.uuid4().hex[:8]}", tmp_path)
    worker = Worker(app)
    await worker.start()
    try:
        await asyncio.wait_for(worker.assigned.wait(), 10)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
    finally:
        await worker.stop()


def test_a_rocksdb_store_bounds_the_files_it_keeps_open(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "p0")
    try:
        store.put(b"k", b"v")
        store.flush()
        (options,) = sorted((tmp_path / "p0").glob("OPTIONS-*"))[-1:]
        assert f"max_open_files={MAX_OPEN_FILES}\n" in options.read_text()
        assert 0 < MAX_OPEN_FILES < 1024
    finally:
        store.close()


async def test_status_counts_the_open_descriptors() -> None:
    from apps.wordcount import app

    async with AppHarness(app) as h:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{h.web.url}/status") as r:
                before = (await r.json())["worker"]
            held = [os.open(os.devnull, os.O_RDONLY) for _ in range(50)]
            try:
                async with s.get(f"{h.web.url}/status") as r:
                    after = (await r.json())["worker"]
                async with s.get(f"{h.web.url}/metrics") as r:
                    metrics = await r.text()
            finally:
                for fd in held:
                    os.close(fd)
        assert after["open_fds"] >= before["open_fds"] + 50
        assert after["fd_limit"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert "agentstream_open_fds " in metrics and "agentstream_max_fds " in metrics
