"""Where a person signs a conversation in: a sign-in page of the keeper's
(:meth:`~session_keeper.SessionKeeper.sign_in_tab`), never the conversation's tab.

The model drives the conversation's tab, and a same-origin page it opened from there
reads its opener's document; a sign-in page has no opener and no name and is none of the
conversation's pages, so nothing the model holds reaches what the person types. Two
faces hand it to a person: the console's live view streams it (and the popups it opens,
an identity provider's), and a headed MCP server with no console opens it in the
browser's window for the person at the machine. When the login is recorded (the live
view's *I'm done*, the model's ``browser_record_login``), the page closes and the
conversation's tab moves to the page the sign-in ended on.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError

from session_keeper._util.keyed_lock import KeyedLock
from session_keeper._util.redact import redact_url
from session_keeper.errors import BrowserError, PolicyRefusal, SessionKeeperError

if TYPE_CHECKING:
    from session_keeper._keeper.facade.keeper import SessionKeeper

__all__ = ["PersonSignIns", "web_url"]

log = logging.getLogger(__name__)


def web_url(url: str | None) -> str | None:
    """``url`` when it is an http(s) address (``None`` for a blank page, or nothing)."""
    if url is None or urlsplit(url).scheme not in ("http", "https"):
        return None
    return url


class PersonSignIns:
    """A face's sign-in pages, one per conversation a person signs in (see the module).

    A page outlives the live views showing it (a person who reloads the view finds their
    half-typed form); it is closed when the login is recorded, when another address is
    opened in its place, and when the face stops.
    """

    def __init__(self) -> None:
        self._locks = KeyedLock()
        #: Per conversation, the address a sign-in link asked for: the next live view
        #: opens a fresh sign-in page there.
        self._asked: dict[str, str] = {}
        #: The conversations this face opened sign-in pages for (closed at stop).
        self._opened: set[str] = set()

    def ask(self, conversation: str, url: str) -> None:
        """The next live view of ``conversation`` signs in starting at ``url``."""
        self._asked[conversation] = url

    async def page(self, keeper: SessionKeeper[Any], conversation: str) -> Any:
        """The raw sign-in page the person sees: the one open already, else a new one at
        the address a sign-in link asked for, or where the conversation's tab is.

        Raises what :meth:`~session_keeper.SessionKeeper.sign_in_tab` raises (the
        page stays open, blank or where the refused navigation left it).
        """
        async with self._locks.hold(conversation):
            asked = self._asked.pop(conversation, None)
            pages = keeper.unguarded_sign_in_pages(conversation)
            if pages and asked is None:
                return pages[0]
            start = asked or web_url(keeper.current_url(conversation))
            return await self._open(keeper, conversation, start, pages)

    async def goto(self, keeper: SessionKeeper[Any], conversation: str, url: str) -> None:
        """Open ``url`` in a fresh sign-in page of ``conversation`` (the old one closes)."""
        async with self._locks.hold(conversation):
            pages = keeper.unguarded_sign_in_pages(conversation)
            await self._open(keeper, conversation, url, pages)

    async def _open(
        self, keeper: SessionKeeper[Any], conversation: str, url: str | None, old: Any
    ) -> Any:
        await _close(old)
        self._opened.add(conversation)
        await keeper.sign_in_tab(conversation, url)
        return keeper.unguarded_sign_in_pages(conversation)[0]

    async def finish(self, keeper: SessionKeeper[Any], conversation: str) -> str | None:
        """After a recorded login: close the sign-in pages and move the conversation's
        tab to the page the sign-in ended on. Returns why the tab was not moved
        (``None``: moved, or there was nothing to move to)."""
        async with self._locks.hold(conversation):
            self._asked.pop(conversation, None)
            self._opened.discard(conversation)
            pages = keeper.unguarded_sign_in_pages(conversation)
            url = web_url(pages[0].url) if pages else None
            await _close(pages)
        if url is None:
            return None
        try:
            await keeper.tab(conversation, url)
        except (PolicyRefusal, BrowserError) as exc:
            log.info("the tab was not moved to the signed-in page %s", redact_url(url))
            return f"the tab was not moved to the signed-in page: {exc}"
        return None

    async def close(self, keeper: SessionKeeper[Any] | None) -> None:
        """Close every sign-in page this face opened (it stops serving)."""
        opened, self._opened = self._opened, set()
        self._asked.clear()
        if keeper is None or keeper.closed:
            return
        for conversation in sorted(opened):
            await _close(keeper.unguarded_sign_in_pages(conversation))


async def _close(pages: Any) -> None:
    for page in pages:
        # Gone already (the browser died, or its site closed it): nothing to close.
        with contextlib.suppress(SessionKeeperError, PlaywrightError):
            await page.close()
