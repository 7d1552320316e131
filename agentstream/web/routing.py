"""``@app.table_route`` at request time: run the page handler on the worker owning the key's
partition, else forward the request (same method, path, query and body) to the owner learned in
the last rebalance, through the one forwarder (:mod:`agentstream.web.forward`). The declaration
(:mod:`agentstream.routes`) only says where the key is; views call :func:`routed` when they
dispatch to a marked handler, so the App never imports the web layer."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..routes import TableRoute
from ..tables.query import encode_key, key_partition
from ..tables.table import Table
from ..transport.partitioner import default_partition
from .forward import RETRY_AFTER, forwarded_by, valid_owner
from .responses import error_response

if TYPE_CHECKING:
    from .server_types import WebT as Web  # server.py imports this module

log = logging.getLogger("agentstream.web")

__all__ = ["routed", "route_partition"]


def route_partition(route: TableRoute, key: Any) -> int:
    """The partition of ``key`` in the route's table (its key codec and partitioner) or topic."""
    source = route.source
    if not isinstance(source, Table) and isinstance(getattr(source, "table", None), Table):
        source = source.table  # a WindowedTable: its keys are the table's
    if isinstance(source, Table):
        return key_partition(source, encode_key(source, key))
    raw = source.key_codec.dumps(key)
    return default_partition(raw if raw is not None else b"", source.partitions)


def _ready_here(route: TableRoute, partition: int) -> bool:
    """The route's table partition is open and active here (restored); True for a topic route."""
    source = route.source
    if not isinstance(source, Table) and isinstance(getattr(source, "table", None), Table):
        source = source.table
    if not isinstance(source, Table):
        return True
    part = source.parts.get(partition)
    return part is not None and part.active


def _key(route: TableRoute, request: web.Request) -> Any:
    if route.exact_key is not None:
        return route.exact_key
    if route.match_info is not None:
        return request.match_info[route.match_info]
    assert route.query_param is not None
    return request.query.get(route.query_param)


async def routed(server: Web, route: TableRoute, request: web.Request, handle: Callable[[], Awaitable[Any]]) -> Any:
    """``handle()`` here when this worker owns the key's partition and has it restored (or the
    table is global), else the owner's answer; a 503 to retry while ownership is moving."""
    key = _key(route, request)
    if key is None:
        return error_response(400, f"missing query parameter {route.query_param!r}", f"pass ?{route.query_param}=<key>")
    name = getattr(route.source, "name", "?")
    try:
        p = route_partition(route, key)
    except Exception as exc:
        return error_response(
            400, f"key {key!r} cannot be encoded for {name!r}: {exc}", "pass a key the table's key type accepts"
        )
    assignment = server.assignment()
    if getattr(route.source, "is_global", False):
        return await handle()
    if p in assignment.active:
        if _ready_here(route, p):
            return await handle()
        return error_response(  # a restoring partition would answer a stale value or the default
            503,
            f"{name!r} partition {p} is still restoring on this worker",
            "retry after the Retry-After seconds",
            headers=RETRY_AFTER,
            partition=p,
        )
    sender = forwarded_by(request)
    if sender:  # the sender thinks we own it, we do not: ownership is moving. Never forward twice,
        # never answer from a partition we do not own (the default, or a standby's stale value)
        return error_response(
            503,
            f"{name!r} partition {p} is not on this worker (forwarded by {sender}); the group is rebalancing",
            "retry after the Retry-After seconds",
            headers=RETRY_AFTER,
            partition=p,
        )
    owner = valid_owner(assignment.owners.get(p))
    if owner is None or owner == server.address:
        if assignment.owners.get(p) and owner is None:
            log.warning(
                "not forwarding to %r (owner of %s[%d] in the group metadata): not a host:port",
                assignment.owners.get(p),
                name,
                p,
            )
        return error_response(
            503,
            f"the owner of {name!r} partition {p} is unknown (no assignment yet, or the group is rebalancing)",
            "retry in a second",
            headers=RETRY_AFTER,
            partition=p,
        )
    return await server.forwarder.forward(request, owner, f"{name!r} partition {p}")
