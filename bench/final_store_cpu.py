"""CPU per record of a windowed table with ``final_results()`` (issue 45, finding 6): ``python
bench/final_store_cpu.py [store] [records] [keys] [commit interval]`` runs an app counting records
per key in hopping windows (10 s, every 5 s, grace 2 s) with final results on the harness' memory
broker with the given store (default ``rocksdb://``; 20,000 records of 2,000 keys, one every 10 ms;
the app's commit interval, 1 s), and prints the process CPU per record, the CPU the agent spent in
``wt[key] += 1`` (the table's write, the suppression buffer's and the finals' emission) per record
and the finals sent. Indicative only: one process, the harness' broker included."""

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
            f"finalcpu-{uuid.uuid4().hex[:6]}", broker="memory://", topic_partitions=1, web_enabled=False
        )
        topic = app.topic("events", key_type=str, value_type=dict)
        wt = app.Table("counts", default=int, key_type=str).hopping(10, 5, expires=60, grace=2)
        wt.final_results("counts-final")
        spent = [0.0]

        @app.agent(topic)
        async def count(stream: agentstream.Stream) -> None:
            clock = time.process_time
            async for event in stream.events():
                t0 = clock()
                wt[event.key] += 1
                spent[0] += clock() - t0

        rng = random.Random(7)
        async with AppHarness(app, store=store, data_dir=data_dir, commit_interval=commit_interval) as h:
            cpu0 = time.process_time()
            for i in range(records):
                await h.send("events", {}, key=f"key-{rng.randrange(keys)}", timestamp=1_700_000_000 + i * 0.01)
            await h.wait_idle()
            cpu = time.process_time() - cpu0
            sent = len(h.read("counts-final"))
        print(
            f"{store} records={records} keys={keys} commit_interval={commit_interval}: process CPU "
            f"{cpu / records * 1e6:.1f} us/record, table op {spent[0] / records * 1e6:.1f} us/record, finals {sent}"
        )


if __name__ == "__main__":
    asyncio.run(
        run(
            sys.argv[1] if len(sys.argv) > 1 else "rocksdb://",
            int(sys.argv[2]) if len(sys.argv) > 2 else 20_000,
            int(sys.argv[3]) if len(sys.argv) > 3 else 2_000,
            float(sys.argv[4]) if len(sys.argv) > 4 else 1.0,
        )
    )
