"""Baselines for the pass-through case: each fetched record copied unchanged to another topic,
by the shared hand-written loop (:mod:`bench.raw_loop`): ``await producer.send()`` per record,
or with ``--batch`` through aiokafka's batch API.

    python -m bench.raw_passthrough --in T --out T2 --group G --expect N [--batch] [--progress S]
    python -m bench.raw_passthrough --in T --out T2 --group G --until-signal --progress S [--batch]
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aiokafka import TopicPartition

from bench import raw_loop
from bench.common import Meter


class PassThrough:
    distinct_keys = True

    def __init__(self, args: argparse.Namespace) -> None:
        self.inputs, self.outputs = [args.in_topic], [args.out_topic]
        self.out = args.out_topic
        self.expect = args.expect
        self.handled = 0

    async def handle(self, tp: TopicPartition, messages: list[Any], send: raw_loop.Send) -> None:
        out = self.out
        for m in messages:
            await send(out, m.key, m.value)
        self.handled += len(messages)

    @property
    def work(self) -> int:
        return self.handled

    def finished(self) -> bool:
        return self.handled >= self.expect

    def result(self, meter: Meter) -> dict[str, Any]:
        return meter.stop(self.handled, processed=self.handled)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="in_topic", required=True)
    p.add_argument("--out", dest="out_topic", required=True)
    p.add_argument("--expect", type=int, default=0)
    raw_loop.add_arguments(p)
    args = p.parse_args()
    return raw_loop.main(args, PassThrough(args))


if __name__ == "__main__":
    sys.exit(main())
