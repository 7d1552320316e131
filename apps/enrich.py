"""Order enrichment: a stream-GlobalTable join and a windowed stream-stream join.

Topics and keys (all values JSON; keys are UTF-8 strings):

* ``orders``    key ``order_id``    ``{"order_id", "customer_id", "amount", "ts"}``
* ``payments``  key ``order_id``    ``{"order_id", "paid", "ts"}``
* ``customers`` key ``customer_id`` ``{"customer_id", "name", "country"}``

Orders and payments are keyed by ``order_id`` so they are co-partitioned (same key bytes, same
partition count, Kafka's default partitioner): partition p of both meets in one task, which the
stream-stream join needs. Customers are keyed by ``customer_id`` and read as a GlobalTable (the
``customers`` topic is its changelog; every worker holds all of it), so orders need no
repartitioning to look them up. The joins use the *record timestamps*: producers should set
each record's timestamp to its ``ts`` (seconds) field.

* ``enrich_orders``: every order, with its customer's name and country (None when the customer
  is unknown: a left join), to ``enriched-orders`` (key ``order_id``).
* ``pay_orders``: every (order, payment) pair of one order whose timestamps are at most 5 minutes
  apart, to ``paid-orders`` (key ``order_id``). An inner join: orders never paid within the window
  give nothing. ``grace`` (30 minutes of event time) is how far behind the other input a record
  may arrive and still join; both sides are buffered (changelogged) for ``2 * within + grace``.
"""

from __future__ import annotations

import os
from datetime import timedelta

import agentstream

app = agentstream.App(
    "enrich",
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
)

orders = app.topic("orders", key_type=str, value_type=dict)
payments = app.topic("payments", key_type=str, value_type=dict)
customers_topic = app.topic("customers", key_type=str, value_type=dict)
enriched_orders = app.topic("enriched-orders", key_type=str, value_type=dict)
paid_orders = app.topic("paid-orders", key_type=str, value_type=dict)

customers = app.GlobalTable("customers").from_topic(customers_topic)

PAYMENT_WINDOW = timedelta(minutes=5)
PAYMENT_GRACE = timedelta(minutes=30)


@app.agent(orders)
async def enrich_orders(stream: agentstream.Stream) -> None:
    async for order, customer in stream.left_join(customers, key=lambda o: o["customer_id"]):
        await enriched_orders.send(
            key=order["order_id"],
            value={
                **order,
                "name": None if customer is None else customer["name"],
                "country": None if customer is None else customer["country"],
            },
        )


@app.agent(orders)
async def pay_orders(stream: agentstream.Stream) -> None:
    async for order, payment in stream.join(payments, within=PAYMENT_WINDOW, grace=PAYMENT_GRACE):
        await paid_orders.send(
            key=order["order_id"],
            value={
                "order_id": order["order_id"],
                "customer_id": order["customer_id"],
                "amount": order["amount"],
                "paid": payment["paid"],
                "order_ts": order["ts"],
                "paid_ts": payment["ts"],
            },
        )
