"""apps/pageviews.py with its id and topics prefixed by ``TEST_APP_NS`` (see the package docstring)."""

from __future__ import annotations

import os
from datetime import timedelta

import agentstream

WINDOW = 60.0
GRACE = 30.0
KEEP = timedelta(hours=1)


class PageView(agentstream.Record):
    page: str
    user: str
    ts: float


def make_app(ns: str, broker: str | None = None) -> agentstream.App:
    """The page-view count with ``ns`` before its id and topic names (tests in-process build theirs with it)."""
    app = agentstream.App(
        f"{ns}pageviews",
        broker=broker or os.environ.get("AGENTSTREAM_BROKER", "kafka://127.0.0.1:9092"),
        topic_partitions=4,
    )
    page_view_topic = app.topic(f"{ns}page-views", value_type=PageView)
    counts_topic = app.topic(f"{ns}page-view-counts", key_type=str, value_type=dict)
    page_views = (
        app.Table("page_views", default=int).tumbling(WINDOW, expires=KEEP, grace=GRACE).relative_to_field(PageView.ts)
    )

    @app.agent(page_view_topic)
    async def count_page_views(stream: agentstream.Stream) -> None:
        async for view in stream.group_by(PageView.page, name="by_page"):
            page_views[view.page] += 1
            if page_views[view.page].stale():
                continue
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

    return app


app = make_app(os.environ.get("TEST_APP_NS", ""))
