"""Restore: replay changelog partitions into their stores until each reaches its end.

Runs on its own consumer (never the group consumer: Faust's recovery-hang lesson)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, cast

from ..transport.base import TP, Consumer
from .partition import TablePartition

if TYPE_CHECKING:
    from ..testing_faults import FaultInjector

log = logging.getLogger("agentstream.tables")

__all__ = ["Restorer", "PROGRESS_EVERY"]

PROGRESS_EVERY = 3.0


class Restorer:
    """Replays changelog partitions into their stores until each reaches its end."""

    def __init__(self, consumer: Consumer, label: str, faults: "FaultInjector | None" = None) -> None:
        self.consumer = consumer
        self.label = label
        self.restored = 0
        self.faults = faults

    async def run(self, parts: dict[TP, TablePartition], *, batch: int = 10_000) -> int:
        if not parts:
            return 0
        consumer = self.consumer
        consumer.assign(list(parts))
        starts: dict[TP, int] = {}
        for tp, part in parts.items():
            start = part.changelog_offset or 0
            starts[tp] = start
            consumer.seek(tp, start)
        remaining = dict(parts)
        done = 0
        began = last_log = time.monotonic()
        empty = 0
        rewound = False
        while remaining:
            batches = await consumer.getmany(timeout_ms=300, max_records=batch)
            for tp, messages in batches.items():
                found = remaining.get(tp)
                if found is None or not messages:
                    continue
                if messages[0].offset < starts[tp]:
                    # The checkpoint was beyond the changelog's end and the reader was reset:
                    # the changelog was deleted or recreated. Start over from an empty store.
                    log.warning("%s: checkpoint %d of %s is beyond the changelog's end; wiping the store and "
                                "restoring from the beginning", self.label, starts[tp], tp)
                    found.store.wipe()
                    starts[tp] = messages[0].offset
                found.store.write_batch((cast(bytes, m.key), m.value) for m in messages)
                found.changelog_offset = messages[-1].offset + 1
                done += len(messages)
                if self.faults is not None:
                    self.faults.check("mid_restore")
            for tp, part in list(remaining.items()):
                hw = consumer.highwater(tp)
                if hw is not None and (part.changelog_offset or 0) < hw:
                    # Aborted transactions (and Kafka's commit markers) occupy offsets no record is
                    # returned for: the reader's position, not the last record, says how far it got.
                    pos = await consumer.position(tp)
                    if pos > (part.changelog_offset or 0) and pos >= starts[tp]:
                        part.changelog_offset = pos
                if hw is not None and (part.changelog_offset or 0) >= hw:
                    if (part.changelog_offset or 0) > hw:
                        log.warning("%s: checkpoint %d of %s is beyond the changelog's end %d; wiping and "
                                    "restoring from the beginning", self.label, part.changelog_offset, tp, hw)
                        part.store.wipe()
                        part.changelog_offset = 0
                        starts[tp] = 0
                        consumer.seek(tp, 0)
                        rewound = True
                        continue
                    del remaining[tp]
            # Empty fetches end the restore only if nothing was rewound since: a rewind's first
            # fetches come back empty while the reader resets (it restored 0 records before).
            empty = 0 if batches or rewound else empty + 1
            rewound = False
            if empty >= 3:
                break  # fetches come back empty: every remaining partition is at its end
            now = time.monotonic()
            if now - last_log >= PROGRESS_EVERY and remaining:
                total = sum(max(0, (consumer.highwater(tp) or 0) - starts[tp]) for tp in parts)
                rate = done / max(now - began, 1e-9)
                eta = (total - done) / rate if rate > 0 and total > done else 0.0
                log.info("%s: restoring %d/%d records (%.0f records/s, ETA %.0fs)", self.label, done, total, rate, eta)
                last_log = now
        for part in parts.values():
            part.checkpoint(force=True)
        self.restored += done
        elapsed = time.monotonic() - began
        log.info("%s: restored %d records into %d partitions in %.2fs (%.0f records/s)", self.label, done,
                 len(parts), elapsed, done / max(elapsed, 1e-9))
        return done
