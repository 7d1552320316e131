"""Where an example app runs in a test: on the dev broker (the example's own names) or on the shared Kafka
cluster (the same app under names of its own, tests/integration/kafka_apps/, so runs never meet there).

A test asks for ``target`` and is parametrized ``indirect`` over ``"dev"`` and/or ``"kafka"``; it then takes
the broker, the app module for ``-A`` and every topic name from the :class:`Target`, never a literal.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """A broker and the names the example apps have on it."""

    kind: str  # "dev" | "kafka"
    url: str
    bootstrap: str
    ns: str = ""  # put before the app id and every topic name
    env: dict[str, str] = field(default_factory=dict)  # what a worker or CLI process needs for those names

    @property
    def kafka(self) -> bool:
        return self.kind == "kafka"

    # -- apps/wordcount.py ---------------------------------------------------------------------------------
    @property
    def wordcount(self) -> str:
        return "tests.integration.kafka_apps.wordcount" if self.ns else "apps.wordcount"

    @property
    def sentences(self) -> str:
        return f"{self.ns}sentences"

    @property
    def word_counts(self) -> str:
        return f"{self.ns}word-counts"

    @property
    def counts_changelog(self) -> str:
        return f"{self.ns}wordcount-word_counts-changelog"

    # -- apps/pageviews.py ---------------------------------------------------------------------------------
    @property
    def pageviews(self) -> str:
        return "tests.integration.kafka_apps.pageviews" if self.ns else "apps.pageviews"

    @property
    def page_views(self) -> str:
        return f"{self.ns}page-views"

    @property
    def page_view_counts(self) -> str:
        return f"{self.ns}page-view-counts"

    @property
    def page_views_changelog(self) -> str:
        return f"{self.ns}pageviews-page_views-changelog"


def on_dev_broker(url: str, bootstrap: str) -> Target:
    return Target("dev", url, bootstrap)


def on_kafka(url: str, bootstrap: str) -> Target:
    """Names of this test's own on the shared cluster (a letter first: an app id is one directory name)."""
    ns = f"t{uuid.uuid4().hex[:10]}-"
    return Target("kafka", url, bootstrap, ns, {"TEST_APP_NS": ns})
