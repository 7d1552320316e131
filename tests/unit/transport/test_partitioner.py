"""Kafka's default partitioner: the same partition as the Java client and aiokafka for any key,
with the C hash (``murmurhash2``) and with the pure-Python fallback."""

from __future__ import annotations

import builtins
import importlib
import random
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from aiokafka.partitioner import murmur2 as aiokafka_murmur2  # type: ignore[import-untyped,unused-ignore]
from hypothesis import given
from hypothesis import strategies as st

from agentstream.transport import partitioner
from agentstream.transport.partitioner import C_HASH, default_partition, murmur2, murmur2_python

# org.apache.kafka.common.utils.UtilsTest: murmur2("21".getBytes()) == -973932308, and more.
JAVA_VALUES = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


def test_the_c_hash_is_in_use() -> None:
    """murmurhash2 is a dependency: a broken install must not silently cost 0.6 us per key."""
    assert C_HASH


@pytest.mark.parametrize("fn", [murmur2, murmur2_python], ids=["c", "python"])
def test_known_java_values(fn: Any) -> None:
    for data, signed in JAVA_VALUES.items():
        assert fn(data) == signed & 0xFFFFFFFF, data


@pytest.mark.parametrize("fn", [murmur2, murmur2_python], ids=["c", "python"])
def test_matches_aiokafka_for_every_length(fn: Any) -> None:
    rnd = random.Random(7)
    for length in [*range(0, 33), 64, 255, 1000]:
        for _ in range(40):
            data = bytes(rnd.randrange(256) for _ in range(length))
            assert fn(data) == aiokafka_murmur2(data), (length, data)


@given(st.binary(max_size=300))
def test_c_and_python_agree(data: bytes) -> None:
    assert murmur2(data) == murmur2_python(data)
    assert murmur2(bytearray(data)) == murmur2_python(data)
    for n in (1, 4, 7, 100):
        assert default_partition(data, n) == (murmur2_python(data) & 0x7FFFFFFF) % n
        assert default_partition(memoryview(data), n) == default_partition(data, n)


def test_default_partition_is_positive_modulo() -> None:
    for key in (b"", b"a", b"word", b"k0000042", "über".encode()):
        expected = (aiokafka_murmur2(key) & 0x7FFFFFFF) % 7
        assert default_partition(key, 7) == expected


@pytest.fixture
def without_c_hash(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The module as imported on a platform without the murmurhash2 wheel."""
    real_import = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "murmurhash2":
            raise ImportError("no murmurhash2 here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
    monkeypatch.delitem(sys.modules, "murmurhash2", raising=False)
    try:
        yield importlib.reload(partitioner)
    finally:
        monkeypatch.undo()
        importlib.reload(partitioner)


def test_fallback_without_the_c_hash(without_c_hash: ModuleType) -> None:
    assert not without_c_hash.C_HASH
    assert without_c_hash.murmur2 is without_c_hash.murmur2_python
    for data, signed in JAVA_VALUES.items():
        assert without_c_hash.murmur2(data) == signed & 0xFFFFFFFF
        assert without_c_hash.default_partition(data, 7) == ((signed & 0xFFFFFFFF) & 0x7FFFFFFF) % 7
