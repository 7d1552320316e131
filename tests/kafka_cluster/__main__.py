"""``python -m tests.kafka_cluster``: a 3-broker Kafka cluster on loopback until Ctrl-C (what ``make kafka`` runs).

``--state FILE`` writes the cluster's addresses for ``AGENTSTREAM_TEST_KAFKA_STATE``.
``python -m tests.kafka_cluster keep DIR PID`` is the test run's keeper (see ``shared.py``).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from .cluster import KafkaCluster, KafkaUnavailable
from .shared import keep


def main(argv: list[str]) -> int:
    if argv[:1] == ["keep"]:
        return keep(Path(argv[1]), int(argv[2]))
    state = None
    if argv[:1] == ["--state"]:
        state, argv = Path(argv[1]), argv[2:]
    size = int(argv[0]) if argv else 3
    cluster = KafkaCluster(size=size)
    print(f"== starting a {size}-node Kafka cluster (KRaft) in {cluster.work_dir}", flush=True)
    try:
        cluster.start()
    except KafkaUnavailable as exc:
        print(f"cannot start Kafka here: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"bootstrap: {cluster.bootstrap}")
    print(f"agentstream URL: kafka://{cluster.bootstrap.replace(',', ';')}")
    for kind in ("ssl", "sasl_plaintext", "sasl_ssl"):
        print(f"{kind}: {cluster.listener(kind)}")
    print(f"test CA: {cluster.certs['ca']}  logs: {cluster.work_dir}/node*/broker.log")
    if state is not None:
        import json

        from .shared import info_of

        state.write_text(json.dumps(info_of(cluster).state()))
        print(f"state file: {state} (AGENTSTREAM_TEST_KAFKA_STATE={state} points the tests at this cluster)")
    print("Ctrl-C stops the cluster and removes its files", flush=True)
    try:
        while all(n.running for n in cluster.nodes):
            time.sleep(1)
        print("a Kafka node exited; stopping the cluster", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
