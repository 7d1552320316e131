"""Scenario of Faust's examples/advanced/isolated_partitions_crashing.py: an agent with
``isolated_partitions=True`` that asserts ``event.message.tp in stream.active_partitions``, a
table, and an ``@app.task`` reporting progress in a ``while not app.should_stop: await
app.sleep(...)`` loop; records from a ``produce`` command with options."""

from datetime import datetime
from itertools import count

import agentstream as faust
from agentstream.faust.cli import option


class Withdrawal(faust.Record, isodates=True, serializer="json"):
    user: str
    country: str
    amount: float
    date: datetime = None


app = faust.App("fx-withdrawals-isolated", broker="kafka://localhost:9092", store="rocksdb://", topic_partitions=4)
withdrawals_topic = app.topic("fx-withdrawals-isolated", value_type=Withdrawal)
withdrawal_counts = app.Table("withdrawal-counts", default=int)
seen_events = 0


@app.agent(withdrawals_topic, isolated_partitions=True)
async def track_user_withdrawal(withdrawals):
    global seen_events
    async for withdrawal in withdrawals:
        event = withdrawals.current_event
        assert event.message.tp in withdrawals.active_partitions
        seen_events += 1
        withdrawal_counts[withdrawal.user] += 1
        print(f"COUNT {withdrawal.user} {withdrawal_counts[withdrawal.user]}")


@app.task
async def report_progress(app):
    prev_count = 0
    while not app.should_stop:
        await app.sleep(0.5)
        if seen_events > prev_count:
            print(f"Progressing: was {prev_count} now {seen_events}")
        prev_count = seen_events


@app.command(option("--max-messages", type=int, default=12, help="Send at most N messages."))
async def produce(self, max_messages: int):
    users = count()
    for i in range(max_messages):
        user = f"user_{next(users) % 3}"
        await withdrawals_topic.send(key=user, value=Withdrawal(user=user, country="se", amount=float(i)))
