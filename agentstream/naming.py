"""Names of the internal topics an app creates, in agentstream's or Faust's scheme.

``topic_naming='faust'`` exists so agentstream can continue a running Faust app on the topics
it already has (its changelogs, agent and repartition topics, consumer group):

===============  ==========================================  ===========================================
topic            agentstream                                 faust (id = ``<id>[-v<version>]``)
===============  ==========================================  ===========================================
changelog        ``<id>-<table>-changelog``                  the same
agent topic      ``<id>-<agent function name>``              ``<id>-<module>.<qualname>``
repartition      ``<id>-<name>-repartition``                 ``<id>-<source>-<name>-repartition``, the
                                                             ``<id>-`` left out when the source is an
                                                             agent topic; ``name`` of a Record field:
                                                             ``Model.field``
===============  ==========================================  ===========================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["faust_naming", "group_protocol_name", "changelog_topic_name", "agent_topic_name", "repartition_topic_name"]


def faust_naming(settings: Any) -> bool:
    return getattr(settings, "topic_naming", "agentstream") == "faust"


def changelog_topic_name(app_id: str, table: str) -> str:
    return f"{app_id}-{table}-changelog"


def agent_topic_name(settings: Any, fun: Callable[..., Any], agent_name: str) -> str:
    """The topic of ``@app.agent()`` without a channel."""
    if faust_naming(settings):
        module = getattr(fun, "__module__", None) or "__main__"
        qualname = getattr(fun, "__qualname__", None) or agent_name
        return f"{settings.id}-{module}.{qualname}"
    return f"{settings.id}-{agent_name}"


def repartition_topic_name(
    settings: Any, source: str, name: str, faust_name: str | None = None, has_prefix: bool = False
) -> str:
    """The topic of ``stream.group_by(key, name=...)`` over ``source``.

    ``faust_name`` is the name Faust gives the split (``Model.field`` for a Record field key).
    Faust derives the topic from the source's name and adds the app id prefix only when the
    source does not carry it already (an agent's own topic does, and so does one declared
    ``has_prefix=True``)."""
    if not faust_naming(settings):
        return f"{settings.id}-{name}-repartition"
    prefix = "" if has_prefix or source.startswith(f"{settings.id}-") else f"{settings.id}-"
    return f"{prefix}{source}-{faust_name or name}-repartition"


def group_protocol_name(settings: Any) -> str:
    """The consumer group's assignment protocol name. Under Faust's naming it is Faust's ("faust"):
    brokers that keep an empty group's protocol (tansu does) refuse a member offering another one,
    so a group Faust used could not be joined. Faust's workers must be stopped first either way."""
    return "faust" if faust_naming(settings) else "agentstream"
