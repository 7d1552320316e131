"""Table routes (``@app.table_route``, ``@app.topic_route``): a page handler that must run on the
worker owning a key's partition.

Only a declaration: the decorator marks the handler with a frozen :class:`TableRoute` saying where
the key comes from and whose partitioning decides; the worker's web server reads the mark when it
dispatches a request and either runs the handler (it owns the partition) or forwards the request to
the owner (:mod:`agentstream.web.routing`). The handler itself is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .exceptions import TopologyError

__all__ = ["TableRoute", "table_route", "route_of", "mark"]

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__agentstream_table_route__"


@dataclass(frozen=True)
class TableRoute:
    """Where a routed handler's key is (exactly one of ``exact_key``, ``match_info``, ``query_param``)
    and the table (or topic) whose partition of that key decides which worker runs it."""

    source: Any  # a Table, or a Topic for topic_route
    exact_key: Any = None
    match_info: str | None = None
    query_param: str | None = None


def table_route(
    source: Any,
    shard_param: str | None = None,
    *,
    query_param: str | None = None,
    match_info: str | None = None,
    exact_key: Any = None,
) -> Callable[[F], F]:
    """Mark a page handler (a function page or a View method) as routed to the key's owner.

    The key is ``exact_key``, the URL's ``match_info`` parameter, or the query string's
    ``query_param`` (Faust's older name: ``shard_param``).
    """
    param = query_param or shard_param
    if exact_key is None and match_info is None and param is None:
        raise TopologyError("table_route needs match_info=, query_param= (or shard_param=) or exact_key=")
    route = TableRoute(source, exact_key, match_info, None if exact_key is not None or match_info else param)

    def decorate(fun: F) -> F:
        return mark(fun, route)

    return decorate


def mark(fun: F, route: TableRoute) -> F:
    """Mark ``fun`` with ``route`` (what the decorator does; also carries a mark to a wrapper)."""
    setattr(fun, _MARK, route)
    return fun


def route_of(handler: Any) -> TableRoute | None:
    """The route a handler was marked with (a bound method answers for its function), else None."""
    route = getattr(handler, _MARK, None)
    return route if isinstance(route, TableRoute) else None
