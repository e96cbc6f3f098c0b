"""The package version, importable from any layer without the facade."""

__version__ = "0.1.0"
