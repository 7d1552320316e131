"""Kafka's default partitioner: the same partition as the Java client and aiokafka for any key."""

from __future__ import annotations

import random

from aiokafka.partitioner import murmur2 as aiokafka_murmur2  # type: ignore[import-untyped,unused-ignore]

from agentstream.transport.partitioner import default_partition, murmur2


def test_murmur2_matches_aiokafka_for_every_length() -> None:
    rnd = random.Random(7)
    for length in [*range(0, 33), 64, 255, 1000]:
        for _ in range(40):
            data = bytes(rnd.randrange(256) for _ in range(length))
            assert murmur2(data) == aiokafka_murmur2(data), (length, data)


def test_murmur2_known_java_value() -> None:
    # org.apache.kafka.common.utils.UtilsTest: murmur2("21".getBytes()) == -973932308
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF


def test_default_partition_is_positive_modulo() -> None:
    for key in (b"", b"a", b"word", b"k0000042", "über".encode()):
        expected = (aiokafka_murmur2(key) & 0x7FFFFFFF) % 7
        assert default_partition(key, 7) == expected
