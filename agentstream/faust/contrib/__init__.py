"""``faust.contrib``: Faust's optional integrations that apply here (``opentelemetry``)."""
