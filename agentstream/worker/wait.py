"""How long a task waits for a lagging input: what :meth:`PartitionGroup.next` returns instead
of a record.

A module of its own because a subclass of ``float`` cannot be a compiled (mypyc) class, and
``worker/partition_group.py`` is compiled.
"""

from __future__ import annotations

__all__ = ["Wait"]


class Wait(float):
    """Returned by :meth:`PartitionGroup.next` when the task should wait this many seconds."""
