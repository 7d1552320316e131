"""Names of the internal topics an app creates, in agentstream's or Faust's scheme.

``topic_naming='faust'`` exists so agentstream can continue a running Faust app on the topics
it already has (its changelogs, agent and repartition topics, consumer group):

===============  ==========================================  ===========================================
topic            agentstream                                 faust (id = ``<id>[-v<version>]``)
===============  ==========================================  ===========================================
changelog        ``<id>-<table>-changelog``                  the same
agent topic      ``<id>-<module>.<function>``,               the same (Faust's name in both: producers
                 ``<id>-<name>`` with ``agent(name=)``       follow it; see agent_topic_name)
repartition      ``<id>-<name>-repartition``                 ``<id>-<source>-<name>-repartition``, the
                                                             ``<id>-`` left out when the source is an
                                                             agent topic; ``name`` of a Record field:
                                                             ``Model.field``
===============  ==========================================  ===========================================
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "faust_naming",
    "group_protocol_name",
    "changelog_topic_name",
    "agent_topic_name",
    "legacy_agent_topic_name",
    "repartition_topic_name",
]


def faust_naming(settings: Any) -> bool:
    return getattr(settings, "topic_naming", "agentstream") == "faust"


def changelog_topic_name(app_id: str, table: str) -> str:
    return f"{app_id}-{table}-changelog"


def agent_topic_name(settings: Any, fun: Callable[..., Any], name: str | None = None) -> str:
    """The topic of ``@app.agent()`` without a channel: Faust's ``<id>-<module>.<function>``, or
    ``<id>-<name>`` when the agent is given ``name=`` (Faust's agent name is its topic's suffix).

    The same in either ``topic_naming``: this topic is not internal, producers outside the app
    (Faust services, scripts, a Faust app being taken over) send to it by that name. A function
    defined in the script run as ``__main__`` is named after its file's module path, as Faust does."""
    if name:
        return f"{settings.id}-{name}"
    module = getattr(fun, "__module__", None) or "__main__"
    if module == "__main__":
        module = main_module_name()
    return f"{settings.id}-{module}.{getattr(fun, '__name__', 'agent')}"


def legacy_agent_topic_name(settings: Any, fun: Callable[..., Any]) -> str:
    """What agentstream named that topic before it followed Faust (``<id>-<function>``): a worker
    finding it on the broker warns that its records are not read."""
    return f"{settings.id}-{getattr(fun, '__name__', 'agent')}"


def main_module_name() -> str:
    """The module name Faust gives the script run as ``__main__``: its file's stem after the names
    of the packages it sits in, innermost first (Faust's order: ``pkg/sub/app.py`` gives
    ``sub.pkg.app``; kept so the topics Faust made are the ones read), or ``__main__`` when there
    is no file (a REPL)."""
    main = sys.modules.get("__main__")
    filename = getattr(main, "__file__", None)
    if not filename:
        return "__main__"
    path = Path(filename).absolute()
    packages = []
    folder = path.parent
    while (folder / "__init__.py").exists() and folder != folder.parent:
        packages.append(folder.name)
        folder = folder.parent
    return ".".join([*packages, path.stem])


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
