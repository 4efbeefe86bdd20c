"""What the MCP tools may do with one conversation's tab, and nothing more.

The tools never hold a Playwright ``Page``: each operation takes the conversation's
:class:`~session_keeper.ConversationTab` from ``keeper.tab()`` (or one of its popups),
which has no path to the shared context, the cookie jar, other conversations' pages
or Playwright's unrouted request API. Everything a tool does is done by the browser
for this conversation's page, where the Guard enforces the grants.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar, cast

import attrs
from playwright.async_api import Page

from session_keeper._keeper.facade.keeper import SessionKeeper, own_popups
from session_keeper._keeper.tabs.conversation_tab import ConversationTab, TabLocator
from session_keeper._keeper.tabs.page_watch import PageWatch, PageWatches
from session_keeper.errors import SessionKeeperError
from session_keeper.mcp._codegen import Expr, Language, call, locator

#: A snapshot ref (``e12``, or ``f1e12`` inside a frame); any other target is a selector.
_REF = re.compile(r"(?:f\d+)?e\d+")

A = TypeVar("A")
B = TypeVar("B")

#: How long an element action waits for its element by default (milliseconds).
ACTION_TIMEOUT_MS = 10_000
#: How long an act's result waits for the page to settle by default (Playwright MCP's
#: ``--timeout-settle``, milliseconds).
SETTLE_MS = 500
#: After an act: how long its requests may take to be answered (seconds), and the load
#: of a document it started (milliseconds), as Playwright MCP waits.
COMPLETION_WAIT_S = 5.0
NAVIGATION_LOAD_WAIT_MS = 10_000


class ToolFailure(Exception):
    """A tool call that cannot be done as asked; the message says what to do instead."""

    def __init__(self, message: str, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = dict(data or {})


@attrs.frozen(kw_only=True)
class PageState:
    """Where a tab is: URL, title and the HTTP status of its document (0: none known)."""

    url: str
    title: str
    status: int = 0


# The document's title and its HTTP status in one round trip (``page.title()`` is one
# too): the navigation timing entry carries the main response's status (Chromium 109+).
_HEADER = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  return [String(document.title), (nav && nav.responseStatus) || 0];
}"""


async def page_state(tab: ConversationTab) -> PageState:
    """``tab``'s URL, title and document status, as a page result shows them."""
    header = await tab.evaluate(_HEADER)
    if (
        isinstance(header, list)
        and len(header) == 2
        and isinstance(header[0], str)
        and isinstance(header[1], int)
    ):
        return PageState(url=tab.url, title=header[0], status=header[1])
    # A page that replaced what the script reads: the title as Playwright reads it.
    return PageState(url=tab.url, title=await tab.title())


class ConversationPage:
    """One conversation's tabs as the tools see them (see the module docstring).

    Tab 0 is the conversation's tab; its other pages follow, oldest first (those
    ``browser_tabs new`` opened and the popups its pages opened). Tools act on the
    *current* tab (``browser_tabs new`` / ``select`` change it; a closed tab falls back
    to 0).
    """

    def __init__(
        self,
        keeper: SessionKeeper[Page],
        conversation: str,
        watches: PageWatches,
        current: int = 0,
        interrupted: asyncio.Future[Any] | None = None,
        action_timeout_ms: float = ACTION_TIMEOUT_MS,
        codegen: str = "typescript",
        on_watch: Callable[[PageWatch], None] | None = None,
        shown: tuple[object, ...] | None = None,
    ) -> None:
        self._keeper = keeper
        # The server's watches, one per page (a page is watched from its first call on).
        self._watches = watches
        #: The page header (tab, URL, title, status) the conversation's last result showed.
        self.shown = shown
        # Told of each tab's watch as it is handed out (the console logs follow it).
        self._on_watch = on_watch
        # Each watched tab's latest request when this call first looked at it: what
        # the call's acts asked for comes after it.
        self._request_marks: dict[PageWatch, int] = {}
        #: How long an element action waits for its element (``--timeout-action``).
        self.action_timeout_ms = action_timeout_ms
        #: The Playwright code this call ran, line by line (``codegen``: "typescript"
        #: as Playwright MCP writes it, "python", or "none").
        self.code: list[str] = []
        self.codegen = codegen
        self.language: Language = "python" if codegen == "python" else "typescript"
        #: Each ref this call used, as Playwright's locator code (``page.getByRole(...)``).
        self.located: dict[str, str] = {}
        self.conversation = conversation
        self.current = current
        #: An earlier call's action that a dialog or file chooser interrupted; it goes
        #: on once that is answered.
        self.interrupted = interrupted

    def page_changed(self, state: PageState) -> bool:
        """Whether the current tab's header differs from the one last shown (as Playwright
        MCP, a result shows ``### Page`` only then, or with a snapshot); now it is shown."""
        header = (self.current, state.url, state.title, state.status)
        if header == self.shown:
            return False
        self.shown = header
        return True

    async def tabs(self) -> list[ConversationTab]:
        """The conversation's tab and its popups (opens the tab when it has none)."""
        main = await self._keeper.tab(self.conversation)
        return [main, *main.popups()]

    async def new_tab(self) -> ConversationTab:
        """Open another page of the conversation and make it current."""
        main = await self._keeper.tab(self.conversation)
        opened = await main.open_page()
        self.current = len(await self.tabs()) - 1
        return opened

    def extra_urls(self) -> list[str]:
        """The URLs of the conversation's pages other than its tab (no round trip)."""
        # The keeper's own view (nothing handed out: a look sends no held jar read).
        return [p.url for p in own_popups(self._keeper, self.conversation)]

    async def tab(self) -> ConversationTab:
        """The current tab."""
        tabs = await self.tabs()
        if self.current >= len(tabs):
            self.current = 0
        return tabs[self.current]

    async def watch(self) -> PageWatch:
        """The current tab's events and modal state (watched from its first call on)."""
        tabs = await self.tabs()
        for tab in tabs:
            # Every tab of the conversation: a popup is watched from the first call on.
            watch = self._watches.watch(tab)
            self._request_marks.setdefault(watch, watch.last_request)
            if self._on_watch is not None:
                self._on_watch(watch)
        return self._watches.watch(await self.tab())

    async def complete(self, settle_ms: float) -> None:
        """After an act, as Playwright MCP waits: ``settle_ms`` for what it set off
        (a timer, a dialog, a late navigation); then the load of a document it started
        (10 s at most), or the requests it made (5 s at most) and ``settle_ms`` again."""
        tab = await self.tab()
        await asyncio.sleep(settle_ms / 1000)
        watch = self._watches.of(tab)
        mark = None if watch is None else self._request_marks.get(watch)
        if watch is None or mark is None:
            return  # a tab this call never watched: no act of this call is in it
        outcome = await watch.requests_done(mark, timeout_s=COMPLETION_WAIT_S)
        if outcome == "navigated":
            await tab.settle(timeout_ms=NAVIGATION_LOAD_WAIT_MS)
        elif outcome == "answered":
            await asyncio.sleep(settle_ms / 1000)

    async def watched(self) -> PageWatch | None:
        """The current tab's watch, if it has one already (never opens a tab)."""
        if not self._keeper.alive or not self._keeper.has_tab(self.conversation):
            return None
        return self._watches.of(await self.tab())

    async def state(self) -> PageState:
        state, _ = await self.read()
        return state

    async def read(
        self, *, settle: bool = True, snapshot: bool = False, boxes: bool = False
    ) -> tuple[PageState, str | None]:
        """The current tab's URL, title and document status, and its snapshot (with each
        element's box if ``boxes``) when asked (``None`` if not).

        ``settle``: first wait for the document an action may have started to load (a
        navigation already waited for it). The title and the snapshot are independent
        reads of one document: asked together, the tab pays one wait for the browser
        instead of two (the first read of a new document also sets up Playwright's
        page script, which the other then shares). A failure raises as the two reads
        in turn would: the title's first.
        """
        tab = await self.tab()
        if settle:
            # An action may have started a navigation: read the document it led to.
            await tab.settle()
        if not snapshot:
            return await page_state(tab), None
        shot = tab.snapshot(refs=True, boxes=boxes)
        state, text = await read_together(page_state(tab), shot)
        return state, text

    def seen(self) -> None:
        """The model was just shown the current tab: its URL is verified (what a restart
        will name as where the tab was). Popups are not remembered across restarts."""
        url = self._keeper.current_url(self.conversation) or ""
        # Only a web page is worth returning to (not an error page the browser showed).
        if self.current == 0 and url.startswith(("http://", "https://")):
            with contextlib.suppress(SessionKeeperError):
                self._keeper.mark_verified(self.conversation)

    async def navigate(self, url: str) -> None:
        """Load ``url``; raises :class:`~session_keeper.errors.NavigationBlocked` when refused.
        (Read the page with :meth:`read`, ``settle=False``: the navigation waited already.)"""
        tab = await self.tab()
        await tab.goto(url)

    async def back(self) -> None:
        """Go back (read the page with :meth:`read`, ``settle=False``, as Playwright MCP)."""
        tab = await self.tab()
        # As Playwright MCP: once the earlier page starts loading (its load may never fire).
        await tab.back(wait_until="commit")

    async def snapshot(self, *, depth: int | None = None, boxes: bool = False) -> str:
        """The ARIA snapshot with ``[ref=eN]`` markers that click/type accept."""
        return await (await self.tab()).snapshot(refs=True, depth=depth, boxes=boxes)

    async def element(self, ref: str) -> TabLocator:
        """The element ``ref`` names in the current tab's last snapshot.

        A ref no element has now (the page changed since that snapshot) is refused at
        once, in Playwright MCP's words, rather than waited for. The element's locator
        code is kept for the ``### Ran Playwright code`` section (:attr:`located`).
        """
        tab = await self.tab()
        if _REF.fullmatch(ref) is None:
            # Not a snapshot ref: a selector, as Playwright MCP also takes (in this page).
            located = tab.locator(ref)
            if await located.count() == 0:
                raise ToolFailure(f'"{ref}" does not match any elements.')
            # Its code is the selector as given, as Playwright MCP writes it.
            self.located[ref] = locator(self.language, ref)
            return located.first
        located = tab.ref(ref)
        code = await located.code(self._written_in)
        if code is None:
            raise ToolFailure(
                f"Ref {ref} not found in the current page snapshot. Try capturing new snapshot."
            )
        self.located[ref] = f"page.{code}"
        return located

    @property
    def _written_in(self) -> Literal["python", "javascript"]:
        return "python" if self.language == "python" else "javascript"

    def ran(self, line: str) -> None:
        """Note a line of Playwright code this call ran (in :attr:`language`)."""
        if self.codegen != "none":
            self.code.append(line)

    def act(
        self,
        on: str | None,
        method: str,
        *args: object,
        options: Mapping[str, object] | None = None,
    ) -> None:
        """Note ``method`` called on the element ref ``on`` (``None``: on the page), its
        name, arguments and options spelt as in Python."""
        if on is None:
            target = "page"
        else:
            target = self.located.get(on) or locator(self.language, f"aria-ref={on}")
        self.ran(call(self.language, target, method, *args, options=options))

    def element_code(self, ref: str) -> Expr:
        """The element ``ref`` as code (for an argument, as ``drag_to``'s)."""
        return Expr(self.located.get(ref) or locator(self.language, f"aria-ref={ref}"))


async def read_together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """``first`` and ``second`` run together; both results, or the first one's error
    (then the second one's), once both are done: neither is left running or unheard."""
    one, two = await asyncio.gather(first, second, return_exceptions=True)
    for outcome in (one, two):
        if isinstance(outcome, BaseException):
            raise outcome
    return cast("A", one), cast("B", two)
