"""Every scenario module; importing this package registers them all (in this order)."""

from . import agents, app_level, broker, conf, contrib, events, models, names, sending, streams, tables  # noqa: F401
