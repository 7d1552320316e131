"""Issue 15 item 2 on a real worker process: hundreds of idle partial-header HTTP connections
neither exhaust the worker's file descriptors nor stop it counting, and are dropped by the
head deadline; the web token guards the real server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import aiohttp
import pytest

from agentstream.devbroker import DevBroker, free_port

from .cluster import Worker, feed, sentences, stop_all, true_counts, wait_counts

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CAP = 40
IDLE = 400


def _web_client_sockets(pid: int, port: int) -> int:
    """Descriptors the worker holds for connections to its web port (listening socket excluded):
    socket inodes of /proc/<pid>/fd matched against /proc/<pid>/net/tcp{,6}. Counting only these
    keeps the check independent of descriptors the worker opens for other reasons meanwhile
    (store files, broker connections), which made a whole-process count racy."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] != "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    held = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            held += 1
    return held


async def _hold_partial_connections(port: int, n: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    conns = []
    for _ in range(n):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            continue
        writer.write(b"GET /tables HTTP/1.1\r\nHost: x\r\n")  # never finished
        conns.append((reader, writer))
    return conns


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to count descriptors")
def test_idle_partial_header_connections_do_not_exhaust_the_worker(
    fresh_broker: DevBroker, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    port = free_port()
    w = Worker(
        "w1",
        fresh_broker.url,
        tmp_path / "w1",
        ARTIFACTS / request.node.name,
        web_port=port,
        env={
            "AGENTSTREAM_WEB_MAX_CONNECTIONS": str(CAP),
            "AGENTSTREAM_WEB_HEADER_TIMEOUT": "3",
            "AGENTSTREAM_WEB_TOKEN": "integration-token",
        },
    )
    try:
        w.wait_log(r"assigned: .*sentences\[0, 1, 2, 3\]")
        texts = sentences(2000, seed=5)

        async def attack_and_check() -> tuple[int, int, int, list[int]]:
            conns = await _hold_partial_connections(port, IDLE)
            await asyncio.sleep(0.5)
            during = _web_client_sockets(w.proc.pid, port)
            # the worker keeps processing meanwhile
            await asyncio.to_thread(feed, fresh_broker.bootstrap, texts)
            # the head deadline (3 s) drops every partial connection the cap let in
            open_after = IDLE
            for _ in range(100):
                await asyncio.sleep(0.2)
                open_after = sum(1 for r, _ in conns if not (r.at_eof() or r.exception() is not None))
                if open_after == 0:
                    break
            for _, writer in conns:
                writer.close()
            statuses = []
            async with aiohttp.ClientSession() as s:
                for headers in ({}, {"Authorization": "Bearer integration-token"}):
                    async with s.get(f"http://127.0.0.1:{port}/tables", headers=headers) as r:
                        statuses.append(r.status)
                async with s.get(f"http://127.0.0.1:{port}/livez") as r:
                    statuses.append(r.status)
            return len(conns), during, open_after, statuses

        opened, during, open_after, statuses = asyncio.run(attack_and_check())
        assert opened > CAP
        assert during <= CAP + 5, during  # the cap holds: not one descriptor per client (400 without it)
        assert open_after == 0
        assert statuses == [401, 200, 200]
        expected = true_counts(texts)
        assert wait_counts(fresh_broker.bootstrap, expected) == expected
        assert "connection cap" in w.log()
        assert w.terminate() == 0
    finally:
        stop_all([w])
