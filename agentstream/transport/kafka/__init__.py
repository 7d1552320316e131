"""``kafka://`` transport: thin adapters from :mod:`agentstream.transport.base` to aiokafka.

Kept thin on purpose: the worker's hot path (``getmany``, ``send_now``/``send``) calls straight
into aiokafka; only errors are translated into :class:`~agentstream.exceptions.TransportError` so
callers catch one exception tree.

One concern per module (imports point down this list):

- :mod:`.transport`: ``KafkaTransport``, the :class:`~agentstream.transport.base.Transport`;
- :mod:`.producer`: ``KafkaProducer``, a facade over :mod:`.partitioning` (partition choice),
  :mod:`.accumulator` and :mod:`.batches` (open batches, deliveries, sticky failure),
  :mod:`.sender` (hand-over to aiokafka) and :mod:`.transactions`;
- :mod:`.consumer`: ``KafkaConsumer`` and :mod:`.assignor` (our assignor inside aiokafka);
- :mod:`.admin`: topic creation and partition counts;
- :mod:`.url`, :mod:`.config`, :mod:`.security`: URL parsing, per-client settings and error
  text, TLS/SASL.

Broker notes (tansu dev broker, see :mod:`agentstream.devbroker`): no idempotent/transactional
producer, and ListOffsets(latest) is wrong there, so partition ends come from fetch responses
(:meth:`KafkaConsumer.highwater`), never from ``end_offsets``.
"""

from __future__ import annotations

from .assignor import AssignorAdapter
from .consumer import KafkaConsumer
from .producer import KafkaProducer
from .transport import KafkaTransport
from .url import parse_kafka_url

__all__ = ["KafkaTransport", "KafkaProducer", "KafkaConsumer", "AssignorAdapter", "parse_kafka_url"]
