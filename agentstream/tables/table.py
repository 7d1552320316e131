"""Tables: dict-like views over partitioned state stores, every change sent to a changelog.

Every key has one encoding (the table's key codec: its ``key_type``/``key_serializer``, else
Faust's raw keys, str as UTF-8) used for the store bytes, the changelog key and the partition
(Kafka's default partitioner over those bytes). Reads and writes go to the key's own partition,
from an agent, a timer, a web view or a test alike, so a table always has one value per key on a
worker. An agent that writes a key whose partition another worker owns (its stream is not
partitioned by the table key) writes into the partition of the record it handles, as Faust does,
and is told once that the state splits across workers and how to fix it (``group_by`` the table
key); under exactly_once every write stays in the task's partition (its transaction). Writes land in a
write-back cache; at commit the cache goes to the changelog, and only once the producer has
confirmed delivery are the values written to the local store. The store therefore never holds
a value the changelog lacks, which is what makes replaying the changelog tail after a crash
give back exactly the changelog's state.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import orjson
from mypy_extensions import mypyc_attr

from .. import codecs
from ..events import current_event
from ..exceptions import SerializationError, TopologyError, caused
from ..models import Record
from ..naming import changelog_topic_name, faust_naming
from ..runtime import current_runtime, current_task, runtime_for
from ..transport.partitioner import default_partition
from . import sessions, windowed
from .cache import MISS
from .joined import JoinedTable, from_topic
from .partition import TableNotReady, TablePartition
from .query import live_entries
from .rows import Rows
from .sessions import SessionTable
from .windowed import WindowedTable

if TYPE_CHECKING:
    from ..topics import Topic
    from ..types import AppT as App  # the App's interface: app.py imports this module

log = logging.getLogger(__name__)
_NO_KEY: Final = object()
_HOMES_MAX: Final = 65_536  # memoised key -> partition entries per table
_runtime_get: Final = current_runtime.get  # bound once: every table read and write asks for it

__all__ = ["Table", "TablePartition", "TableNotReady"]


@mypyc_attr(allow_interpreted_subclasses=True)  # a public class: apps subclass it
class Table(Rows):
    """``app.Table(name, default=int)``: a partitioned, changelog-backed dict (Faust's Table)."""

    is_global = False
    value_codec: codecs.Codec
    _key_codec: codecs.Codec
    _key_native: codecs.BaseCodec
    _last_key: Any
    _last_kb: bytes
    _windowed: Any = None  # the shared window state once tumbling()/hopping() was called
    # Set by an owner that keeps store-only entries in the reserved index range of this table's
    # persistent partitions (a stream-stream join's buffer): partition -> how many it holds.
    # Reads of the table (live_entries, key counts) leave that range out, as for a windowed table.
    _index_entries: Any = None
    source_topic: Topic | None = None  # set by from_topic(): the table mirrors this topic
    eos = False  # set by the TableManager under processing_guarantee='exactly_once'
    _writer_subtopology: int | None = None  # exactly_once: the one sub-topology allowed to write
    # The app's sensors while one is registered (the worker sets it; agentstream.worker.hooks):
    # get/set/del then call Faust's on_table_get/set/del. None: one attribute check, no call.
    _sensed: Any = None

    def __init__(
        self,
        app: App,
        name: str,
        *,
        default: Callable[[], Any] | None = None,
        partitions: int | None = None,
        key_type: Any = None,
        value_type: Any = None,
        key_serializer: str | codecs.Codec | None = None,
        value_serializer: str | codecs.Codec | None = None,
        store: str | None = None,
        help: str | None = None,
        on_window_close: Callable[[Any, Any], Any] | None = None,
        use_partitioner: bool = False,
        changelog_topic: Topic | None = None,
        extra_topic_configs: Mapping[str, Any] | None = None,
    ) -> None:
        self.app = app
        self._sensed = None  # an instance attribute: the pure build reads it faster than the class's
        self.on_window_close = on_window_close  # used once windowed (Faust puts it here)
        # Faust's: the producer's partitioner places each key. agentstream places every table key
        # by its own hash anyway; the flag changes what partition_for_key() answers (None), as Faust.
        self.use_partitioner = use_partitioner
        self.name = name
        self.default = default
        self._partitions = partitions
        self.store_url = store
        self.help = help or ""
        self.key_type = key_type
        self.value_type = value_type
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.faust_format = faust_naming(app.settings)
        if self.faust_format:
            # Faust's table records: its serializer follows the type (bytes raw, a Record its own,
            # else json), never the app's key_serializer, so str keys are JSON strings
            self.key_codec = _FaustKeyCodec(
                codecs.side_codec(key_type, key_serializer or _faust_serializer(key_type), "json")
            )
            self.value_codec = codecs.side_codec(value_type, value_serializer or _faust_serializer(value_type), "json")
        else:
            self.key_codec = (
                codecs.UntypedKeyCodec()
                if key_type is None and (key_serializer or app.key_serializer) == "raw"
                else codecs.side_codec(key_type, key_serializer, app.key_serializer)
            )
            self.value_codec = codecs.side_codec(value_type, value_serializer, app.value_serializer)
        # Faust's extra_topic_configs: set on the changelog topic when it is created
        self.extra_topic_configs = {str(k): str(v) for k, v in (extra_topic_configs or {}).items()}
        self.changelog_topic: Topic = (
            app.topic(
                changelog_topic_name(app.id, name),
                partitions=partitions,
                key_serializer="raw",
                value_serializer="raw",
                internal=True,
                compacted=True,
                config=dict(self.extra_topic_configs) or None,
            )
            if changelog_topic is None
            else _given_changelog(self, changelog_topic, partitions)
        )
        self._homes: dict[bytes, int] = {}
        # Faust's table_key_index_size: how many keys' partitions the table remembers
        self._homes_max: int = int(app.settings.extra.get("table_key_index_size") or _HOMES_MAX)
        self._warned: set[tuple[str, str]] = set()  # (kind, agent/topic): each problem is told once
        self._recover_callbacks: list[Callable[[], Any]] = []  # @table.on_recover (Faust's)
        self.key_index_table: Table | None = None  # tumbling(..., key_index=True): the window keys

    @property
    def key_codec(self) -> codecs.Codec:
        return self._key_codec

    @key_codec.setter
    def key_codec(self, codec: codecs.Codec) -> None:
        """Also keeps the codec's ``dumps`` (the read path calls it) and forgets the last key
        encoded with the old codec."""
        self._key_codec = codec
        self._key_native = codecs.native(codec)
        self._last_key = _NO_KEY
        self._last_kb = b""

    def _key_dumps(self, key: Any) -> bytes:
        # A read-modify-write (``t[k] = t[k] + 1``) encodes the same key twice in a row: remember
        # the last one. Only for immutable key types, so a
        # mutated key is never served stale.
        if key is self._last_key:
            return self._last_kb
        try:
            encoded = self._key_native.dumps(key)  # may be a bytearray (normalised below)
        except SerializationError as exc:
            hint = (
                (
                    " (keys of a topic without key_type arrive as bytes: declare the topic with key_type=str, "
                    "or give the table key_type=bytes)"
                )
                if isinstance(key, (bytes, bytearray))
                else ""
            )
            raise caused(
                SerializationError(f"table {self.name!r} cannot encode key {key!r}: {exc}{hint}"), exc
            ) from exc
        if encoded is None:
            raise KeyError("a table key cannot be None")
        kb = encoded if type(encoded) is bytes else bytes(encoded)
        kind = type(key)
        if kind is str or kind is bytes or kind is int:  # immutable: the next call may reuse the bytes
            self._last_key, self._last_kb = key, kb
        if kind is not str and kind is not bytes and self.key_type is None:
            if type(self._key_codec) is codecs.UntypedKeyCodec:
                self._untyped_key(key)
        return kb

    @property
    def partitions(self) -> int:
        return self.changelog_topic.partitions

    @property
    def parts(self) -> dict[int, TablePartition]:
        """This worker's partitions of the table: runtime state, kept in the app's runtime context."""
        return runtime_for(self.app).table_partitions(self.name)

    def _untyped_key(self, key: Any) -> None:
        """Say once per key type that non-str keys of an untyped table read back as text."""
        if isinstance(key, Record) or ("untyped", type(key).__name__) in self._warned:
            return
        self._warned.add(("untyped", type(key).__name__))
        log.warning(
            "table %r has no key_type and got a %s key (%r): lookups work, but keys read back from the store "
            "(items(), the web view, after a restart) are its text %r. Fix: app.Table(%r, key_type=%s)",
            self.name,
            type(key).__name__,
            key,
            self.key_codec.loads(self._key_native.dumps(key)),
            self.name,
            type(key).__name__,
        )

    # -- routing ---------------------------------------------------------------------------------
    def _home_partition(self, key_bytes: bytes) -> int:
        """The partition the key's bytes map to (Kafka's default partitioner), memoised: hot keys
        are hashed once (the memo is dropped whole when it grows past ``_homes_max`` keys: Faust's
        ``table_key_index_size``, else ``_HOMES_MAX``)."""
        homes = self._homes
        home = homes.get(key_bytes)
        if home is None:
            if len(homes) >= self._homes_max:
                homes.clear()
            home = homes[key_bytes] = default_partition(self._routing_bytes(key_bytes), self.partitions)
        return home

    def _routing_bytes(self, key_bytes: bytes) -> bytes:
        """The bytes the key's partition is hashed from: its store bytes, except in Faust's format,
        where the table stores a key as JSON but records reach it through the app's topics, keyed
        with the app's ``key_serializer`` (Faust's default ``raw``, e.g. a group_by; ``json`` when
        the app says so). Faust writes the changelog to that record's partition and its
        ``table_route`` goes there too, so the key as those topics encode it is hashed."""
        if not self.faust_format or self.key_type is bytes:
            return key_bytes
        try:
            key = self.key_codec.loads(key_bytes)
            app_keys = self.app.key_serializer
            if app_keys == "raw":
                return codecs.key_text(key)
            raw = codecs.side_codec(self.key_type, None, app_keys).dumps(key)
            return key_bytes if raw is None else bytes(raw)
        except Exception:
            return key_bytes

    def partition_for_key(self, key: Any) -> int | None:
        """Faust's ``table.partition_for_key(key)``: the partition a write of ``key`` from the record
        in hand goes to; None with ``use_partitioner=True`` (the partitioner decides, as in Faust).
        agentstream keeps a key in its own partition (its hash) when that partition is on this
        worker, else in the record's; Faust always in the record's: the same partition whenever the
        stream is keyed and partitioned like the table. Outside stream iteration: TypeError, as Faust."""
        if self.use_partitioner:
            return None
        if current_event() is None:
            raise TypeError("Cannot modify table key from outside of stream iteration")
        return self._partition_for(self._key_dumps(key), True).partition

    def _partition_for(self, key_bytes: bytes, write: bool) -> TablePartition:
        """The one routing of a table read or write: the partition that holds ``key_bytes`` here."""
        event = current_event()
        part = self._route_part
        if part is not None and self._route_key is key_bytes and self._route_event is event:
            return part  # t[k] = t[k] + 1: routed by the read, same record, same key
        home = self._homes.get(key_bytes, -1)  # _home_partition()'s memo, inline: no call per record
        if home < 0:
            home = self._home_partition(key_bytes)
        rt = _runtime_get()  # runtime_for()'s common case, inline
        if rt is None or rt.app is not self.app:
            rt = runtime_for(self.app)
        parts: dict[int, TablePartition] = rt.partitions.get(self.name) or {}
        part = parts.get(home)
        if part is not None and event is not None and event.message.partition == home and not self.is_global:
            # the common case: the key belongs to the partition of the record in hand; remembered
            # for this event and key, so the write of a read-modify-write skips the routing
            self._route_event, self._route_key, self._route_part = event, key_bytes, part
            return part
        if event is None or self.is_global:
            if part is None:
                raise TableNotReady(
                    f"table {self.name!r}: key {key_bytes!r:.60} belongs to partition {home}, which is not on this "
                    + (
                        "worker (is a worker running?)"
                        if self.is_global or not parts
                        else f"worker (it holds {sorted(parts)}). Fix: read it on the worker that owns partition {home} "
                        "(the web view's GET /tables/<table>/<key> redirects there)"
                    )
                )
            return part
        here = event.message.partition
        if home == here and part is not None:
            return part
        if part is not None and part.active and not self.eos:
            if write:
                self._split_warning(event, key_bytes, home, here, local=True)
            return part  # this worker owns the key: one value per key, as in Faust
        own = parts.get(here)
        if own is None:
            raise TableNotReady(f"table {self.name!r} partition {here} is not on this worker")
        self._split_warning(event, key_bytes, home, here, local=False)  # a read too: it sees only this split
        return own

    def _split_warning(self, event: Any, key_bytes: bytes, home: int, here: int, *, local: bool) -> None:
        """Say once per writer that it writes keys outside the partition it handles, what that
        means here and with more workers, and how to fix it."""
        task = current_task.get()
        writer = task.agent.name if task is not None else event.message.topic
        if ("split", writer) in self._warned:
            return
        self._warned.add(("split", writer))
        raw = event.message.key
        same_key = False
        if event.key is not None and isinstance(raw, (bytes, bytearray)):
            try:
                same_key = self._key_native.dumps(event.key) == key_bytes and bytes(raw) != key_bytes
            except Exception:
                same_key = False
        if local:
            what = (
                f"this worker owns partition {home}, so the value goes there (one value per key); but with more "
                f"workers partition {home} may be elsewhere, and then the key's state splits by source partition"
            )
        elif self.eos:
            what = (
                f"under exactly_once the value stays in partition {here} (the task's transaction), so the key's "
                "state splits by source partition and reads elsewhere miss it"
            )
        else:
            what = (
                f"partition {home} is owned by another worker, so the value goes to partition {here}: the key's "
                "state splits by source partition and reads elsewhere miss it"
            )
        if same_key:
            fix = (
                f"the stream key is encoded {bytes(raw)!r:.40} by topic {event.message.topic!r} but {key_bytes!r:.40} "
                f"by the table. Fix: give the table the topic's key encoding (app.Table({self.name!r}, "
                "key_type=..., key_serializer=...) as declared on the topic), or the topic the table's"
            )
        else:
            fix = (
                f"the stream ({event.message.topic!r}) is not partitioned by the table key. Fix: re-key the stream "
                "by the table key first, stream.group_by(<table key>, name=...) (Kafka Streams' repartition "
                "before aggregation)"
            )
        log.warning(
            "agent %r uses table %r key %.60r, which belongs to partition %d, while handling partition %d; %s. %s",
            writer,
            self.name,
            key_bytes,
            home,
            here,
            what,
            fix,
        )

    def _claim(self, part: TablePartition) -> None:
        """exactly_once: attribute the partition's writes to the current task's transaction.

        Two sub-topologies writing one table would put one partition's changelog into two
        transactions that commit separately (a lost update or a double count after a crash),
        so like Kafka Streams (a store belongs to one sub-topology) that is refused.
        """
        task = current_task.get()
        if task is not None and part.writer == task.id:
            return
        if task is None:
            raise TopologyError(
                f"table {self.name!r} was written outside an agent (timer, task or web view) under "
                "processing_guarantee='exactly_once', where every table write must belong to the transaction "
                "of the record that caused it. Fix: write tables from agents only, or use at_least_once"
            )
        owner = self._writer_subtopology
        if owner is None:
            self._writer_subtopology = owner = task.id.subtopology
        if owner != task.id.subtopology:
            raise TopologyError(
                f"table {self.name!r} is written by two sub-topologies ({owner} and {task.id.subtopology}, agent "
                f"{task.agent.name!r}) under processing_guarantee='exactly_once'; each task commits its own "
                "transaction, so one table partition cannot take writes from two. Fix: write the table from "
                "one agent stage (send to that stage instead), or use at_least_once"
            )
        part.writer = task.id

    # -- dict API ---------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        if self._sensed is not None:
            self._sensed.on_table_get(self, key)
        kb = self._key_dumps(key)
        part = self._partition_for(kb, False)
        value = part.cache.dirty.get(kb, MISS)  # get_bytes()'s first look (the write-back cache), inline
        if value is MISS:
            found, value = part.get_bytes(kb)
            if found:
                return value
        elif value is not None:  # None: a delete in the cache
            return value
        if self.default is not None:
            return self.default()
        raise KeyError(key)

    # The event, key bytes and partition of the last read or write routed the common way
    # (_partition_for): three attributes, not a tuple, so routing allocates nothing per record.
    _route_event: Any = None
    _route_key: bytes = b""
    _route_part: TablePartition | None = None

    def __setitem__(self, key: Any, value: Any) -> None:
        # t[k] = t[k] + 1: the key encoded and routed by the read, each memo checked inline (the
        # first lines of _key_dumps() and _partition_for()), so the write makes neither call
        kb = self._last_kb if key is self._last_key else self._key_dumps(key)
        part = self._route_part
        if part is None or self._route_key is not kb or self._route_event is not current_event():
            part = self._partition_for(kb, True)
        if self._sensed is not None:  # before the write, as Faust's on_key_set
            self._sensed.on_table_set(self, key, value)
        part.set(kb, value)

    def __delitem__(self, key: Any) -> None:
        kb = self._key_dumps(key)
        part = self._partition_for(kb, True)
        found, _ = part.get_bytes(kb)
        if not found:
            raise KeyError(key)
        if self._sensed is not None:  # before the deletion, as Faust's on_key_del
            self._sensed.on_table_del(self, key)
        part.set(kb, None)

    def __contains__(self, key: object) -> bool:
        kb = self._key_dumps(key)
        return self._partition_for(kb, False).get_bytes(kb)[0]

    def get(self, key: Any, default: Any = None) -> Any:
        """The value, or ``default`` when the key is absent; raises :class:`TableNotReady` when
        the key's partition is on another worker (never a silent default for a key held elsewhere)."""
        kb = self._key_dumps(key)
        found, value = self._partition_for(kb, False).get_bytes(kb)
        if found and self._sensed is not None:
            self._sensed.on_table_get(self, key)
        return value if found else default

    def pop(self, key: Any, *default: Any) -> Any:
        try:
            value = self[key] if key in self else None
            if key not in self:
                raise KeyError(key)
            del self[key]
            return value
        except KeyError:
            if default:
                return default[0]
            raise

    def clear(self) -> None:
        """Delete every key of the partitions this worker holds (Faust's ``table.clear()``): each
        gets a tombstone in the changelog at the next commit. Keys held by other workers stay."""
        if self._sensed is not None:  # before clearing, as Faust's on_clear
            on_clear = getattr(self._sensed, "on_table_clear", None)
            if on_clear is not None:
                on_clear(self)
        for part in list(self.parts.values()):
            if part.active:
                for kb in [k for k, _, _ in live_entries(part)]:
                    part.set(kb, None)

    # -- Faust's hooks: a subclass overrides them (agentstream.tables.hooks calls them) ----------------
    def on_key_get(self, key: Any) -> None:
        """Called before each read of ``key`` (Faust's hook: override it in a subclass)."""

    def on_key_set(self, key: Any, value: Any) -> None:
        """Called before each write of ``key`` (Faust's hook)."""

    def on_key_del(self, key: Any) -> None:
        """Called before each deletion of ``key`` (Faust's hook)."""

    def on_clear(self) -> None:
        """Called before :meth:`clear`; as Faust's, it calls :meth:`on_key_del` for every key."""
        for key, _ in list(self.items()):
            self.on_key_del(key)

    # -- Faust's introspection -------------------------------------------------------------------------
    @property
    def data(self) -> Any:
        """Faust's ``table.data``: this worker's rows as a read-only mapping (writes go through the
        table, so they reach the changelog)."""
        from .data_view import TableData

        return TableData(self)

    @property
    def changelog_topic_name(self) -> str:
        """Faust's ``table.changelog_topic_name``."""
        return self.changelog_topic.name

    def info(self) -> dict[str, Any]:
        """Faust's ``table.info()``: the arguments that make this table (``app.Table(**info)`` minus
        ``app`` makes a like one)."""
        return {
            "app": self.app,
            "name": self.name,
            "default": self.default,
            "store": self.store_url,
            "key_type": self.key_type,
            "value_type": self.value_type,
            "key_serializer": self.key_serializer,
            "value_serializer": self.value_serializer,
            "partitions": self._partitions,
            "help": self.help,
            "on_window_close": self.on_window_close,
            "use_partitioner": self.use_partitioner,
            "extra_topic_configs": dict(self.extra_topic_configs),
            "recover_callbacks": list(self._recover_callbacks),
        }

    # -- recovery callbacks (Faust's ``@table.on_recover``) ---------------------------------------
    def on_recover(self, fun: Callable[[], Any]) -> Callable[[], Any]:
        """Decorate ``async def fun()``: called after every restore of this worker's table
        partitions (at start and after each rebalance), before agents resume, as in Faust."""
        if fun in self._recover_callbacks:
            raise TopologyError(f"{fun!r} is registered twice as table {self.name!r}'s on_recover callback")
        self._recover_callbacks.append(fun)
        return fun

    async def call_recover_callbacks(self) -> None:
        """Run the ``on_recover`` callbacks in the order they were registered (the worker's tables
        step calls this once the partitions it was given are restored)."""
        for fun in list(self._recover_callbacks):
            result = fun()
            if inspect.isawaitable(result):
                await result

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other: Any = (), **kwargs: Any) -> None:
        items = other.items() if hasattr(other, "items") else other
        for k, v in list(items) + list(kwargs.items()):
            self[k] = v

    # -- windowing ---------------------------------------------------------------------------------
    def tumbling(
        self,
        size: Any,
        expires: Any = None,
        *,
        grace: Any = 0.0,
        on_window_close: Callable[[Any, Any], Any] | None = None,
        key_index: bool = False,
    ) -> WindowedTable:
        """This table as a :class:`~agentstream.tables.windowed.WindowedTable` of ``size``-second windows.

        ``key_index=True`` (Faust's): keep the table's keys in a ``<name>-key_index`` table, so
        ``keys()``, ``items()``, ``values()``, ``len()`` and iteration answer per key."""
        sessions.refuse_windowing(self)
        wt = windowed.tumbling(
            self, size, expires, grace=grace, on_window_close=on_window_close or self.on_window_close
        )
        return self._with_key_index(wt) if key_index else wt

    def hopping(
        self,
        size: Any,
        step: Any,
        expires: Any = None,
        *,
        grace: Any = 0.0,
        on_window_close: Callable[[Any, Any], Any] | None = None,
        key_index: bool = False,
    ) -> WindowedTable:
        """This table as a WindowedTable of ``size``-second windows starting every ``step`` seconds."""
        sessions.refuse_windowing(self)
        wt = windowed.hopping(
            self, size, step, expires, grace=grace, on_window_close=on_window_close or self.on_window_close
        )
        return self._with_key_index(wt) if key_index else wt

    def using_window(
        self,
        window: Any,
        *,
        grace: Any = 0.0,
        on_window_close: Callable[[Any, Any], Any] | None = None,
        key_index: bool = False,
    ) -> WindowedTable:
        """This table windowed by any window object (Faust's ``using_window``): a TumblingWindow,
        HoppingWindow or SlidingWindow."""
        sessions.refuse_windowing(self)
        wt = windowed.windowed(self, window, grace, on_window_close or self.on_window_close)
        return self._with_key_index(wt) if key_index else wt

    def session(
        self,
        gap: Any,
        *,
        grace: Any = 0.0,
        merge: Callable[[Any, Any], Any] | None = None,
        on_window_close: Callable[[Any, Any], Any] | None = None,
    ) -> SessionTable:
        """This table as a :class:`~agentstream.tables.sessions.SessionTable`: one value per key
        and session of activity, sessions ending after ``gap`` seconds without a record (Kafka
        Streams' session windows). ``merge(a, b)`` combines two sessions a record bridges
        (``+`` by default when the table's default is a number; required otherwise)."""
        return sessions.sessions(
            self, gap, grace=grace, merge=merge, on_window_close=on_window_close or self.on_window_close
        )

    def _with_key_index(self, wt: WindowedTable) -> WindowedTable:
        """Faust's key index: a table ``<name>-key_index`` (key -> 1, same key type and
        partitioning) the windowed table writes each key it sets into."""
        self.key_index_table = self.app.Table(
            f"{self.name}-key_index",
            default=self.default,
            key_type=self.key_type,
            key_serializer=self.key_serializer,
            value_type=int,
            partitions=self._partitions,
        )
        return wt

    # -- joins (agentstream.joins) ---------------------------------------------------------------
    def from_topic(self, topic: Topic) -> Table:
        """Keep this table equal to the latest value per key of ``topic`` (Kafka Streams' KTable);
        ``stream.join(table)`` then reads ``topic`` in the joining task, in timestamp order."""
        return from_topic(self, topic)

    def join(self, other: Table) -> JoinedTable:
        """A read-only view: ``view[k] == (self[k], other[k])`` for keys in both tables."""
        return JoinedTable(self, other, "inner")

    def left_join(self, other: Table) -> JoinedTable:
        """A read-only view over this table's keys: ``(self[k], other.get(k))``."""
        return JoinedTable(self, other, "left")

    def outer_join(self, other: Table) -> JoinedTable:
        """A read-only view over the keys of either table (the missing side None)."""
        return JoinedTable(self, other, "outer")

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every key of the partitions this worker holds (cache and pending writes included)."""
        if self._windowed is not None:  # keys are (key, (start, end)), like Faust's windowed tables
            yield from self._windowed.items()
            return
        kloads, vloads = self.key_codec.loads, self.value_codec.loads
        for part in list(self.parts.values()):
            for k, v, decoded in live_entries(part):
                yield kloads(k), v if decoded else vloads(v)

    def as_ansitable(
        self,
        *,
        key: str = "k",
        value: str = "v",
        sort: bool = False,
        sortkey: Any = None,
        title: Any = None,
        **kwargs: Any,
    ) -> str:
        """Faust's ``table.as_ansitable()``: this worker's rows as a text table (for logs and CLIs)."""
        rows = [(str(k), str(v)) for k, v in self.items()]
        if sort or sortkey is not None:
            rows.sort(key=sortkey or (lambda row: row[0]))
        head = (key, value)
        wk = max([len(head[0])] + [len(r[0]) for r in rows])
        wv = max([len(head[1])] + [len(r[1]) for r in rows])
        line = f"+{'-' * (wk + 2)}+{'-' * (wv + 2)}+"
        out = [f"{title or self.name}"] if title is not False else []
        out += [line, f"| {head[0]:<{wk}} | {head[1]:<{wv}} |", line]
        out += [f"| {k:<{wk}} | {v:<{wv}} |" for k, v in rows]
        out.append(line)
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<Table {self.name} partitions={self.partitions}>"


def _given_changelog(table: Table, topic: Topic, partitions: int | None) -> Topic:
    """Faust's ``changelog_topic=``: the table's changelog is this topic (its name, partitions,
    replicas and configs), with the table's ``extra_topic_configs`` added; compacted unless it
    names its own cleanup policy."""
    if partitions is not None and topic._partitions not in (None, partitions):
        raise TopologyError(
            f"table {table.name!r} has partitions={partitions} but its changelog_topic {topic.name!r} "
            f"has {topic._partitions}: a table partition is its changelog's partition. Fix: give them one count"
        )
    if partitions is not None:
        topic.partitions = partitions
    topic.config.update(table.extra_topic_configs)
    if "cleanup.policy" not in topic.config and not topic.deleting:
        topic.compacted = True  # a changelog keeps the latest value of every key
    return topic


class _FaustKeyCodec:
    """A table key as Faust's JSON serializer writes it (stdlib json: compact, non-ASCII escaped;
    Faust installed without orjson, its default): store lookups need byte-identical keys."""

    def __init__(self, inner: codecs.Codec) -> None:
        self.inner = inner

    def dumps(self, obj: Any) -> bytes | None:
        if type(obj) is str:
            return json.dumps(obj).encode("ascii")
        inner: Any = self.inner  # Any: a custom codec may give a bytearray (normalised below)
        raw = inner.dumps(obj)
        if raw is None:
            return None
        try:
            return json.dumps(orjson.loads(raw), separators=(",", ":")).encode("ascii")
        except orjson.JSONDecodeError:
            return raw if type(raw) is bytes else bytes(raw)  # not JSON (a raw or custom serializer): as it is

    def loads(self, data: bytes | None) -> Any:
        return self.inner.loads(data)


def _faust_serializer(type_: Any) -> str:
    """Faust's table serializer for a key or value type: raw for bytes, a Record's own, else json."""
    if type_ is bytes:
        return "raw"
    if isinstance(type_, type) and issubclass(type_, Record):
        return str(type_._options.serializer or "json")
    return "json"
