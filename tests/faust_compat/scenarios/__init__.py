"""Every scenario module; importing this package registers them all (in this order)."""

from . import agents, app_level, events, models, names, streams, tables, broker  # noqa: F401
