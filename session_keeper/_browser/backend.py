"""The BrowserBackend seam: what the keeper needs from a browser, and nothing more.

A backend starts browsers; each started browser is a :class:`BrowserSession`, one
*generation* in the keeper's words. The protocol is shaped after Playwright's
persistent context (``launch_persistent_context``): events tell us the browser is
gone, cookies live in one jar shared by every page, pages belong to conversations.

Real implementation: :class:`session_keeper.PlaywrightBackend`. Fake implementation:
:class:`session_keeper.testing.FakeBackend`. Both run through one contract suite
(``tests/contract/test_backend_contract.py``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from session_keeper._model.cookies import (
    Cookie,
)
from session_keeper.errors import BrowserGoneError

#: Why a browser stopped: ``"closed"`` (someone closed it cleanly) or ``"crashed"``
#: (the process died or the connection broke without a clean close).
CloseCause = Literal["closed", "crashed"]

PageT = TypeVar("PageT")
PageT_co = TypeVar("PageT_co", covariant=True)
T = TypeVar("T")

#: The most a :class:`BrowserSession` call may go on waiting, in seconds, once the
#: browser's death is known: then it raises :class:`~session_keeper.errors.BrowserGoneError`.
#: Both shipped backends raise at once (the same loop iteration that learns of the
#: death); the bound leaves room for a busy event loop.
DEATH_BOUND_S = 1.0


class BrowserSession(Protocol[PageT]):
    """One running browser: one generation of the keeper.

    Contract (every implementation, fake or real, passes the same suite):

    - ``alive`` is answered from state kept by the browser's own events: reading it
      never costs a round trip. It turns ``False`` exactly once, after which it
      stays ``False``.
    - Every callback given to ``on_close`` is called exactly once, with the cause,
      when the browser stops being alive (``"closed"`` after :meth:`close`,
      ``"crashed"`` when the process died or disconnected). A callback added after
      that is called soon, from the event loop, with the same cause.
    - Every callback given to ``on_page`` is called for each page that opens after
      it was added, with the owning conversation: pages from :meth:`open_page` and
      popups they open (a popup belongs to its opener's conversation).
    - After the browser is gone, every ``async`` method except :meth:`close` and
      :meth:`kill` raises :class:`~session_keeper.errors.BrowserGoneError`.
    - No call outlives the browser: a call still pending when the browser dies (a
      page being opened, its ``on_page`` callbacks still running, a navigation, a
      cookie read) raises :class:`~session_keeper.errors.BrowserGoneError` within
      :data:`DEATH_BOUND_S` seconds of the death being known (``alive`` turning
      ``False``, ``on_close`` callbacks called); it never waits for the browser to
      answer. A pending :meth:`close` returns in that case.
    - No raw driver exception escapes: a call that fails while the browser lives
      raises from the :class:`~session_keeper.errors.SessionKeeperError` tree, e.g.
      :class:`~session_keeper.NavigationError` from :meth:`goto`, with a message
      that carries no cookie value, token or URL query.
    - :meth:`close` is clean: persistent cookies are flushed to the profile, session
      cookies are dropped. :meth:`kill` is abrupt (SIGKILL for a real browser):
      cookies that were not yet flushed are lost. Both are idempotent.
    """

    @property
    def alive(self) -> bool:
        """Whether the browser is still running (no round trip)."""
        ...

    def on_close(self, callback: Callable[[CloseCause], None]) -> None:
        """Call ``callback(cause)`` once when the browser stops."""
        ...

    def on_page(self, callback: Callable[[str, PageT], Awaitable[None] | None]) -> None:
        """Call ``callback(conversation, page)`` for each page that opens from now on."""
        ...

    async def cookies(self) -> Sequence[Cookie]:
        """Every cookie in the browser's jar."""
        ...

    async def add_cookies(self, cookies: Sequence[Cookie]) -> None:
        """Put cookies into the jar."""
        ...

    async def clear_cookies(self, site: str) -> None:
        """Delete every cookie that is sent to ``site``."""
        ...

    async def open_page(self, conversation: str) -> PageT:
        """Open a new blank page owned by ``conversation``."""
        ...

    def pages(self, conversation: str) -> Sequence[PageT]:
        """The open pages of ``conversation``, oldest first (no round trip)."""
        ...

    def page_url(self, page: PageT) -> str:
        """The page's current URL as last reported by the browser (no round trip)."""
        ...

    def page_is_open(self, page: PageT) -> bool:
        """Whether the page is still open (no round trip)."""
        ...

    async def goto(self, page: PageT, url: str) -> str:
        """Navigate ``page`` to ``url``; return the URL it ended on."""
        ...

    async def close_page(self, page: PageT) -> None:
        """Close one page."""
        ...

    async def close(self) -> None:
        """Close the browser cleanly."""
        ...

    async def kill(self) -> None:
        """Stop the browser at once, without a clean shutdown."""
        ...


@runtime_checkable
class NavigationObserving(Protocol[PageT_co]):
    """A session that tells where its pages are, as the browser commits each navigation.

    Contract: every callback given to :meth:`on_navigated` is called, from the event
    loop and without a round trip, with ``(conversation, page, url)`` for each navigation
    the main frame of a page a conversation owns commits from then on, whatever moved
    it: :meth:`BrowserSession.goto`, a form submit, a link, a script (``location = ...``,
    ``history.pushState``/``replaceState``), a server redirect (once, at its end),
    history back and forward. ``url`` is the committed URL as the browser reports it
    (what :meth:`BrowserSession.page_url` says next). Navigations of frames inside a
    page, of pages nobody owns, and of a browser that is gone are not reported, nor
    is a popup's first one (Chromium commits it before the opener hears of the
    popup). A callback must not raise.

    Real implementations ride on the browser's own commit events (Playwright's
    ``framenavigated`` of the main frame, which same-document navigations fire too).
    """

    def on_navigated(self, callback: Callable[[str, PageT_co, str], None]) -> None:
        """Call ``callback(conversation, page, url)`` for each committed navigation."""
        ...


async def while_alive(session: BrowserSession[Any], op: Awaitable[T], what: str) -> T:
    """Await ``op`` unless ``session``'s browser stops first: then BrowserGoneError at once.

    For code that drives the browser outside the protocol's calls (a launch hook
    installing routes through Playwright, say): it gets the protocol's promise that no
    call outlives the browser. ``op`` is cancelled when abandoned.
    """
    if not session.alive:
        if inspect.iscoroutine(op):
            op.close()
        raise BrowserGoneError(f"the browser stopped before {what}")
    gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    session.on_close(lambda cause: None if gone.done() else gone.set_result(None))
    task: asyncio.Future[T] = asyncio.ensure_future(op)
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
            task.add_done_callback(lambda t: None if t.cancelled() else t.exception())
        gone.cancel()
    if not task.done():
        raise BrowserGoneError(f"the browser stopped during {what}")
    return task.result()


class BrowserBackend(Protocol[PageT]):
    """Starts browsers for the keeper.

    Contract:

    - :meth:`launch` returns a live :class:`BrowserSession`, or raises a
      :class:`~session_keeper.BrowserLaunchError` (:class:`~session_keeper.ChromiumNotFound`,
      :class:`~session_keeper.ProfileInUse`) having started nothing.
    - A backend with a persistent profile gives each new session the cookies the
      previous one flushed (see :meth:`BrowserSession.close` and ``kill``).
    - At most one session of a backend is alive at a time; launching while one is
      alive raises :class:`~session_keeper.ProfileInUse`.
    """

    async def launch(self) -> BrowserSession[PageT]:
        """Start a browser and return it."""
        ...

    async def aclose(self) -> None:
        """Release whatever the backend holds (driver processes); idempotent.

        A live session is closed cleanly first.
        """
        ...
