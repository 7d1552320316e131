"""CPU per record of a session table (issue 45, finding 6): ``python bench/session_store_cpu.py
[store] [records] [keys] [commit interval]`` runs an app counting records per key and session (gap
30 s) on the harness' memory broker with the given store (default ``rocksdb://``; 30,000 records of
2,000 keys; the app's commit interval, 1 s), and prints the process CPU per record and the CPU the
agent spent in the table's read and write (``st[key] += 1``) per record. Indicative only: one
process, the harness' broker included."""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
import uuid

import agentstream
from agentstream.testing import AppHarness


async def run(store: str, records: int, keys: int, commit_interval: float) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        app = agentstream.App(
            f"sesscpu-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, web_enabled=False
        )
        topic = app.topic("events", key_type=str, value_type=dict)
        st = app.Table("counts", default=int, key_type=str).session(30.0, grace=0.0)
        spent = [0.0]

        @app.agent(topic)
        async def count(stream: agentstream.Stream) -> None:
            clock = time.process_time
            async for event in stream.events():
                t0 = clock()
                st[event.key] += 1
                spent[0] += clock() - t0

        rng = random.Random(7)
        async with AppHarness(app, store=store, data_dir=data_dir, commit_interval=commit_interval) as h:
            cpu0 = time.process_time()
            for i in range(records):
                await h.send("events", {}, key=f"key-{rng.randrange(keys)}", timestamp=1_700_000_000 + i * 0.01)
            await h.wait_idle()
            cpu = time.process_time() - cpu0
            live = len(st)
        print(
            f"{store} records={records} keys={keys} commit_interval={commit_interval}: process CPU {cpu / records * 1e6:.1f} us/record, "
            f"table op {spent[0] / records * 1e6:.1f} us/record, live sessions at the end {live}"
        )


if __name__ == "__main__":
    asyncio.run(
        run(
            sys.argv[1] if len(sys.argv) > 1 else "rocksdb://",
            int(sys.argv[2]) if len(sys.argv) > 2 else 30_000,
            int(sys.argv[3]) if len(sys.argv) > 3 else 2_000,
            float(sys.argv[4]) if len(sys.argv) > 4 else 1.0,
        )
    )
