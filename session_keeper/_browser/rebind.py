"""Browsers that outlive our process: the protocols a backend implements to be re-bound.

A browser the keeper did not launch (a CDP endpoint) keeps running when our process
ends. A backend that can name that browser and its pages (:class:`RebindableSession`)
and attach to it again (:class:`RebindableBackend`) lets a new keeper process pick it
up without a restart; the engine's re-binding asks only through these protocols.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, Protocol, TypeVar, runtime_checkable

import attrs

from session_keeper._browser.backend import BrowserSession, PageT

__all__ = [
    "KeeperNamedBackend",
    "RebindableBackend",
    "RebindableSession",
    "Rebound",
]

PageT_contra = TypeVar("PageT_contra", contravariant=True)


@attrs.frozen(kw_only=True)
class Rebound(Generic[PageT]):
    """A browser found again by :meth:`RebindableBackend.rebind`, and the pages adopted."""

    session: BrowserSession[PageT]
    #: conversation -> its page, for every asked-for target that is still open.
    pages: Mapping[str, PageT]


@runtime_checkable
class RebindableSession(Protocol[PageT_contra]):
    """A session whose browser and pages have names that outlive our process."""

    @property
    def identity(self) -> str:
        """A digest naming this browser process (not a secret; no cookie value)."""
        ...

    def target_id(self, page: PageT_contra) -> str | None:
        """The browser's id for ``page`` (no round trip), if known."""
        ...

    async def announce_adopted(self) -> None:
        """Run ``on_page`` callbacks for the pages adopted at re-binding.

        A callback's :class:`~session_keeper.errors.BrowserError` propagates: the keeper then
        fails closed (closes our pages, restarts)."""
        ...

    async def detach(self) -> None:
        """Disconnect without closing any page: the browser and its pages live on."""
        ...


@runtime_checkable
class RebindableBackend(Protocol[PageT]):
    """A backend that can attach to a browser a previous process used."""

    async def rebind(self, identity: str, targets: Mapping[str, str]) -> Rebound[PageT] | None:
        """Attach to the browser named ``identity`` and adopt ``targets`` (conversation ->
        target id) that are still open; ``None`` (nothing attached) if the browser
        there is another one. Raises :class:`~session_keeper.BrowserLaunchError` when
        it cannot connect at all."""
        ...


@runtime_checkable
class KeeperNamedBackend(Protocol):
    """A backend whose marks in a shared browser are named per keeper (the keeper tells it)."""

    def serve_keeper(self, keeper_id: str) -> None:
        """Use ``keeper_id``'s names from now on."""
        ...
