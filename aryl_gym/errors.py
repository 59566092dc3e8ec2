"""The error every bad input becomes (imported by the config, schema and file modules alike)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message says where and how to fix it."""
