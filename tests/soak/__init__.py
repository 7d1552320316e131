"""Long-running soak tests (``make soak``), outside ``make test``."""
