import agentstream as faust

app = faust.App("faust-global-table", broker="kafka://localhost:9092", topic_partitions=2)


class Order(faust.Record):
    id: str
    sku: str
    quantity: int


prices_topic = app.topic("faust-prices", key_type=str, value_type=float)
orders_topic = app.topic("faust-orders", key_type=str, value_type=Order)
totals_topic = app.topic("faust-order-totals", key_type=str, value_type=float)
prices = app.GlobalTable("prices", default=float)


@app.agent(prices_topic)
async def update_prices(stream):
    async for sku, price in stream.items():
        prices[sku] = price


@app.agent(orders_topic)
async def price_orders(orders):
    async for order in orders:
        await totals_topic.send(key=order.id, value=order.quantity * prices[order.sku])
