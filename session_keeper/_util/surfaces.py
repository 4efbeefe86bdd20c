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

**Why one per process.** The set of surfaces is a fact about this process: its listening
sockets. A page of any keeper's browser can reach the console that another keeper of
the same process serves, so every Guard must refuse every surface the process serves,
whichever keeper started it. That is the one :class:`Surfaces` object,
:data:`PROCESS_SURFACES`: it holds the served list, the lock that guards it (a console
may start on another thread), the subscribers told of each change, and the only
methods that change them. A Guard subscribes while it watches a browser
(:meth:`Surfaces.subscribe`) and closes its :class:`SurfaceSubscription` when it
closes: a subscriber is held until then, never by the garbage collector's timing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
from collections.abc import Callable, Iterator
from typing import Literal

import attrs

from session_keeper._util.urls import url_origin

__all__ = [
    "PROCESS_SURFACES",
    "Surface",
    "SurfaceKind",
    "SurfaceSubscription",
    "Surfaces",
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


class SurfaceSubscription:
    """One subscriber's link to a :class:`Surfaces`: told of each change until closed.

    Made by :meth:`Surfaces.subscribe`; :meth:`close` ends it (idempotent). The
    subscriber's callback is held, strongly, by its :class:`Surfaces` until then.
    """

    def __init__(self, owner: Surfaces) -> None:
        self._owner = owner
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: no change is told after it returned."""
        return self._closed

    def close(self) -> None:
        """Stop being told of changes (idempotent). A change being told on another
        thread at this instant may still reach the callback once."""
        if not self._closed:
            self._closed = True
            self._owner.unsubscribe(self)


class Surfaces:
    """The sockets a process serves that are the keeper's own, and who follows them.

    The served list, its lock, its subscribers and the only methods that change them
    (see the module for why a process has one: :data:`PROCESS_SURFACES`). Safe to use
    from several threads; subscribers are told on the thread that made the change,
    outside the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._served: list[Surface] = []
        #: Each open subscription's callback, in the order they subscribed.
        self._subscriptions: dict[SurfaceSubscription, Callable[[], None]] = {}

    def served(self) -> tuple[Surface, ...]:
        """Every surface served now, in the order they started."""
        with self._lock:
            return tuple(self._served)

    @property
    def subscribers(self) -> int:
        """How many open subscriptions are told of changes now."""
        with self._lock:
            return len(self._subscriptions)

    @contextlib.contextmanager
    def serve(self, kind: SurfaceKind, host: str, port: int) -> Iterator[Surface]:
        """Declare ``host:port`` a surface of ``kind`` while the block runs."""
        surface = Surface(kind=kind, host=_bare(host), port=int(port))
        with self._lock:
            self._served.append(surface)
        self._changed()
        try:
            yield surface
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._served.remove(surface)
            self._changed()

    def subscribe(self, callback: Callable[[], None]) -> SurfaceSubscription:
        """Call ``callback()`` after each surface starts or stops, until the returned
        subscription is closed."""
        subscription = SurfaceSubscription(self)
        with self._lock:
            self._subscriptions[subscription] = callback
        return subscription

    def unsubscribe(self, subscription: SurfaceSubscription) -> None:
        """Stop telling ``subscription`` of changes (what its ``close()`` does); nothing
        when it is not subscribed here."""
        with self._lock:
            self._subscriptions.pop(subscription, None)

    def surface_for(self, url: str) -> Surface | None:
        """The surface a request for ``url`` may reach, if any (see the module)."""
        served = self.served()
        reached = url_origin(url) if served else None
        if reached is None:
            return None
        _scheme, host, port = reached
        host = _bare(host)
        for surface in served:
            if surface.port == port and _may_be_here(host, surface):
                return surface
        return None

    def _changed(self) -> None:
        with self._lock:
            told = tuple(self._subscriptions.values())
        for callback in told:
            # A subscriber that fails must not stop a surface from serving, nor keep
            # the others from hearing of it.
            with contextlib.suppress(Exception):
                callback()


#: This process's surfaces: the one :class:`Surfaces` every server declares itself in and
#: every Guard follows (a process has one set of listening sockets; see the module).
PROCESS_SURFACES = Surfaces()


def surfaces() -> tuple[Surface, ...]:
    """Every surface this process serves now (:data:`PROCESS_SURFACES`)."""
    return PROCESS_SURFACES.served()


def serve_surface(
    kind: SurfaceKind, host: str, port: int
) -> contextlib.AbstractContextManager[Surface]:
    """Declare ``host:port`` one of this process's surfaces while the block runs."""
    return PROCESS_SURFACES.serve(kind, host, port)


def surface_for(url: str) -> Surface | None:
    """The surface of this process a request for ``url`` may reach, if any (see the module)."""
    return PROCESS_SURFACES.surface_for(url)


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
