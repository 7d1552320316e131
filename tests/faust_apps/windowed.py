from datetime import timedelta

import agentstream as faust

app = faust.App("faust-windowed", broker="kafka://localhost:9092", topic_partitions=2)


class PageView(faust.Record):
    page: str
    user: str


page_views = app.topic("faust-page-views", value_type=PageView)
window_counts = app.topic("faust-window-counts", key_type=str)

tumbling_views = app.Table("tumbling_views", default=int).tumbling(timedelta(seconds=10), expires=timedelta(hours=1))
hopping_views = app.Table("hopping_views", default=int).hopping(10.0, 5.0, expires=timedelta(hours=1))


@app.agent(page_views)
async def count_page_views(views):
    async for view in views.group_by(PageView.page):
        tumbling_views[view.page] += 1
        hopping_views[view.page] += 1
        await window_counts.send(
            key=view.page,
            value={
                "tumbling": tumbling_views[view.page].current(),
                "hopping": hopping_views[view.page].current(),
            },
        )
