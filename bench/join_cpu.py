"""CPU per record of a stream-stream join's own state machine (``StreamStreamJoin``), driven
directly with no worker or broker, on a memory store and on a RocksDB store (issue 45, finding 6:
with RocksDB its index of buffered records lives in the store).

An outer join within 1 s; records alternate sides, 2 ms apart, over 2,000 keys, so each record
matches one and closes one; every 1,000 records the buffer table's cache is written to the store
as a commit would. Prints CPU microseconds per record and per result (process CPU time).

    python -m bench.join_cpu memory|rocksdb [records]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import agentstream
from agentstream.events import Event
from agentstream.joins import _buffer_table
from agentstream.joins.windowed import StreamStreamJoin
from agentstream.tables.partition import TablePartition
from agentstream.tables.store import store_for
from agentstream.transport.message import Message

KEYS = 2000


def main(kind: str, n: int) -> str:
    app = agentstream.App("jcpu", broker="memory://", topic_partitions=1, max_message_time_difference=0)
    left = app.topic("left", key_type=str, value_type=dict)
    app.topic("right", key_type=str, value_type=dict)
    table = _buffer_table(left, None, "jcpu-join")
    with tempfile.TemporaryDirectory() as tmp:
        part = TablePartition(table, 0, store_for(f"{kind}://", Path(tmp) / "p0"), None, 10_000)
        part.activate()
        table.parts[0] = part
        join = StreamStreamJoin(app, table, "right", "outer", 1000, 0)
        events = []
        for i in range(n):
            topic = "left" if i % 2 == 0 else "right"
            key = f"k{(i // 2) % KEYS}"
            value = {"id": i, "payload": "x" * 40}
            raw, kb = json.dumps(value).encode(), json.dumps(key).encode()
            message = Message(topic, 0, i, 1_000_000 + i * 2, 0, kb, raw, None, len(kb), len(raw), ())
            events.append((topic == "left", Event(key, value, message)))
        results = 0
        t0 = time.process_time()
        for i, (is_left, event) in enumerate(events):
            results += len(join.on_left(event) if is_left else join.on_right(event))
            if i % 1000 == 999:  # a commit: the cache's writes reach the store
                part.flush_cache()
                part.write_store()
        cpu = time.process_time() - t0
        part.close()
    return f"{kind}: {n} records, {results} results, {cpu / n * 1e6:.1f} us CPU/record, {cpu / max(results, 1) * 1e6:.1f} us/result"


if __name__ == "__main__":
    print(main(sys.argv[1] if len(sys.argv) > 1 else "rocksdb", int(sys.argv[2]) if len(sys.argv) > 2 else 20_000))
