"""Page views per page per minute: a tumbling-window count on the view's own time.

``page-views`` carries JSON ``{"page": str, "user": str, "ts": epoch seconds}`` (any key).
``count_page_views`` re-keys views by page (``pageviews-by_page-repartition``, so each page is
counted in one place) and counts them in the windowed table ``page_views`` (60 s tumbling
windows on the ``ts`` field, so Kafka record timestamps never matter; changelog
``pageviews-page_views-changelog``). Every update sends the window's new count to
``page-view-counts``: key the page (UTF-8), value JSON
``{"page", "window_start", "window_end", "count"}`` with the bounds as integer epoch seconds.

A view arriving after its window closed (stream time, the largest ``ts`` seen in its partition,
at least ``window_end + GRACE``) is dropped and counted in ``page_views.late_dropped``.
Windows are kept for an hour after they end, then deleted (tombstoned in the changelog).
"""

from __future__ import annotations

import os
from datetime import timedelta

import agentstream

WINDOW = 60.0
GRACE = 30.0
KEEP = timedelta(hours=1)

app = agentstream.App(
    "pageviews",
    broker=os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
    topic_partitions=4,
)


class PageView(agentstream.Record):
    page: str
    user: str
    ts: float


page_view_topic = app.topic("page-views", value_type=PageView)
counts_topic = app.topic("page-view-counts", key_type=str, value_type=dict)
page_views = (
    app.Table("page_views", default=int).tumbling(WINDOW, expires=KEEP, grace=GRACE).relative_to_field(PageView.ts)
)


@app.agent(page_view_topic)
async def count_page_views(stream: agentstream.Stream) -> None:
    async for view in stream.group_by(PageView.page, name="by_page"):
        page_views[view.page] += 1
        if page_views[view.page].stale():
            continue  # its window had closed: the table dropped (and counted) it, nothing changed
        start, end = page_views.window.current(view.ts)
        await counts_topic.send(
            key=view.page,
            value={
                "page": view.page,
                "window_start": int(start),
                "window_end": int(end),
                "count": page_views[view.page].value(),
            },
        )
