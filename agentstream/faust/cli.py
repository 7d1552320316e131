"""``faust.cli``: options and arguments of ``@app.command`` (``from faust.cli import option``)."""

from agentstream.cli import argument, main, option

__all__ = ["argument", "option", "main"]
