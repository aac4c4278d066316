"""Single source of the package version (read by the results schema)."""

__version__ = "0.1.0"
