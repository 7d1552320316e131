"""Fault injection: the failures a test asks the memory broker for, each shown to the client as Kafka shows it."""

from __future__ import annotations

import collections
import contextlib
import logging
import random
from collections.abc import Iterator

__all__ = ["MemoryFaults", "FAULT_KINDS"]

FAULT_KINDS = ("send_fail", "send_cancel", "commit_fail", "txn_commit_fail", "txn_abort", "txn_offsets_late")
log = logging.getLogger(__name__)


class MemoryFaults:
    """Failures the memory broker injects on request, each the way Kafka shows it to a client.

    ``send_fail``        the record is not written; its delivery fails with ProducerError, and every
                         later ``flush()`` of that producer raises until it is stopped (or, in a
                         transaction, until the transaction is aborted: it can no longer commit)
    ``send_cancel``      the same, but the delivery is cancelled (a batch cancelled before it was queued)
    ``commit_fail``      an offset commit raises CommitFailed and stores nothing
    ``txn_commit_fail``  ``commit_transaction`` raises ProducerError; the transaction stays open and
                         can only be aborted (Kafka's abortable error)
    ``txn_abort``        the coordinator aborts the transaction at commit (e.g. it timed out): its
                         records are hidden from read_committed readers, its offsets are not stored,
                         ``commit_transaction`` raises ProducerError
    ``txn_offsets_late`` the transaction commits, but its offsets reach the group only when its
                         transactional id next starts a producer (InitProducerId) or ends a
                         transaction: until then ``committed()`` and a new assignment's positions
                         give the offsets before it. Kafka does this while the transaction's markers
                         are not written yet to answer an OffsetFetch without ``require_stable``
                         (KIP-447: version 7; aiokafka 0.14 sends version 3)

    ``arm(kind, times)`` fails the next ``times`` operations of that kind; ``randomly(seed, **rates)``
    fails each operation with a probability (seeded, so a failing run can be replayed).
    """

    def __init__(self) -> None:
        self._armed: collections.Counter[str] = collections.Counter()
        self._rates: dict[str, float] = {}
        self._rng = random.Random(0)
        self.fired: collections.Counter[str] = collections.Counter()
        self.active = False  # one attribute check on the send path when no fault is set

    def arm(self, kind: str, times: int = 1) -> None:
        self._check(kind)
        self._armed[kind] += times
        self.active = True

    def randomly(self, seed: int, **rates: float) -> None:
        for kind, rate in rates.items():
            self._check(kind)
            if not 0 <= rate <= 1:
                raise ValueError(f"fault rate {kind}={rate!r} must be a probability in 0..1")
        self._rng = random.Random(seed)
        self._rates = dict(rates)
        self.active = self._any_set()

    def clear(self) -> None:
        self._armed.clear()
        self._rates.clear()
        self.active = False

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No fault fires inside this block (a test feeding input or reading results); armed ones wait."""
        active, self.active = self.active, False
        try:
            yield
        finally:
            self.active = active or self._any_set()

    def take(self, kind: str) -> bool:
        """Should this operation of ``kind`` fail? (Counts it in ``fired`` when it does.)"""
        if not self.active:
            return False
        if self._armed[kind] > 0:
            self._armed[kind] -= 1
        elif not (self._rates.get(kind) and self._rng.random() < self._rates[kind]):
            return False
        self.fired[kind] += 1
        log.info("memory transport: injected fault %s", kind)
        return True

    def _any_set(self) -> bool:
        """Is any fault armed (even one already used up) or given a rate?"""
        return bool(self._armed) or any(self._rates.values())

    @staticmethod
    def _check(kind: str) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; use one of {', '.join(FAULT_KINDS)}")
