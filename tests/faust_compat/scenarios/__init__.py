"""Every scenario module; importing this package registers them all (in this order)."""

from . import (  # noqa: F401
    agents,
    app_level,
    broker,
    class_settings,
    conf,
    contrib,
    events,
    models,
    names,
    sending,
    streams,
    tables,
)
