"""Faust's table hooks (``on_key_get``, ``on_key_set``, ``on_key_del``, ``on_clear``): a Table
subclass that overrides one has it called after each read, write, deletion or clear.

The table's read and write paths already make one check per operation for sensors (its
``_sensed`` attribute, None when nothing listens); a table whose class overrides a hook gets an
observer there that tells the app's sensors (if any) and then calls the hooks. A table whose
class overrides none keeps the sensors alone, or None: its paths are unchanged."""

from __future__ import annotations

from typing import Any

from .table import Table

__all__ = ["HOOKS", "overrides_hooks", "observer"]

HOOKS = ("on_key_get", "on_key_set", "on_key_del", "on_clear")


def overrides_hooks(table: Any) -> bool:
    cls = type(table)
    return any(getattr(cls, name, None) is not getattr(Table, name) for name in HOOKS)


class _Hooked:
    """What a hooked table's ``_sensed`` holds: the sensors (or None), then the table's hooks."""

    def __init__(self, sensors: Any) -> None:
        self.sensors = sensors

    def on_table_get(self, table: Any, key: Any) -> None:
        if self.sensors is not None:
            self.sensors.on_table_get(table, key)
        table.on_key_get(key)

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        if self.sensors is not None:
            self.sensors.on_table_set(table, key, value)
        table.on_key_set(key, value)

    def on_table_del(self, table: Any, key: Any) -> None:
        if self.sensors is not None:
            self.sensors.on_table_del(table, key)
        table.on_key_del(key)

    def on_table_clear(self, table: Any) -> None:
        table.on_clear()


def observer(table: Any, sensors: Any) -> Any:
    """What ``table._sensed`` should hold with ``sensors`` (the app's delegate, or None)."""
    return _Hooked(sensors) if overrides_hooks(table) else sensors
