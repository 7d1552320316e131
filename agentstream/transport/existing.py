"""Faust's ``topic_allow_declare=False``: the topics are managed by operations, so the app never
creates one. Where the app would create its topics (the worker at start, ``topic.maybe_declare()``,
``agent.ask()``'s reply topic) it checks instead that each exists with the partition count the app
needs, and fails naming every topic that is missing or has another count."""

from __future__ import annotations

from collections.abc import Sequence

from ..exceptions import ConfigError
from .base import TopicSpec, Transport

__all__ = ["ExistingTopicsOnly", "existing_topics_only"]


class ExistingTopicsOnly:
    """Mixed in before a transport's class: ``ensure_topics`` only checks."""

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> dict[str, int]:
        counts: dict[str, int] = {}
        missing: list[str] = []
        wrong: list[str] = []
        for spec in specs:
            count = await self.partition_count(spec.name)  # type: ignore[attr-defined]
            if count is None:
                missing.append(spec.name)
            elif count != spec.partitions:
                wrong.append(f"{spec.name} (has {count} partitions, the app needs {spec.partitions})")
            else:
                counts[spec.name] = count
        if missing or wrong:
            problems = ([f"missing: {', '.join(missing)}"] if missing else []) + (
                [f"other partition counts: {'; '.join(wrong)}"] if wrong else []
            )
            raise ConfigError(
                "topic_allow_declare",
                f"False: the app creates no topic, and {' / '.join(problems)}",
                "create them with those partition counts (kafka-topics.sh --create ...), or set "
                "topic_allow_declare=True to let the app create them",
            )
        return counts


_CLASSES: dict[type, type] = {}


def existing_topics_only(transport: Transport) -> Transport:
    """``transport``, made to check its topics instead of creating them (it stays an instance of
    its own class, so code that asks which transport it is still gets the answer)."""
    cls = type(transport)
    if issubclass(cls, ExistingTopicsOnly):
        return transport
    checked = _CLASSES.get(cls)
    if checked is None:
        checked = _CLASSES[cls] = type(f"ExistingTopicsOnly{cls.__name__}", (ExistingTopicsOnly, cls), {})
    transport.__class__ = checked
    return transport
