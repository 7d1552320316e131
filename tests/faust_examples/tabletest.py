"""Scenario of Faust's examples/tabletest.py: a counting table fed one in-order sequence per
partition, checked for gaps with ``event.message.offset``; ``@app.table_route`` page; the table
printed on ``on_rebalance_complete`` and by a timer unless ``app.rebalancing``; a ``produce``
command. Each partition's total is sum(range(ITERATIONS))."""

import asyncio

import agentstream as faust

ITERATIONS = 30
EXPECTED_SUM = sum(range(ITERATIONS))

app = faust.App(
    "fx-tabletest",
    broker="kafka://localhost:9092",
    store="rocksdb://",
    origin="tests.faust_examples.tabletest",
    version=1,
    topic_partitions=4,
    stream_buffer_maxsize=16368,
)
source_topic = app.topic("fx-countstopic", key_type=str, value_type=int)
counts = app.Table("counts", default=int)
seen = {}
prev_offsets = {}


@app.agent(source_topic)
async def count(stream):
    async for event in stream.events():
        partition = event.key
        value = event.value
        prev = seen.get(partition)
        if prev is not None and value != prev + 1:
            print(f"!!! PREV {partition} WAS {prev} NOW {value} OFFSET {event.message.offset}")
        seen[partition] = value
        prev_offsets[partition] = event.message.offset
        counts[str(partition)] += value


@app.page("/count/{partition}/")
@app.table_route(table=counts, match_info="partition")
async def get_count(web, request, partition):
    return web.json({partition: counts[str(partition)]})


@app.on_rebalance_complete.connect
async def on_rebalance_complete(sender, **kwargs):
    print(counts.as_ansitable(key="partition", value="count", title="$$ TALLY - after rebalance $$", sort=True))


@app.timer(1.0)
async def dump_count():
    if not app.rebalancing:
        print(counts.as_ansitable(key="partition", value="count", title="$$ TALLY $$", sort=True))


@app.command()
async def produce():
    for i in range(ITERATIONS):
        last_fut = None
        for j in range(app.conf.topic_partitions):
            last_fut = await source_topic.send(key=str(j), value=i, partition=j)
        await last_fut
    await asyncio.sleep(0.5)
