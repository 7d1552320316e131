"""Interactive queries: read a table key from whichever worker owns its partition.

A key lives in partition ``murmur2(key bytes) % partitions`` (Kafka's default partitioner, with
the table's key codec), exactly where a key-partitioned stream writes it. The owner serves it
from its local store; any other worker forwards the request to the owner it learned from the
last rebalance (or answers 307 to it), so a client can ask any worker.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import struct
import time
import weakref
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterable, Iterator, TypeVar

import aiohttp
import orjson
from aiohttp import web

from ..exceptions import StoreError
from ..tables.windows import parse_window_key, window_key
from ..transport.partitioner import default_partition
from .responses import error_response, json_response

if TYPE_CHECKING:
    from ..tables.table import Table, TablePartition
    from .server_types import WebT as Web  # server.py imports this module

log = logging.getLogger("agentstream.web")

__all__ = ["TableViews", "parse_key", "key_partition", "part_size", "MAX_KEY_BYTES"]

MAX_KEY_BYTES = 1024
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
FORWARDED_HEADER = "X-Agentstream-Forwarded-By"
RETRY_AFTER = {"Retry-After": "1"}
_STREAM_TIME_KEY = b"\xff\xff\xff\xffagentstream.stream-time"  # windowed.STREAM_TIME_KEY (never a window key)
MAX_EPOCH_SECONDS = 253402300799.0  # 9999-12-31T23:59:59Z: later "window" times are not timestamps
MAX_FORWARDED_BYTES = 4 * 1024 * 1024
SLICE_SECONDS = 0.002  # a scan gives the loop back after this long
_HOST_LABELS = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$")
T = TypeVar("T")


def valid_owner(address: object) -> str | None:
    """``host:port`` when ``address`` (from another member's group metadata) is exactly a host name,
    IPv4 or [IPv6] address and a port in 1..65535, else None. Anything else (a path, a query,
    user info, a scheme) could make this worker fetch an arbitrary URL for a client."""
    if not isinstance(address, str) or len(address) > 300:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or port != str(int(port)):
        return None
    if host.startswith("[") and host.endswith("]"):
        try:
            return address if ipaddress.ip_address(host[1:-1]).version == 6 else None
        except ValueError:
            return None
    return address if _HOST_LABELS.match(host) else None


async def sliced(items: Iterable[T], budget: float = SLICE_SECONDS) -> AsyncIterator[T]:
    """Iterate ``items``, yielding to the event loop whenever ``budget`` seconds have passed, so a
    long scan never stalls processing for more than a couple of milliseconds."""
    clock = time.perf_counter
    deadline = clock() + budget
    n = 0
    for item in items:
        yield item
        n += 1
        if n & 63 == 0 and clock() >= deadline:
            await asyncio.sleep(0)
            deadline = clock() + budget


def parse_key(text: str) -> Any:
    """The URL's key: JSON when it parses (``"abc"``, ``42``), else the text itself."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def key_partition(table: "Table", key_bytes: bytes) -> int:
    """The table partition a key belongs to (the default partitioner, like a keyed send)."""
    return default_partition(key_bytes, table.partitions)


def _overlay(part: "TablePartition") -> dict[bytes, tuple[Any, bool]]:
    """Unwritten changes of a partition: key -> (value or raw bytes or None=deleted, decoded?)."""
    overlay: dict[bytes, tuple[Any, bool]] = {k: (raw, False) for k, raw in part.pending.items()}
    for _, k, v in part.cache.entries():
        overlay[k] = (v, True)
    return overlay


def part_entries(part: "TablePartition") -> Iterator[tuple[bytes, Any, bool]]:
    """``(key bytes, value, decoded)`` of every live entry: cache over pending writes over the store."""
    overlay = _overlay(part)
    for k, raw in part.store.items():
        if k not in overlay:
            yield k, raw, False
    for k, (v, decoded) in overlay.items():
        if v is not None:
            yield k, v, decoded


COUNT_INTERVAL = 10.0  # a changing partition is recounted at most this often
_counts: "weakref.WeakKeyDictionary[Any, tuple[Any, int, float]]" = weakref.WeakKeyDictionary()  # store -> (version, n, when)


def _version(part: "TablePartition") -> Any:
    """Changes when the partition's contents may have changed (changelog position, unflushed writes)."""
    return (part.changelog_offset, len(part.pending), len(part.cache))


def part_size(part: "TablePartition") -> int:
    """Keys in a partition, including unwritten changes, without scanning (never blocks).

    Memory stores count exactly. RocksDB's own count is an estimate that counts overwritten keys
    again, so persistent partitions report the last exact count taken by :func:`refresh_count`
    (the status sampler keeps it current by scanning in slices, only after the partition
    changed), falling back to the estimate until the first count is done.
    """
    store = part.store
    if getattr(store, "persistent", False):
        try:
            cached = _counts.get(store)
        except TypeError:
            cached = None
        if cached is not None:
            return cached[1]
    return _estimate(part)


def _estimate(part: "TablePartition") -> int:
    store = part.store
    n = len(store)
    for k, (v, _) in _overlay(part).items():
        in_store = k in store
        if v is not None and not in_store:
            n += 1
        elif v is None and in_store:
            n -= 1
    if part.table._windowed is not None and part.get_bytes(_STREAM_TIME_KEY)[0]:
        n -= 1
    return max(n, 0)


async def refresh_count(part: "TablePartition") -> None:
    """Count a persistent partition's keys exactly, in slices, if it changed since the last count."""
    store = part.store
    if not getattr(store, "persistent", False):
        return
    version = _version(part)
    try:
        cached = _counts.get(store)
    except TypeError:
        return
    if cached is not None and (cached[0] == version or time.monotonic() - cached[2] < COUNT_INTERVAL):
        return
    n = 0
    try:
        async for k, _, _ in sliced(part_entries(part)):
            if k != _STREAM_TIME_KEY:
                n += 1
    except StoreError:
        return  # closed or wiped mid-count (rebalance): count again next time
    _counts[store] = (version, n, time.monotonic())


def _window_info(table: "Table") -> dict[str, Any] | None:
    state = table._windowed
    if state is None:
        return None
    w = state.window
    kind = "tumbling" if w.step == w.size else "hopping"
    return {"kind": kind, "size": w.size, "step": w.step, "expires": w.expires, "grace": state.grace}


class TableViews:
    """``/tables``, ``/tables/<table>`` and ``/tables/<table>/<key>``."""

    def __init__(self, server: "Web") -> None:
        self.server = server
        self.app = server.app
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _tables(self) -> dict[str, "Table"]:
        return self.app.tables

    def _unknown_table(self, name: str) -> web.Response:
        tables = sorted(self._tables())
        return error_response(404, f"no table named {name!r}", "use one of the listed tables (GET /tables)",
                              tables=tables)

    # -- GET /tables -----------------------------------------------------------------------------
    async def list_tables(self, request: web.Request) -> web.Response:
        out = []
        for name, table in sorted(self._tables().items()):
            local = sorted(p for p, part in table.parts.items() if part.active or table.is_global)
            out.append({
                "name": name,
                "kind": type(table).__name__,
                "partitions": table.partitions,
                "changelog": table.changelog_topic.name,
                "store": table.store_url or self.app.settings.store,
                "windowed": _window_info(table),
                "local_partitions": local,
                "standby_partitions": sorted(p for p, part in table.parts.items() if not part.active),
                "local_keys": sum(part_size(table.parts[p]) for p in local if p in table.parts),
                "help": table.help,
            })
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
            return error_response(400, "offset and limit must be integers",
                                  f"e.g. /tables/{name}?offset=0&limit={DEFAULT_LIMIT}")
        if offset < 0 or not 1 <= limit <= MAX_LIMIT:
            return error_response(400, f"bad page offset={offset} limit={limit}",
                                  f"offset >= 0 and 1 <= limit <= {MAX_LIMIT}")
        parts = [table.parts[p] for p in sorted(table.parts) if table.parts[p].active or table.is_global]
        windowed = table._windowed is not None
        kloads, vloads = table.key_codec.loads, table.value_codec.loads

        def entries() -> Iterator[tuple[int, bytes, Any, bool]]:
            for part in parts:
                for k, v, decoded in part_entries(part):
                    if k != _STREAM_TIME_KEY:
                        yield part.partition, k, v, decoded

        # Page through the stores in slices: a deep offset over a large table costs time, but
        # never holds the event loop for more than a few milliseconds at once.
        items: list[dict[str, Any]] = []
        seen = 0
        more = False
        try:
            async for p, k, v, decoded in sliced(entries()):
                seen += 1
                if seen <= offset:
                    continue
                if len(items) >= limit:
                    more = True
                    break
                item: dict[str, Any] = {"partition": p}
                try:
                    if windowed:
                        kb, start = parse_window_key(k)
                        item["key"] = kloads(kb)
                        item["window"] = list(table._windowed.window_range(start))
                    else:
                        item["key"] = kloads(k)
                    item["value"] = v if decoded else vloads(v)
                except Exception as exc:  # one undecodable entry must not fail the whole page
                    item["key"] = k.decode("utf-8", "backslashreplace")
                    item["error"] = f"cannot decode: {type(exc).__name__}"
                items.append(item)
        except StoreError as exc:
            return error_response(503, f"table {name!r} changed while listing ({exc.problem})",
                                  "retry after the Retry-After seconds", headers=RETRY_AFTER)
        end = offset + len(items)
        return json_response({
            "table": name,
            "offset": offset,
            "limit": limit,
            "total": max(sum(part_size(part) for part in parts), end + int(more)),
            "next_offset": end if more else None,
            "partitions": [part.partition for part in parts],
            "restoring": [part.partition for part in parts if not part.ready],
            "served_by": self.server.address,
            "items": items,
        })

    # -- GET /tables/<table>/<key> --------------------------------------------------------------------
    def candidates(self, table: "Table", key: Any, kb: bytes) -> list[int]:
        """Partitions the key may live in, most likely first.

        First the table's own key codec (what ``table[key]`` outside an agent uses). A table is
        written in the partition of the record being handled, so it is partitioned like the
        stream that updates it; when that stream's key codec differs (a ``key_type=str`` topic
        sends raw UTF-8, the table's default codec is JSON) the key is in the partition of the
        topic's encoding. Those come next: every co-partitioned topic's key codec.
        """
        out = [key_partition(table, kb)]
        if table.is_global:
            return out
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
            return error_response(400, f"key is longer than {MAX_KEY_BYTES} bytes",
                                  "table keys in URLs are limited to 1 KiB; use a shorter key")
        key = parse_key(text)
        try:
            kb = table._key_dumps(key)
        except Exception as exc:
            return error_response(400, f"key {text!r} (parsed as {type(key).__name__}) cannot be encoded with the "
                                  f"table's key codec: {exc}",
                                  'keys are JSON when they parse ("abc", 42), else plain text; '
                                  "pass a key the table's key type accepts")
        window = request.query.get("window")
        if table._windowed is None:
            if window is not None:
                return error_response(400, f"table {name!r} is not windowed; ?window= does not apply",
                                      f"drop the window parameter: /tables/{name}/{text}")
        else:
            window = window or "current"
            if window not in ("current", "now"):
                try:
                    at = float(window)
                except ValueError:
                    at = float("nan")
                if not 0 <= at <= MAX_EPOCH_SECONDS:
                    return error_response(400, f"bad window {window!r}",
                                          "use ?window=current (the partition's stream time), ?window=now "
                                          f"(wall clock) or ?window=<epoch seconds in 0..{MAX_EPOCH_SECONDS:.0f}>")
        explicit = request.query.get("partition")
        if explicit is None:
            candidates = self.candidates(table, key, kb)
        else:
            try:
                candidates = [int(x) for x in explicit.split(",") if x.strip()]
            except ValueError:
                candidates = []
            if not candidates or not all(0 <= p < table.partitions for p in candidates):
                return error_response(400, f"bad partition list {explicit!r}",
                                      f"?partition= takes comma-separated numbers in 0..{table.partitions - 1}")
        try:
            hops = int(request.query.get("hops", "0"))
        except ValueError:
            return error_response(400, "hops must be an integer", "leave hops out; redirects set it")
        return await self._lookup(request, table, key, kb, window, candidates, hops)

    async def _lookup(self, request: web.Request, table: "Table", key: Any, kb: bytes, window: str | None,
                      candidates: list[int], hops: int) -> web.StreamResponse:
        """Check the candidate partitions: the local ones here first (no network), then the others
        at their owners, in candidate order."""
        assignment = self.server.assignment()
        me = self.server.address
        forwarded_by = request.headers.get(FORWARDED_HEADER)
        redirect = self.server.redirect or request.query.get("redirect", "").lower() in ("1", "true", "yes")
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
                log.warning("not forwarding to %r (owner of %s[%d] in the group metadata): not a host:port",
                            assignment.owners.get(p), table.name, p)
            if forwarded_by or not owner or owner == me:
                remaining.pop(0)
                if forwarded_by:  # the sender thinks we own it: ownership is moving. Never forward twice.
                    error = (f"partition {p} of table {table.name!r} is not on this worker (forwarded by "
                             f"{forwarded_by}); the group is rebalancing")
                else:
                    error = (f"the owner of table {table.name!r} partition {p} is unknown (no assignment yet, "
                             "or the group is rebalancing)")
                unavailable = unavailable or error_response(
                    503, error, "retry after the Retry-After seconds; GET /metadata shows the partition owners",
                    headers=RETRY_AFTER, partition=p, owner=owner)
                continue
            if redirect:
                if hops > len(candidates):
                    return error_response(503, f"too many redirects looking up {key!r} (partition owners are changing)",
                                          "retry after the Retry-After seconds", headers=RETRY_AFTER)
                url = request.rel_url.update_query(partition=",".join(map(str, remaining)), hops=str(hops + 1))
                raise web.HTTPTemporaryRedirect(f"{self.server.scheme}://{owner}{url.raw_path_qs}")
            group = [q for q in remaining if assignment.owners.get(q) == owner]
            remaining = [q for q in remaining if q not in group]
            resp = await self._forward(request, table, owner, group)
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
        return error_response(404, f"key {key!r} not found in table {table.name!r}", hint,
                              table=table.name, key=key, partitions=candidates, served_by=me)

    def _local(self, request: web.Request, table: "Table", key: Any, kb: bytes, window: str | None,
               partition: int) -> web.Response | None:
        """The value in a local partition; None when it is not there; 503 while restoring."""
        part = table.parts.get(partition)
        if part is None or not part.ready:
            return error_response(
                503, f"table {table.name!r} partition {partition} is "
                + ("still restoring from its changelog" if part is not None else "not open yet (rebalancing)"),
                "retry after the Retry-After seconds", headers=RETRY_AFTER, partition=partition)
        body: dict[str, Any] = {"table": table.name, "key": key, "partition": partition,
                                "served_by": self.server.address}
        lookup = kb
        if window is not None:
            state = table._windowed
            if window == "current":
                stream_ms = state.windows(part).stream_ms
                if stream_ms is None:
                    return None  # nothing counted in this partition yet
                at = stream_ms / 1000
            else:
                at = time.time() if window == "now" else float(window)
            try:
                if not 0 <= at <= MAX_EPOCH_SECONDS:
                    raise ValueError(f"time {at!r} is outside 0..{MAX_EPOCH_SECONDS:.0f}")
                start, end = state.window.current(at)
                lookup = window_key(kb, start)
            except (ValueError, OverflowError, struct.error) as exc:
                return error_response(409 if window == "current" else 400,
                                      f"no window of table {table.name!r} at {window} ({at!r} s): {exc}",
                                      "ask for an explicit ?window=<epoch seconds>", partition=partition)
            body["window"] = [start, end]
        found, value = part.get_bytes(lookup)
        if not found:
            return None
        body["value"] = value
        return json_response(body)

    async def _forward(self, request: web.Request, table: "Table", owner: str,
                       partitions: list[int]) -> web.Response:
        """Ask ``owner`` for the key in ``partitions`` (it checks only those, and never forwards)."""
        url = request.rel_url.update_query(partition=",".join(map(str, partitions)))
        if "redirect" in url.query:
            url = url.without_query_params("redirect")
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.server.forward_timeout))
        headers = {FORWARDED_HEADER: self.server.address, "Accept": "application/json"}
        if self.server.token is not None:  # the owner is a worker of the same app: same token
            headers["Authorization"] = "Bearer " + self.server.token.decode()
        try:
            async with self._session.get(f"{self.server.scheme}://{owner}{url.raw_path_qs}", allow_redirects=False,
                                         headers=headers) as resp:
                body = await resp.content.read(MAX_FORWARDED_BYTES + 1)
                status = resp.status
                json_answer = resp.content_type == "application/json"
            problem = None
            if len(body) > MAX_FORWARDED_BYTES:
                problem = f"more than {MAX_FORWARDED_BYTES} bytes"
            elif not json_answer or not 200 <= status < 600 or 300 <= status < 400:
                problem = f"HTTP {status} with content type {resp.content_type!r}"
            else:
                try:
                    orjson.loads(body)
                except orjson.JSONDecodeError:
                    problem = "a body that is not JSON"
            if problem is not None:
                log.warning("owner %s of %s%s answered %s; not passed on", owner, table.name, partitions, problem)
                return error_response(502, f"the owner of table {table.name!r} partitions {partitions} ({owner}) "
                                      f"answered {problem}", "only JSON answers of workers are passed on",
                                      owner=owner)
            out_headers = {"X-Agentstream-Served-By": owner}
            if status == 503:
                out_headers.update(RETRY_AFTER)
            return web.Response(body=body, status=status, headers=out_headers, content_type="application/json")
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            log.warning("forwarding %s to %s (owner of %s%s) failed: %r", request.path, owner, table.name,
                        partitions, exc)
            return error_response(503, f"the owner of table {table.name!r} partitions {partitions} ({owner}) is not "
                                  f"reachable: {type(exc).__name__}: {exc}",
                                  "retry later; the group rebalances when a worker dies",
                                  headers=RETRY_AFTER, partitions=partitions, owner=owner)
