"""An aiokafka client whose metadata task ended is given a new one, saying why.

Every metadata refresh of an aiokafka client runs in one background task (``_md_synchronizer``);
``force_metadata_update()`` returns a future only that task resolves. If the task ends on an
exception aiokafka did not expect, nothing notices: the exception stays in the task, and whoever
waits for a refresh waits forever (its group coordinator, after a failed coordinator lookup: the
worker neither rejoins nor logs again, issue 39). :mod:`.conn_guard` removes the cause seen on
Kafka; this is the net for any other: our consumer calls :func:`revive` at every poll, which logs
the task's exception and starts aiokafka's loop again (it picks up the pending refresh).

Reaches into aiokafka 0.14's client (``_sync_task``, ``_md_synchronizer``); without them it does nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

__all__ = ["revive"]

log = logging.getLogger("agentstream.transport")


def revive(client: Any, group: str | None) -> bool:
    """Start a new metadata task for a consumer's ``client`` (of consumer group ``group``) if its task
    ended on an exception; True if it did. Cheap when it did not: it runs at every poll."""
    task = getattr(client, "_sync_task", None)
    if not isinstance(task, asyncio.Task) or not task.done() or task.cancelled():
        return False  # running (or none yet, or cancelled by the client's close)
    exc = task.exception()
    loop_fn = getattr(client, "_md_synchronizer", None)
    if exc is None or loop_fn is None:
        return False
    log.error(
        "consumer (group %r): aiokafka's metadata task ended on %r, which left every metadata refresh (and whatever waits "
        "for one, such as the group coordinator's lookup) hanging; starting it again",
        group,
        exc,
    )
    client._sync_task = asyncio.ensure_future(loop_fn())
    return True
