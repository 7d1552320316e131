"""``@app.table_route`` / ``@app.topic_route``: the declaration side of a route to the worker that
owns a key's partition (the web server does the forwarding, :mod:`agentstream.web.routing`).

Everything else that was here moved: Faust's argument translation to :mod:`agentstream.faust_args`,
the crontab/leader/service runners to :mod:`agentstream.background`, Faust's Worker, serializers
and ``uuid`` to the :mod:`agentstream.faust` compat package. ``table_route`` stays here until it
becomes a core feature with its one owner-forwarding helper in ``web/``; then this module goes.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from .exceptions import TopologyError

__all__ = ["table_route"]


# -- table_route ---------------------------------------------------------------------------------------------------
def table_route(table: Any, shard_param: str | None = None, *, query_param: str | None = None,
                match_info: str | None = None, exact_key: str | None = None) -> Callable[[Any], Any]:
    """Faust's ``@app.table_route``: run the view on the worker owning the key's table partition.

    The key comes from the URL (``match_info``), the query string (``query_param``/``shard_param``)
    or is ``exact_key``; a worker that does not own its partition forwards the request (same
    method, path, query and body) to the owner it learned in the last rebalance.
    """
    param = query_param or shard_param
    if exact_key is None and match_info is None and param is None:
        raise TopologyError("table_route needs match_info=, query_param= (or shard_param=) or exact_key=")

    def _decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fun)
        async def route(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            # The web server calling this view does the routing (agentstream.web.routing): the web
            # layer sits above the App that declares the route.
            return await view.web.route_to_owner(table, (exact_key, match_info, param), fun, view, request,
                                                 *args, **kwargs)

        return route

    return _decorate
