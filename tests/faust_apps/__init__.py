"""Small apps written in Faust's documented style; each starts with ``import agentstream as faust``
and is otherwise Faust code. The broker URL in the code is Faust's default; tests point the
workers at their broker with AGENTSTREAM_BROKER."""
