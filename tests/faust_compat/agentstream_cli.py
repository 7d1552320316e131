"""``agentstream``'s command line with ``import faust`` answered by ``agentstream.faust``."""

from .shim import install

install()

from agentstream.cli import main  # noqa: E402  (after the alias is installed)

raise SystemExit(main())
