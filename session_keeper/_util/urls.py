"""Where a network URL really goes: its scheme, host and port (a default port spelled out)."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

__all__ = ["DEFAULT_PORTS", "SCHEMES", "url_origin"]

#: Schemes of requests that leave the browser for a host.
SCHEMES: Final = frozenset({"http", "https", "ws", "wss"})
DEFAULT_PORTS: Final = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def url_origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` a URL really reaches, or ``None`` for a non-network URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]
