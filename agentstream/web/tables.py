"""Interactive queries: read a table key from whichever worker owns its partition.

A key lives in partition ``murmur2(key bytes) % partitions`` (Kafka's default partitioner, with
the table's key codec), exactly where a key-partitioned stream writes it. The owner serves it
from its local store; any other worker forwards the request to the owner it learned from the
last rebalance (through :mod:`agentstream.web.forward`, as ``@app.table_route`` pages do) or
answers 307 to it, so a client can ask any worker. Tables are read through their public face
(:mod:`agentstream.tables.query`), never their partitions' caches or stores.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web
from yarl import URL

from ..exceptions import StoreError
from ..tables import query
from ..transport.partitioner import default_partition
from .forward import RETRY_AFTER, forwarded_by, valid_owner
from .responses import error_response, json_response

if TYPE_CHECKING:
    from ..tables.table import Table
    from .server_types import WebT as Web  # server.py imports this module

log = logging.getLogger("agentstream.web")

__all__ = ["TableViews", "FaustTableViews", "parse_key", "MAX_KEY_BYTES"]

MAX_KEY_BYTES = 1024
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_EPOCH_SECONDS = 253402300799.0  # 9999-12-31T23:59:59Z: later "window" times are not timestamps


def parse_key(text: str) -> Any:
    """The URL's key: JSON when it parses (``"abc"``, ``42``), else the text itself."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _window_json(table: Table) -> dict[str, Any] | None:
    info = query.window_info(table)
    if info is None:
        return None
    if info.gap is not None:  # session windows
        return {
            "kind": info.kind,
            "gap": info.gap,
            "grace": info.grace,
            "late_dropped": table._windowed.late_dropped,
        }
    return {"kind": info.kind, "size": info.size, "step": info.step, "expires": info.expires, "grace": info.grace}


class TableViews:
    """``/tables``, ``/tables/<table>`` and ``/tables/<table>/<key>``."""

    def __init__(self, server: Web) -> None:
        self.server = server
        self.app = server.app

    def _tables(self) -> dict[str, Table]:
        return self.app.tables

    def _unknown_table(self, name: str) -> web.Response:
        tables = sorted(self._tables())
        return error_response(
            404, f"no table named {name!r}", "use one of the listed tables (GET /tables)", tables=tables
        )

    # -- GET /tables -----------------------------------------------------------------------------
    async def list_tables(self, request: web.Request) -> web.Response:
        out = []
        for name, table in sorted(self._tables().items()):
            local = query.local_partitions(table)
            out.append(
                {
                    "name": name,
                    "kind": type(table).__name__,
                    "partitions": table.partitions,
                    "changelog": table.changelog_topic.name,
                    "store": table.store_url or self.app.settings.store,
                    "windowed": _window_json(table),
                    "local_partitions": [part.partition for part in local],
                    "standby_partitions": query.standby_partitions(table),
                    "local_keys": sum(query.key_count(part) for part in local),
                    "help": table.help,
                }
            )
        return json_response({"tables": out})

    # -- GET /tables/<table> -----------------------------------------------------------------------
    async def list_keys(self, request: web.Request) -> web.Response:
        name = request.match_info["table"]
        table = self._tables().get(name)
        if table is None:
            return self._unknown_table(name)
        try:
            offset = int(request.query.get("offset", "0"))
            limit = int(request.query.get("limit", str(DEFAULT_LIMIT)))
        except ValueError:
            return error_response(
                400, "offset and limit must be integers", f"e.g. /tables/{name}?offset=0&limit={DEFAULT_LIMIT}"
            )
        if offset < 0 or not 1 <= limit <= MAX_LIMIT:
            return error_response(
                400, f"bad page offset={offset} limit={limit}", f"offset >= 0 and 1 <= limit <= {MAX_LIMIT}"
            )
        parts = query.local_partitions(table)

        def entries() -> Iterator[tuple[int, bytes, Any, bool]]:
            for part in parts:
                for k, v, decoded in query.live_entries(part):
                    yield part.partition, k, v, decoded

        # Page through the stores in slices: a deep offset over a large table costs time, but
        # never holds the event loop for more than a few milliseconds at once.
        items: list[dict[str, Any]] = []
        seen = 0
        more = False
        try:
            async for p, k, v, decoded in query.sliced(entries()):
                seen += 1
                if seen <= offset:
                    continue
                if len(items) >= limit:
                    more = True
                    break
                item: dict[str, Any] = {"partition": p}
                try:
                    key, window, value = query.decode_entry(table, k, v, decoded)
                    item["key"] = key
                    if window is not None:
                        item["window"] = list(window)
                    item["value"] = value
                except Exception as exc:  # one undecodable entry must not fail the whole page
                    item["key"] = k.decode("utf-8", "backslashreplace")
                    item["error"] = f"cannot decode: {type(exc).__name__}"
                items.append(item)
        except StoreError as exc:
            return error_response(
                503,
                f"table {name!r} changed while listing ({exc.problem})",
                "retry after the Retry-After seconds",
                headers=RETRY_AFTER,
            )
        end = offset + len(items)
        return json_response(
            {
                "table": name,
                "offset": offset,
                "limit": limit,
                "total": max(sum(query.key_count(part) for part in parts), end + int(more)),
                "next_offset": end if more else None,
                "partitions": [part.partition for part in parts],
                "restoring": [part.partition for part in parts if not part.ready],
                "served_by": self.server.address,
                "items": items,
            }
        )

    # -- GET /tables/<table>/<key> --------------------------------------------------------------------
    def candidates(self, table: Table, key: Any, kb: bytes) -> list[int]:
        """Partitions the key may live in, most likely first.

        First the table's own key codec (what ``table[key]`` outside an agent uses). A table is
        written in the partition of the record being handled, so it is partitioned like the
        stream that updates it; when that stream's key codec differs (a ``key_type=str`` topic
        sends raw UTF-8, the table's default codec is JSON) the key is in the partition of the
        topic's encoding. Those come next: every co-partitioned topic's key codec.
        """
        out = [query.key_partition(table, kb)]
        if table.is_global:
            return out
        plain = default_partition(kb, table.partitions)  # differs in Faust's format (keys hashed as text)
        if plain not in out:
            out.append(plain)
        changelogs = {t.changelog_topic.name for t in self.app.tables.values()}
        seen: list[Any] = [table.key_codec]
        for topic in self.app.topics.values():
            codec = topic.key_codec
            if topic.name in changelogs or topic.partitions != table.partitions or any(c is codec for c in seen):
                continue
            seen.append(codec)
            try:
                raw = codec.dumps(key)
            except Exception:
                continue  # this topic could not carry such a key
            if raw is not None:
                p = default_partition(raw, table.partitions)
                if p not in out:
                    out.append(p)
        return out

    async def get_value(self, request: web.Request) -> web.StreamResponse:
        name, text = request.match_info["table"], request.match_info["key"]
        table = self._tables().get(name)
        if table is None:
            return self._unknown_table(name)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
            return error_response(
                400,
                f"key is longer than {MAX_KEY_BYTES} bytes",
                "table keys in URLs are limited to 1 KiB; use a shorter key",
            )
        key = parse_key(text)
        try:
            kb = query.encode_key(table, key)
        except Exception as exc:
            return error_response(
                400,
                f"key {text!r} (parsed as {type(key).__name__}) cannot be encoded with the table's key codec: {exc}",
                'keys are JSON when they parse ("abc", 42), else plain text; pass a key the table\'s key type accepts',
            )
        window = request.query.get("window")
        if query.window_info(table) is None:
            if window is not None:
                return error_response(
                    400,
                    f"table {name!r} is not windowed; ?window= does not apply",
                    f"drop the window parameter: /tables/{name}/{text}",
                )
        else:
            window = window or "current"
            if window not in ("current", "now"):
                try:
                    at = float(window)
                except ValueError:
                    at = float("nan")
                if not 0 <= at <= MAX_EPOCH_SECONDS:
                    return error_response(
                        400,
                        f"bad window {window!r}",
                        "use ?window=current (the partition's stream time), ?window=now "
                        f"(wall clock) or ?window=<epoch seconds in 0..{MAX_EPOCH_SECONDS:.0f}>",
                    )
        explicit = request.query.get("partition")
        if explicit is None:
            candidates = self.candidates(table, key, kb)
        else:
            try:
                candidates = [int(x) for x in explicit.split(",") if x.strip()]
            except ValueError:
                candidates = []
            if not candidates or not all(0 <= p < table.partitions for p in candidates):
                return error_response(
                    400,
                    f"bad partition list {explicit!r}",
                    f"?partition= takes comma-separated numbers in 0..{table.partitions - 1}",
                )
        try:
            hops = int(request.query.get("hops", "0"))
        except ValueError:
            return error_response(400, "hops must be an integer", "leave hops out; redirects set it")
        return await self._lookup(request, table, key, kb, window, candidates, hops)

    async def _lookup(
        self,
        request: web.Request,
        table: Table,
        key: Any,
        kb: bytes,
        window: str | None,
        candidates: list[int],
        hops: int,
        native: URL | None = None,
    ) -> web.StreamResponse:
        """Check the candidate partitions: the local ones here first (no network), then the others
        at their owners, in candidate order. ``native``: forward to this ``/tables/...`` URL (a
        Faust-style request is looked up in agentstream's format at the owner; never redirected)."""
        assignment = self.server.assignment()
        me = self.server.address
        sender = forwarded_by(request)
        redirect = native is None and (
            self.server.redirect or request.query.get("redirect", "").lower() in ("1", "true", "yes")
        )
        unavailable: web.Response | None = None
        local = [p for p in candidates if table.is_global or p in assignment.active]
        for p in local:
            found = self._local(request, table, key, kb, window, p)
            if found is None:
                continue
            if found.status == 503:
                unavailable = unavailable or found
                continue
            return found
        remaining = [p for p in candidates if p not in local]
        while remaining:
            p = remaining[0]
            owner = valid_owner(assignment.owners.get(p))
            if assignment.owners.get(p) and owner is None:
                log.warning(
                    "not forwarding to %r (owner of %s[%d] in the group metadata): not a host:port",
                    assignment.owners.get(p),
                    table.name,
                    p,
                )
            if sender or not owner or owner == me:
                remaining.pop(0)
                if sender:  # the sender thinks we own it: ownership is moving. Never forward twice.
                    error = (
                        f"partition {p} of table {table.name!r} is not on this worker (forwarded by "
                        f"{sender}); the group is rebalancing"
                    )
                else:
                    error = (
                        f"the owner of table {table.name!r} partition {p} is unknown (no assignment yet, "
                        "or the group is rebalancing)"
                    )
                unavailable = unavailable or error_response(
                    503,
                    error,
                    "retry after the Retry-After seconds; GET /metadata shows the partition owners",
                    headers=RETRY_AFTER,
                    partition=p,
                    owner=owner,
                )
                continue
            if redirect:
                if hops > len(candidates):
                    return error_response(
                        503,
                        f"too many redirects looking up {key!r} (partition owners are changing)",
                        "retry after the Retry-After seconds",
                        headers=RETRY_AFTER,
                    )
                url = request.rel_url.update_query(partition=",".join(map(str, remaining)), hops=str(hops + 1))
                raise web.HTTPTemporaryRedirect(f"{self.server.scheme}://{owner}{url.raw_path_qs}")
            group = [q for q in remaining if assignment.owners.get(q) == owner]
            remaining = [q for q in remaining if q not in group]
            resp = await self._forward(request, table, owner, group, native)
            if resp.status == 404:
                continue
            if resp.status >= 500:
                unavailable = unavailable or resp
                continue
            return resp
        if unavailable is not None:
            return unavailable
        raw = request.match_info["key"]
        hint = "the key has no value in this table" + ("" if window is None else " for that window")
        if not isinstance(key, str):
            hint += f'; the key was read as JSON ({type(key).__name__}): to look up the string, quote it: "{raw}"'
        return error_response(
            404,
            f"key {key!r} not found in table {table.name!r}",
            hint,
            table=table.name,
            key=key,
            partitions=candidates,
            served_by=me,
        )

    def _local(
        self, request: web.Request, table: Table, key: Any, kb: bytes, window: str | None, partition: int
    ) -> web.Response | None:
        """The value in a local partition; None when it is not there; 503 while restoring."""
        part = table.parts.get(partition)
        if part is None or not part.ready:
            return error_response(
                503,
                f"table {table.name!r} partition {partition} is "
                + ("still restoring from its changelog" if part is not None else "not open yet (rebalancing)"),
                "retry after the Retry-After seconds",
                headers=RETRY_AFTER,
                partition=partition,
            )
        body: dict[str, Any] = {
            "table": table.name,
            "key": key,
            "partition": partition,
            "served_by": self.server.address,
        }
        if window is not None and query.is_session(table):
            return self._local_sessions(table, kb, window, part, body)
        found_window: tuple[float, float] | None = None
        if window is not None:
            if window == "current":
                stream_time = query.stream_time(table, part)
                if stream_time is None:
                    return None  # nothing counted in this partition yet
                at = stream_time
            else:
                at = time.time() if window == "now" else float(window)
            try:
                if not 0 <= at <= MAX_EPOCH_SECONDS:
                    raise ValueError(f"time {at!r} is outside 0..{MAX_EPOCH_SECONDS:.0f}")
                found_window = query.window_at(table, at)
            except (ValueError, OverflowError) as exc:
                return error_response(
                    409 if window == "current" else 400,
                    f"no window of table {table.name!r} at {window} ({at!r} s): {exc}",
                    "ask for an explicit ?window=<epoch seconds>",
                    partition=partition,
                )
            body["window"] = list(found_window)
        found, value = query.get(table, part, kb, found_window)
        if not found:
            return None
        body["value"] = value
        return json_response(body)

    @staticmethod
    def _local_sessions(table: Table, kb: bytes, window: str, part: Any, body: dict[str, Any]) -> web.Response | None:
        """A session table's key: every live session of it (``sessions``), and as ``window`` and
        ``value`` the latest (``?window=current``, the default) or the one containing the time
        ``?window=<epoch seconds>`` (``now``: the wall clock); None when there is none."""
        found = query.sessions(table, part, kb)
        if window == "current":
            chosen = max(found) if found else None
        else:
            at = time.time() if window == "now" else float(window)
            chosen = next((w for w in found if w[0] <= at <= w[1]), None)
        if chosen is None:
            return None
        body["window"] = list(chosen)
        body["value"] = found[chosen]
        body["sessions"] = [{"window": list(w), "value": v} for w, v in found.items()]
        return json_response(body)

    async def _forward(
        self, request: web.Request, table: Table, owner: str, partitions: list[int], native: URL | None = None
    ) -> web.Response:
        """Ask ``owner`` for the key in ``partitions`` (it checks only those, and never forwards)."""
        url = (native or request.rel_url).update_query(partition=",".join(map(str, partitions)))
        if "redirect" in url.query:
            url = url.without_query_params("redirect")
        return await self.server.forwarder.forward(
            request,
            owner,
            f"table {table.name!r} partitions {partitions}",
            url=url,
            method="GET",  # a HEAD answer has no body to check; the server drops the body for HEAD
            json_only=True,
            partitions=partitions,
        )


class FaustTableViews:
    """Faust's built-in table views (``faust.web.apps.tables``), in Faust's answers:
    ``GET /table/`` lists ``[{"name", "help"}]``, ``/table/<name>/`` gives one, and
    ``/table/<name>/<key>/`` gives the key's value as JSON, looked up at the partition's owner
    (the default of a table with one when the key is absent; 404 ``{"error": "key not found"}``
    otherwise). The key is the URL text, as in Faust (parsed as JSON for a table whose
    ``key_type`` is not str). Unlike Faust, a table of sets answers its members as a list."""

    def __init__(self, views: TableViews) -> None:
        self.views = views
        self.app = views.app

    def _table(self, name: str) -> Table | None:
        return self.app.tables.get(name)

    @staticmethod
    def _info(table: Table) -> dict[str, Any]:
        return {"name": table.name, "help": table.help}

    async def list(self, request: web.Request) -> web.Response:
        return json_response([self._info(t) for t in self.app.tables.values()])

    async def detail(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        table = self._table(name)
        if table is None:
            return json_response({"error": "unknown table", "name": name}, status=404)
        return json_response(self._info(table))

    async def key_detail(self, request: web.Request) -> web.StreamResponse:
        name, text = request.match_info["name"], request.match_info["key"]
        table = self._table(name)
        if table is None:
            return json_response({"error": "unknown table", "name": name}, status=404)
        key: Any = text if table.key_type in (None, str) else parse_key(text)
        try:
            kb = query.encode_key(table, key)
        except Exception as exc:
            return error_response(
                400,
                f"key {text!r} cannot be encoded with the table's key codec: {exc}",
                "pass a key of the table's key type",
            )
        window = None if query.window_info(table) is None else "current"
        native = URL.build(path=f"/tables/{name}/{orjson.dumps(key).decode()}")
        views = self.views
        found = await views._lookup(request, table, key, kb, window, views.candidates(table, key, kb), 0, native)
        if found.status == 200 and isinstance(found, web.Response) and found.body is not None:
            body = orjson.loads(found.body)  # type: ignore[arg-type]  # json_response bodies are bytes
            return json_response(body.get("value"))
        if found.status == 404:
            if table.default is not None:
                return json_response(_plain(table.default()))
            return json_response({"error": "key not found", "key": key, "table": name}, status=404)
        return found


def _plain(value: Any) -> Any:
    return sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
