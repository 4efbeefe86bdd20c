"""The installed package's version, for ``--version`` and the MCP server's ``serverInfo``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """The installed distribution's version (``0+unknown`` when run from a bare tree)."""
    try:
        return version("session-keeper")
    except PackageNotFoundError:
        return "0+unknown"
