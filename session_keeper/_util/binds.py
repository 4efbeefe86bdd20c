"""Listening addresses: ``host:port`` parsing and what counts as loopback.

Shared by the keeper's network faces (the console, the MCP server over HTTP), which
listen on loopback unless the caller explicitly allows another address.
"""

from __future__ import annotations

import ipaddress

from session_keeper.errors import InvalidArgument, InvalidArgumentType


def parse_bind(bind: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) as ``(host, port)``.

    Raises :class:`InvalidArgumentType` for a non-string and :class:`InvalidArgument`
    for anything else that is not ``host:port`` with a port in 0..65535.
    """
    if not isinstance(bind, str):
        raise InvalidArgumentType("bind must be a str like 127.0.0.1:8765")
    host, sep, port_text = bind.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise InvalidArgument(f"bind must be host:port, not {bind!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = int(port_text)
    if port > 65535:
        raise InvalidArgument(f"port {port} is out of range")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``localhost`` counts)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
