"""A task's name: ``(sub-topology, partition)``.

A module of its own because a subclass of ``tuple`` cannot be a compiled (mypyc) class, and
``worker/task.py`` is compiled.
"""

from __future__ import annotations


class TaskId(tuple[int, int]):
    """``(sub-topology, partition)``, printed like Kafka Streams' ``0_3``."""

    def __new__(cls, subtopology: int, partition: int) -> TaskId:
        return super().__new__(cls, (subtopology, partition))

    @property
    def subtopology(self) -> int:
        return self[0]

    @property
    def partition(self) -> int:
        return self[1]

    def __str__(self) -> str:
        return f"{self[0]}_{self[1]}"
