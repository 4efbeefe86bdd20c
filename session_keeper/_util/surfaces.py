"""The keeper's own surfaces: the sockets this process serves or drives, which are not the web.

The MCP server over HTTP, the console and a CDP endpoint the keeper is attached to are
control surfaces: a conversation's page that reached one could act as another
conversation (MCP), as a person (console) or as the browser itself (CDP). Each is
declared here while it serves (:func:`serve_surface`), and the Guard refuses every
request of a conversation's page to it (rule ``self``) unless a grant names its host.

A request is taken as aimed at a surface when its port is the surface's port and its
host may be this machine: a loopback address or ``localhost``, the surface's own bound
address, any address when the surface listens on all interfaces, and any host *name*
(a name may resolve to loopback: ``--host-resolver-rules``, DNS rebinding). Only an
IP literal of another machine is let through. That errs on the side of refusing a
remote site that happens to use the same port; the surfaces themselves authenticate
every request too, so neither layer stands alone.

The set of surfaces is a fact about this process (its listening sockets), so it is
process-wide; Guards subscribe to changes so that what the browser pauses follows.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Literal

import attrs

from session_keeper._util.urls import url_origin

__all__ = [
    "Surface",
    "SurfaceKind",
    "on_surfaces_changed",
    "serve_surface",
    "surface_for",
    "surfaces",
]

#: What kind of control surface a socket is.
SurfaceKind = Literal["mcp", "console", "cdp", "other"]


@attrs.frozen(kw_only=True)
class Surface:
    """One socket of the keeper's own: what it is, and where it listens."""

    kind: SurfaceKind
    host: str
    port: int

    @property
    def wildcard(self) -> bool:
        """Whether it listens on every interface (reachable by any of this machine's names)."""
        return self.host in ("0.0.0.0", "::", "")


_lock = threading.Lock()
_served: list[Surface] = []
_listeners: weakref.WeakSet[_Listener] = weakref.WeakSet()


class _Listener:
    # A weakly held callback: a Guard that is gone stops being told.
    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback


def surfaces() -> tuple[Surface, ...]:
    """Every surface this process serves now."""
    with _lock:
        return tuple(_served)


def _notify() -> None:
    for listener in list(_listeners):
        with contextlib.suppress(Exception):
            listener.callback()


@contextlib.contextmanager
def serve_surface(kind: SurfaceKind, host: str, port: int) -> Iterator[Surface]:
    """Declare ``host:port`` one of the keeper's surfaces while the block runs."""
    surface = Surface(kind=kind, host=_bare(host), port=int(port))
    with _lock:
        _served.append(surface)
    _notify()
    try:
        yield surface
    finally:
        with _lock, contextlib.suppress(ValueError):
            _served.remove(surface)
        _notify()


def on_surfaces_changed(callback: Callable[[], None]) -> object:
    """Call ``callback`` whenever a surface starts or stops; keep the returned token alive."""
    listener = _Listener(callback)
    _listeners.add(listener)
    return listener


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower()


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    # [::ffff:127.0.0.1] reaches 127.0.0.1 through a dual-stack socket: judge the IPv4.
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


def _may_be_here(host: str, surface: Surface) -> bool:
    if surface.wildcard or host == surface.host:
        return True
    if host == "localhost" or host.endswith(".localhost"):
        return True
    ip = _ip(host)
    if ip is None:
        return True  # a name: it may resolve to this machine
    if ip.is_loopback or ip.is_unspecified:
        return True
    bound = _ip(surface.host)
    return bound is not None and not bound.is_loopback and ip == bound


def surface_for(url: str) -> Surface | None:
    """The surface a request for ``url`` may reach, if any (see the module)."""
    served = surfaces()
    reached = url_origin(url) if served else None
    if reached is None:
        return None
    _scheme, host, port = reached
    host = _bare(host)
    for surface in served:
        if surface.port == port and _may_be_here(host, surface):
            return surface
    return None
