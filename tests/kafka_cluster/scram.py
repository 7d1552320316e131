"""SCRAM users through Kafka's admin API (AlterUserScramCredentials, KIP-554), from Python.

aiokafka's admin client has no call for it, and Kafka's own ``kafka-configs`` costs a JVM start (15 s and more
on a loaded 2-core machine); the request is small, so the tests send it themselves. The broker stores what
the client sends: the salted password (RFC 5802 ``Hi(password, salt, iterations)``) and the salt, never the
password.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, ClassVar

from aiokafka.protocol.api import Request, RequestStruct, Response  # type: ignore[import-untyped,unused-ignore]
from aiokafka.protocol.types import (  # type: ignore[import-untyped,unused-ignore]
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

#: Kafka's mechanism numbers in the request (ScramMechanism.type)
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}


class _AlterScramResponse(Response):  # type: ignore[misc]
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(
                ("user", CompactString("utf-8")),
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _AlterScramStruct(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = _AlterScramResponse
    SCHEMA = Schema(
        (
            "deletions",
            CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("tags", TaggedFields)),
        ),
        (
            "upsertions",
            CompactArray(
                ("name", CompactString("utf-8")),
                ("mechanism", Int8),
                ("iterations", Int32),
                ("salt", CompactBytes),
                ("salted_password", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _AlterScram(Request[_AlterScramStruct]):  # type: ignore[misc]
    API_KEY: ClassVar[int] = 51

    def __init__(self, upsertions: list[tuple[Any, ...]]) -> None:
        self._upsertions = upsertions

    def build(self, request_struct_class: type[_AlterScramStruct]) -> _AlterScramStruct:
        return request_struct_class([], self._upsertions, {})


async def create_scram_user(
    bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = 4096
) -> None:
    """Create (or reset) ``user`` with ``password`` for ``mechanism`` on the cluster at ``bootstrap``."""
    from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped,unused-ignore]

    number, digest = MECHANISMS[mechanism]
    salt = os.urandom(32)
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin._send_to_controller(_AlterScram([(user, number, iterations, salt, salted, {})]))
    finally:
        await admin.close()
    for name, code, message, _ in response.results:
        if code:
            raise RuntimeError(f"AlterUserScramCredentials for {name!r} failed: error {code} ({message})")
