"""What the MCP tools may do with one conversation's page, and nothing more.

The tools never hold a Playwright ``Page``: they get a :class:`ConversationPage`, which
offers the operations a browsing tool needs (navigate, snapshot, click, type, wait,
screenshot, close) on the conversation's own tab. It has no path to the shared
context, the cookie jar, other conversations' pages or Playwright's unrouted request
API, so everything a tool does goes through the browser's network stack, where the
Guard enforces the grants.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs
from playwright.async_api import Page

from session_keeper._guard import BlockRecord, Guard
from session_keeper._keeper import SessionKeeper

#: The id of the element on the Guard's block page (see ``_guard._block_page``).
BLOCK_PAGE_ID = "session-keeper-blocked"

#: How long an element action waits for its element (milliseconds).
ACTION_TIMEOUT_MS = 10_000


@attrs.frozen(kw_only=True)
class PageState:
    """Where the conversation's tab is: URL and title."""

    url: str
    title: str


class ToolFailure(Exception):
    """A tool call that cannot be done as asked; the message says what to do instead."""

    def __init__(self, message: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = dict(data or {})


class NavigationBlocked(Exception):
    """The Guard refused the navigation; ``record`` says what and why."""

    def __init__(self, record: BlockRecord) -> None:
        super().__init__(record.reason)
        self.record = record


class ConversationPage:
    """One conversation's tab, reached only through the keeper (see the module docstring)."""

    def __init__(self, keeper: SessionKeeper[Page], guard: Guard, conversation: str) -> None:
        self._keeper = keeper
        self._guard = guard
        self.conversation = conversation

    async def _page(self) -> Page:
        return await self._keeper.tab(self.conversation)

    async def state(self) -> PageState:
        """The tab's URL and title (opens the tab when it has none)."""
        page = await self._page()
        return PageState(url=page.url, title=await page.title())

    async def _blocked_here(self, page: Page) -> BlockRecord | None:
        """The Guard's record for the page now shown, when that page is its block page.

        Decided from the page itself, not from the order of block records: a record of
        an earlier navigation can arrive late and must not fail a later one.
        """
        if await page.locator(f"#{BLOCK_PAGE_ID}").count() == 0:
            return None
        parts = urlsplit(page.url)
        candidates = [b for b in self._guard.blocks if b.conversation == self.conversation]
        exact = [
            b for b in candidates if b.path == parts.path and b.origin.endswith(f"//{parts.netloc}")
        ]
        found = (exact or candidates)[-1:] if (exact or candidates) else []
        if not found:
            raise ToolFailure("the Guard blocked this page (no block record was kept)")
        return found[0]

    async def navigate(self, url: str) -> PageState:
        """Load ``url``; raise :class:`NavigationBlocked` when the Guard refused it.

        A blocked navigation is never recorded as the tab's verified URL.
        """
        page = await self._page()
        await page.goto(url)
        return await self._settled(page)

    async def back(self) -> PageState:
        """Go back in the tab's history."""
        page = await self._page()
        await page.go_back()
        return await self._settled(page)

    async def _settled(self, page: Page) -> PageState:
        blocked = await self._blocked_here(page)
        if blocked is not None:
            raise NavigationBlocked(blocked)
        self._keeper.mark_verified(self.conversation)
        return PageState(url=page.url, title=await page.title())

    async def snapshot(self) -> str:
        """The ARIA snapshot with ``[ref=eN]`` markers that click/type accept."""
        page = await self._page()
        return await page.aria_snapshot(mode="ai")

    async def click(self, ref: str, *, double: bool = False) -> None:
        """Click the element ``ref`` names in the last snapshot."""
        locator = (await self._page()).locator(f"aria-ref={ref}")
        if double:
            await locator.dblclick(timeout=ACTION_TIMEOUT_MS)
        else:
            await locator.click(timeout=ACTION_TIMEOUT_MS)

    async def type(self, ref: str, text: str, *, submit: bool, slowly: bool) -> None:
        """Put ``text`` into the element ``ref``; press Enter after with ``submit``."""
        locator = (await self._page()).locator(f"aria-ref={ref}")
        if slowly:
            await locator.press_sequentially(text, timeout=ACTION_TIMEOUT_MS)
        else:
            await locator.fill(text, timeout=ACTION_TIMEOUT_MS)
        if submit:
            await locator.press("Enter", timeout=ACTION_TIMEOUT_MS)

    async def wait_for(
        self, *, seconds: float | None, text: str | None, text_gone: str | None
    ) -> None:
        """Wait ``seconds``, or until ``text`` shows up, or ``text_gone`` disappears."""
        page = await self._page()
        if seconds is not None:
            await asyncio.sleep(seconds)
        if text is not None:
            await page.get_by_text(text).first.wait_for(state="visible")
        if text_gone is not None:
            await page.get_by_text(text_gone).first.wait_for(state="hidden")

    async def screenshot(self, *, kind: Literal["png", "jpeg"], full_page: bool) -> bytes:
        """An image of the tab."""
        page = await self._page()
        return await page.screenshot(type=kind, full_page=full_page)

    async def close(self) -> bool:
        """Close the conversation's tab; the next tool call opens a fresh one."""
        if not self._keeper.has_tab(self.conversation):
            return False
        page = await self._page()
        await page.close()
        return True

    def describe(self) -> dict[str, Any]:
        """The tab as the tab list shows it (without opening one)."""
        return {
            "index": 0,
            "current": True,
            "url": self._keeper.current_url(self.conversation),
        }
