"""In-process scenarios that need the real broker (its URL in ``$COMPAT_BROKER``): the broker from
Faust's ``BROKER_URL`` environment variable, and client-only mode (``app.start_client()``)."""

from __future__ import annotations

import os
from typing import Any

import faust

from .. import kit
from ..registry import scenario


@scenario("The broker URL comes from Faust's environment variable BROKER_URL", broker=True)
async def broker_url_from_environment() -> Any:
    name = f"compat-envbroker-{kit.FRAMEWORK}"
    os.environ["BROKER_URL"] = os.environ["COMPAT_BROKER"]
    try:
        app = faust.App(name)  # no broker= : Faust takes BROKER_URL
        topic = app.topic(name, value_type=str)
        try:
            await topic.send(key="k", value="via BROKER_URL")
        finally:
            await kit.stop_clients(app)
    finally:
        del os.environ["BROKER_URL"]
    return await kit.read_broker_topic(name)


@scenario("Client-only mode: app.start_client() then send, without a worker", broker=True)
async def client_only_mode() -> Any:
    name = f"compat-client-{kit.FRAMEWORK}"
    app = faust.App(name, broker=os.environ["COMPAT_BROKER"])
    topic = app.topic(name, value_type=str)
    await app.start_client()
    try:
        await topic.send(key="k", value="from a client")
    finally:
        await app.stop()
    return await kit.read_broker_topic(name)
