"""What a browser session can do beyond :class:`~session_keeper.BrowserSession`, as
capabilities a caller asks for by protocol, never by the session's class.

The Guard needs a session whose network it can intercept (:class:`InterceptableSession`:
Playwright's and CDP's); a session that can lose its connection and re-adopt its pages
(:class:`ReattachingSession`: CDP's) also tells it when to put its interception back.
A backend of its own gets guarded by implementing these, not by subclassing ours.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

__all__ = ["InterceptableSession", "ReattachingSession", "SignInPages"]


@runtime_checkable
class SignInPages(Protocol):
    """A session that opens pages of their own for a sign-in: a secret is typed where no
    model reaches.

    A sign-in page belongs to a conversation for enforcement (its grants and sign-in
    apply, as on its tab) but is none of its pages: :meth:`BrowserSession.pages` never
    lists it, it has no opener and no window name, so no handle, tool or popup of the
    conversation can reach its document. A popup it opens (a sign-in through an identity
    provider's popup) is a sign-in page too.
    """

    async def open_sign_in_page(self, conversation: str) -> object:
        """Open a blank sign-in page of ``conversation`` (see the class)."""
        ...

    def is_sign_in_page(self, page: object) -> bool:
        """Whether ``page`` is a sign-in page (local state)."""
        ...

    def sign_in_pages(self, conversation: str) -> Sequence[object]:
        """The open sign-in pages of ``conversation`` and their popups, oldest first
        (local state)."""
        ...


@runtime_checkable
class InterceptableSession(Protocol):
    """A session whose pages live in one Playwright context, so that its network can be
    intercepted (context and page routes, a CDP session per page)."""

    @property
    def context(self) -> BrowserContext:
        """The context every owned page lives in."""
        ...

    @property
    def alive(self) -> bool:
        """Whether the browser is running (local state)."""
        ...

    def on_page(self, callback: Callable[[str, Page], Awaitable[None] | None]) -> None:
        """Call ``callback(conversation, page)`` for every owned page opened from now on."""
        ...

    def owner_of(self, page: Page) -> str | None:
        """The conversation that owns ``page`` (a popup is its opener's), if any."""
        ...


@runtime_checkable
class ReattachingSession(InterceptableSession, Protocol):
    """An interceptable session that can lose its connection to a browser that lives on,
    and adopt the pages again (after a dropped socket, or from a previous process)."""

    def on_readopt(self, callback: Callable[[ReattachingSession], Awaitable[None]]) -> None:
        """Run ``await callback(session)`` after a reconnect re-adopted the owned pages
        (before any waiting call goes on)."""
        ...

    def owned_pages(self) -> Sequence[tuple[str, Page]]:
        """``(conversation, page)`` for every owned page (local state)."""
        ...

    def found_at_rebind(self, page: Page) -> bool:
        """Whether ``page`` was opened by a previous keeper process and found again."""
        ...
