"""``@app.table_route`` at request time: run the view on the worker owning the key's table partition,
else forward the request (same method, path, query and body) to the owner learned in the last
rebalance. The decorator (:func:`agentstream.faust_compat.table_route`) only says where the key is;
the web server calls this, so the App never imports the web layer."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import aiohttp
from aiohttp import web

from .responses import error_response
from .tables import key_partition

__all__ = ["ROUTED_HEADER", "route_to_owner"]

ROUTED_HEADER = "X-Agentstream-Routed-By"


async def route_to_owner(server: Any, table: Any, where: tuple[str | None, str | None, str | None],
                         fun: Callable[..., Any], view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
    """``where``: (exact_key, match_info, query_param) as given to ``table_route``."""
    exact_key, match_info, param = where
    if exact_key is not None:
        key: Any = exact_key
    elif match_info is not None:
        key = request.match_info[match_info]
    else:
        assert param is not None
        if param not in request.query:
            return error_response(400, f"missing query parameter {param!r}", f"pass ?{param}=<key>")
        key = request.query[param]
    dumps = getattr(table, "_key_dumps", None) or table.key_codec.dumps  # a table or (topic_route) a topic
    p = key_partition(table, dumps(key))
    assignment = server.assignment()
    if getattr(table, "is_global", False) or p in assignment.active or request.headers.get(ROUTED_HEADER):
        return await fun(view, request, *args, **kwargs)
    owner = assignment.owners.get(p)
    if not owner or owner == server.address:
        return error_response(503, f"the owner of table {table.name!r} partition {p} is unknown "
                              "(no assignment yet, or the group is rebalancing)", "retry in a second",
                              headers={"Retry-After": "1"})
    return await _forward(request, owner, server.address, web)


async def _forward(request: Any, owner: str, me: str, web: Any) -> Any:
    body = await request.read()
    headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
    headers[ROUTED_HEADER] = me
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
            async with session.request(request.method, f"http://{owner}{request.rel_url.raw_path_qs}",
                                       data=body or None, headers=headers, allow_redirects=False) as resp:
                data = await resp.read()
                return web.Response(body=data, status=resp.status,
                                    headers={"Content-Type": resp.headers.get("Content-Type", "application/json"),
                                             "X-Agentstream-Served-By": owner})
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        return error_response(503, f"forwarding to the key's owner {owner} failed: {type(exc).__name__}: {exc}",
                              "retry later; the group rebalances when a worker dies", headers={"Retry-After": "1"})
