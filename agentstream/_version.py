"""The package version (its own module: the CLI reads it without importing the package's API)."""

__version__ = "0.1.0"
