"""The ``memory://`` transport: an in-process twin of Kafka for tests and single-process runs.

It keeps Kafka's observable semantics rather than a convenient approximation, so code that works
here works against a broker: murmur2 key partitioning, append-only partitions with offsets,
committed offsets per group, eager rebalances (all revoked, leader assigns, all assigned) run as
a background task, and no auto-creation of topics. Brokers are process-global and keyed by the
URL, so several apps in one process that use the same URL share topics and consumer groups.

One concern per module (imports point down this list):

- :mod:`.transport`: ``MemoryTransport``, the :class:`~agentstream.transport.base.Transport`
  (one broker per URL; topic administration; reads for test assertions);
- :mod:`.producer`, :mod:`.consumer`: the broker's clients;
- :mod:`.broker`: ``MemoryBroker``, the state they share: topics, groups, the transaction
  coordinator, wake-ups for waiting readers;
- :mod:`.group`: consumer groups and their eager rebalance (Kafka's RangeAssignor by default);
- :mod:`.partitions`: partitions as append-only logs; :mod:`.faults`: ``MemoryFaults``, the
  failures a test can inject.
"""

from __future__ import annotations

from .consumer import MemoryConsumer
from .faults import FAULT_KINDS, MemoryFaults
from .partitions import Record
from .producer import MemoryProducer
from .transport import MemoryTransport

__all__ = ["MemoryTransport", "MemoryProducer", "MemoryConsumer", "MemoryFaults", "FAULT_KINDS", "Record"]
