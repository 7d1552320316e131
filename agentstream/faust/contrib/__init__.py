"""``faust.contrib``: Faust's optional integrations: ``opentelemetry``, ``sentry`` (the sentry
extra), and ``asgi`` with its alias ``fastapi`` (an app beside any ASGI application)."""
