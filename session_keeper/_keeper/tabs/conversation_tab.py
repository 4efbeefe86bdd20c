"""ConversationTab: one conversation's tab, for code an LLM drives.

``keeper.tab(conversation)`` returns one. It offers what an agent tool needs —
navigate, read (ARIA snapshot, text, title, URL), locators, click/type/fill/press/
select, screenshot, evaluate, wait, the conversation's own popups — and nothing
that leads out of the conversation:

- no ``.page``, ``.context``, ``.request``, ``.frames`` or element handles: Playwright's
  ``APIRequestContext`` (``page.request``, ``context.request``) is sent by Playwright's
  driver, not the browser, so it would carry a signed-in site's login past the Guard;
  ``context.cookies()`` reads every cookie value; ``context.pages`` holds other
  conversations' tabs; an element or frame reaches the page through
  ``.page``/``owner_frame()``.
- every request the tab makes (navigation, ``evaluate``'s ``fetch``) is made by the
  browser for this conversation's page, so the Guard decides it.

Python cannot hide an attribute from code that goes looking (``vars()``, ``gc``);
the handle bounds what a tool's API offers, not what arbitrary Python in the same
process can do (see the README's threat model).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, Protocol, TypeVar

from playwright.async_api import Error as PlaywrightError

from session_keeper._browser.capabilities import capabilities_of
from session_keeper._keeper.guard_link.navigation_guard import (
    NavigationGuard,
    blocked_error,
    navigation_block,
    navigation_mark,
    navigation_refusal,
    refuse_off_web,
)
from session_keeper._keeper.tabs.spans import tab_operation
from session_keeper._keeper.tabs.tab_locator import (
    DEFAULT_TIMEOUT_MS,
    KeyModifier,
    MouseButton,
    TabLocator,
    check_screenshot,
    check_text,
    locate,
)
from session_keeper._model.grants import check_name
from session_keeper.errors import (
    BrowserGoneError,
    InvalidArgument,
    InvalidArgumentType,
    NavigationError,
    UsageError,
)

if TYPE_CHECKING:
    from session_keeper._browser.backend import BrowserSession
    from session_keeper._keeper.tabs.replay import ReplayRecorder
    from session_keeper._telemetry import Instruments


P = ParamSpec("P")
R = TypeVar("R")


#: Acts that may change a form field (a click ticks a checkbox).
_INPUT_ACTS = frozenset(
    {"click", "dblclick", "fill", "type", "press", "check", "uncheck", "select", "drop"}
)


class TabKeeper(Protocol):
    """What a :class:`ConversationTab` calls on the keeper that handed it out: its public
    API, and the Guard attached to it."""

    @property
    def generation(self) -> int:
        """The live browser generation."""
        ...

    async def unguarded_page(self, conversation: str, url: str | None = None) -> Any:
        """The conversation's raw page (navigated first when ``url`` is given)."""
        ...

    async def _navigate_tab(self, conversation: str, url: str) -> None:
        """Navigate the conversation's tab for a handle (its jar read held until the
        conversation acts: see NavigationBaselines)."""
        ...

    async def _before_acting(self, conversation: str) -> None:
        """An act of one of the conversation's handles is about to reach a page."""
        ...

    def mark_verified(self, conversation: str) -> str:
        """Record the tab's current URL as verified."""
        ...

    @property
    def navigation_guard(self) -> NavigationGuard | None:
        """The Guard enforcing the keeper's grants, if any."""
        ...


class TabHost(Protocol):
    """The keeper's live state a :class:`ConversationTab` checks on every call (the
    keeper's live-state part implements it; it is not on the keeper's public API)."""

    @property
    def generation(self) -> int:
        """The live browser generation."""
        ...

    @property
    def session(self) -> BrowserSession[Any] | None:
        """The live browser, if any."""
        ...

    def touch(self, conversation: str) -> None:
        """A handle of ``conversation`` was used: the browser and its tab are not idle."""
        ...

    def is_main_page(self, conversation: str, page: object) -> bool:
        """Whether ``page`` is ``conversation``'s main tab."""
        ...

    def popups(self, conversation: str) -> tuple[Any, ...]:
        """The conversation's open popups, raw (for handles of them: nothing is sent)."""
        ...

    @property
    def instruments(self) -> Instruments:
        """Where the tab's spans go (the keeper's telemetry)."""
        ...


#: A tab's operations that only look at the page, or navigate it (a navigation holds its
#: own jar read): they send no held jar read first (see NavigationBaselines).
_LOOKS = frozenset(
    {"goto", "title", "snapshot", "text", "content", "screenshot", "settle", "wait_for"}
)


async def before_act(tab: ConversationTab) -> None:
    """An act is about to reach one of ``tab``'s pages: the held jar reads go first (for
    the keeper's own parts that act on a page outside the tab's methods)."""
    await tab._acting()


def _traced(
    name: str,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    return tab_operation(
        name, lambda tab: (tab._host.instruments, tab), None if name in _LOOKS else before_act
    )


__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "ConversationTab",
    "KeyModifier",
    "MouseButton",
    "TabHost",
    "TabKeeper",
    "TabLocator",
    "bind_tab",
    "raw_page",
]


class ConversationTab:
    """One page of one conversation (its tab or one of its popups); no way out of it.

    With recording on (:class:`~session_keeper.Replay`), each navigation and act leaves a
    masked snapshot of the page behind it (see ``SessionKeeper.replay``).

    Every call first checks the page is still open in the live browser generation it
    was handed out in; otherwise it raises :class:`~session_keeper.errors.BrowserGoneError`
    (call ``ensure()`` to learn what was lost, then ``tab()`` again). Errors of the
    page itself (a timeout, a selector that matches nothing) are Playwright's own.
    """

    __slots__ = ("_conversation", "_generation", "_host", "_keeper", "_main", "_page", "_replay")
    _keeper: TabKeeper
    _host: TabHost
    _page: Any
    _generation: int
    _conversation: str
    _main: bool
    _replay: ReplayRecorder | None

    def __init__(self) -> None:
        # Handed out only by SessionKeeper.tab() and by popups(); see bind_tab.
        raise UsageError("ConversationTab is handed out by SessionKeeper.tab()")

    # -- identity --------------------------------------------------------------------
    @property
    def conversation(self) -> str:
        """The conversation this tab belongs to."""
        return self._conversation

    @property
    def is_popup(self) -> bool:
        """Whether this is a popup of the conversation rather than its main tab."""
        return not self._main

    @property
    def url(self) -> str:
        """The URL the page shows now (local state; no round trip)."""
        return str(self._live().url)

    @property
    def closed(self) -> bool:
        """Whether the page is closed, or its browser gone."""
        try:
            self._live()
        except BrowserGoneError:
            return True
        return False

    def _live(self) -> Any:
        host = self._host
        session = host.session
        page = self._page
        if (
            session is None
            or not session.alive
            or host.generation != self._generation
            or not session.page_is_open(page)
        ):
            raise BrowserGoneError(
                f"{self._conversation}'s page is gone (browser-{self._generation}); "
                "call ensure() to learn what was lost, then tab() again"
            )
        host.touch(self._conversation)
        return page

    def _after(self) -> Any:
        """After an await: the browser may have died meanwhile."""
        return self._live()

    async def _acting(self) -> None:
        """An act is about to reach a page of the conversation: the held jar reads go
        first (see NavigationBaselines)."""
        await self._keeper._before_acting(self._conversation)

    async def _record(self, act: str) -> None:
        """After an act: the input it typed counted (the page reports it a moment after
        the act returns; a crash in that moment would lose it), and a frame of the page
        when recording is on (see Replay)."""
        session = self._host.session
        if act in _INPUT_ACTS and session is not None:
            await capabilities_of(session).activity.input_counted(self._page)
        if self._replay is not None:
            await self._replay.capture(
                self._page,
                conversation=self._conversation,
                act=act,
                generation=self._generation,
                popup=not self._main,
            )

    async def _navigated(self, since: int, *, record: bool = True, history: bool = False) -> str:
        page = self._after()
        url = str(page.url)
        block = navigation_block(self._keeper, self._conversation, url, since)
        if block is None and history:
            # A refused history navigation is aborted and may return quietly: the page
            # keeps its document, so only the Guard can tell.
            block = navigation_refusal(self._keeper, page, since)
        if block is not None:
            raise blocked_error(block)
        if record and self._main and self._host.is_main_page(self._conversation, page):
            self._keeper.mark_verified(self._conversation)
        return url

    # -- navigation ------------------------------------------------------------------
    @_traced("goto")
    async def goto(self, url: str) -> str:
        """Navigate and return the URL the page ended on (after redirects).

        The main tab's URL is then recorded as its last verified URL. Raises
        :class:`~session_keeper.errors.NavigationBlocked` (carrying the Guard's
        :class:`~session_keeper.BlockRecord`) when the Guard refused the navigation or
        one of its redirect hops, or when ``url`` is not on the web (only ``http:``,
        ``https:`` and ``about:blank``: rule ``scheme``) — the URL is then *not*
        recorded — and
        :class:`~session_keeper.errors.BrowserGoneError` when the page or browser is gone.
        """
        check_name(url, "url")
        page = self._live()
        keeper = self._keeper
        since = navigation_mark(keeper)
        if self._main and self._host.is_main_page(self._conversation, page):
            # The keeper's own navigation of the tab: it records the verified URL (never
            # a blocked one) and whatever else it tracks per tab navigation.
            await keeper._navigate_tab(self._conversation, url)
            ended = await self._navigated(since, record=False)
            await self._record("goto")
            return ended
        # A popup: the same rule as the keeper's own navigations (a tab stays on the web).
        refused = await refuse_off_web(keeper, self._conversation, url)
        if refused is not None:
            raise refused
        session = self._host.session
        assert session is not None
        await self._refused_raises(page, since, session.goto(page, url))
        ended = await self._navigated(since)
        await self._record("goto")
        return ended

    async def _refused_raises(self, page: Any, since: int, navigation: Awaitable[Any]) -> None:
        """Await ``navigation``; if it failed because the Guard refused it, say so.

        The Guard aborts a refused navigation of a page that shows a document (it keeps
        that document), so the navigation call fails: the refusal is the reason.
        """
        try:
            await navigation
        except (PlaywrightError, NavigationError):
            refused = navigation_refusal(self._keeper, page, since)
            if refused is None:
                raise
            raise blocked_error(refused) from None

    @_traced("back")
    async def back(
        self,
        *,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
        wait_until: Literal["commit", "domcontentloaded", "load"] = "load",
    ) -> str:
        """Go back in history; return the URL. ``wait_until="commit"`` returns once the
        earlier page starts loading (a page whose load never fires does not hold it).
        Raises as :meth:`goto` does."""
        page = self._live()
        since = navigation_mark(self._keeper)
        if wait_until not in ("commit", "domcontentloaded", "load"):
            raise InvalidArgument("wait_until is 'commit', 'domcontentloaded' or 'load'")
        back = page.go_back(timeout=timeout_ms, wait_until=wait_until)
        await self._refused_raises(page, since, back)
        ended = await self._navigated(since, history=True)
        await self._record("back")
        return ended

    @_traced("forward")
    async def forward(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> str:
        """Go forward in history; return the URL. Raises as :meth:`goto` does."""
        page = self._live()
        since = navigation_mark(self._keeper)
        await self._refused_raises(page, since, page.go_forward(timeout=timeout_ms))
        ended = await self._navigated(since, history=True)
        await self._record("forward")
        return ended

    @_traced("reload")
    async def reload(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> str:
        """Reload; return the URL. Raises as :meth:`goto` does."""
        page = self._live()
        since = navigation_mark(self._keeper)
        await self._refused_raises(page, since, page.reload(timeout=timeout_ms))
        ended = await self._navigated(since, history=True)
        await self._record("reload")
        return ended

    # -- reading ---------------------------------------------------------------------
    @_traced("settle")
    async def settle(self, *, timeout_ms: float = 5_000) -> None:
        """Wait (at most ``timeout_ms``) for the page's current document to have loaded:
        after an action that may have navigated, before reading its title or snapshot."""
        with contextlib.suppress(PlaywrightError):
            await self._live().wait_for_load_state("load", timeout=timeout_ms)

    @_traced("title")
    async def title(self) -> str:
        """The document's title."""
        return str(await self._live().title())

    @_traced("snapshot")
    async def snapshot(
        self, *, refs: bool = False, depth: int | None = None, boxes: bool = False
    ) -> str:
        """The page's ARIA snapshot (YAML text, as Playwright renders it).

        ``refs=True``: Playwright's AI mode, as Playwright MCP uses it — elements carry
        ``[ref=e12]`` and iframes are included; act on one with :meth:`ref`. ``depth``
        limits the tree's depth; ``boxes`` adds each element's ``[box=x,y,w,h]``.
        """
        page = self._live()
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int)):
            raise InvalidArgumentType("depth must be an int")
        if refs:
            return str(await page.aria_snapshot(mode="ai", depth=depth, boxes=boxes or None))
        return str(await page.locator("body").aria_snapshot(depth=depth, boxes=boxes or None))

    @_traced("text")
    async def text(self) -> str:
        """The page's visible text."""
        return str(await self._live().locator("body").inner_text())

    @_traced("content")
    async def content(self) -> str:
        """The page's HTML."""
        return str(await self._live().content())

    @_traced("screenshot")
    async def screenshot(
        self,
        *,
        full_page: bool = False,
        image: Literal["png", "jpeg"] = "png",
        scale: Literal["css", "device"] = "css",
    ) -> bytes:
        """A PNG (or ``image="jpeg"``) of the page: its viewport, or all of it; one image
        pixel per CSS pixel, or (``scale="device"``) per device pixel."""
        check_screenshot(image, scale)
        data = await self._live().screenshot(full_page=full_page, type=image, scale=scale)
        return bytes(data)

    @_traced("resize")
    async def resize(self, width: int, height: int) -> None:
        """Set the page's viewport to ``width`` x ``height`` CSS pixels (1 to 10,000)."""
        for value, what in ((width, "width"), (height, "height")):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 10_000:
                raise InvalidArgument(f"{what} must be an int from 1 to 10000")
        await self._live().set_viewport_size({"width": width, "height": height})

    @_traced("evaluate")
    async def evaluate(self, expression: str, arg: Any = None) -> Any:
        """Run JavaScript in the page and return its JSON-serialisable result.

        It runs as the page: any request it makes (``fetch``, XHR) goes through the
        browser and so through the Guard.
        """
        check_text(expression, "expression")
        return await self._live().evaluate(expression, arg)

    # -- acting ----------------------------------------------------------------------
    def _locate(self, loc: Any) -> TabLocator:
        return locate(loc, self, keeper=self._keeper, page=self._page, after_act=self._record)

    def locator(self, selector: str) -> TabLocator:
        """Elements matching a Playwright selector, as a :class:`TabLocator`."""
        return self._locate(self._live().locator(check_text(selector, "selector")))

    def ref(self, ref: str) -> TabLocator:
        """The element a ``snapshot(refs=True)`` named ``[ref=<ref>]``."""
        return self._locate(self._live().locator(f"aria-ref={check_text(ref, 'ref')}"))

    def get_by_role(self, role: str, *, name: str | None = None, exact: bool = False) -> TabLocator:
        """Elements by ARIA role (and accessible name)."""
        loc = self._live().get_by_role(check_name(role, "role"), name=name, exact=exact)
        return self._locate(loc)

    def get_by_text(self, text: str, *, exact: bool = False) -> TabLocator:
        """Elements by their text."""
        return self._locate(self._live().get_by_text(text, exact=exact))

    def get_by_label(self, text: str, *, exact: bool = False) -> TabLocator:
        """Form controls by their label."""
        return self._locate(self._live().get_by_label(text, exact=exact))

    async def click(self, selector: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Click the element ``selector`` matches."""
        await self.locator(selector).click(timeout_ms=timeout_ms)

    async def fill(
        self, selector: str, value: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> None:
        """Set an input's value."""
        await self.locator(selector).fill(value, timeout_ms=timeout_ms)

    async def type(
        self,
        selector: str,
        text: str,
        *,
        submit: bool = False,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
    ) -> None:
        """Type ``text`` key by key into the element; press Enter after when ``submit``
        (raising :class:`~session_keeper.errors.NavigationBlocked` if the Guard refused the
        navigation that started)."""
        loc = self.locator(selector)
        await loc.type(text, timeout_ms=timeout_ms)
        if submit:
            await loc.press("Enter", timeout_ms=timeout_ms)

    async def press(self, key: str, *, selector: str | None = None) -> None:
        """Press a key (``"Enter"``, ``"Control+A"``) on ``selector``'s element, or the page.

        On an element, raises :class:`~session_keeper.errors.NavigationBlocked` when the key
        started a navigation the Guard refused (see :meth:`TabLocator.press`).
        """
        check_name(key, "key")
        if selector is not None:
            await self.locator(selector).press(key)  # traced there
        else:
            await self._press_page(key)
            await self._record("press")

    @_traced("press")
    async def _press_page(self, key: str) -> None:
        await self._live().keyboard.press(key)

    async def select(self, selector: str, *values: str) -> list[str]:
        """Choose options of a ``<select>``; return the values now selected."""
        return await self.locator(selector).select(*values)

    @_traced("wait_for")
    async def wait_for(
        self,
        *,
        text: str | None = None,
        text_gone: str | None = None,
        selector: str | None = None,
        seconds: float | None = None,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
    ) -> None:
        """Wait for ``text`` to appear, ``text_gone`` to disappear, ``selector`` to be
        visible, or ``seconds`` to pass (exactly one). Raises
        :class:`~session_keeper.InvalidArgument` unless exactly one is given."""
        given = [x for x in (text, text_gone, selector, seconds) if x is not None]
        if len(given) != 1:
            raise InvalidArgument(
                "wait_for needs exactly one of text, text_gone, selector, seconds"
            )
        page = self._live()
        if seconds is not None:
            if seconds < 0:
                raise InvalidArgument("seconds must not be negative")
            await asyncio.sleep(seconds)
        elif text is not None:
            await page.get_by_text(text).first.wait_for(state="visible", timeout=timeout_ms)
        elif text_gone is not None:
            await page.get_by_text(text_gone).first.wait_for(state="hidden", timeout=timeout_ms)
        else:
            assert selector is not None
            await page.locator(selector).first.wait_for(state="visible", timeout=timeout_ms)
        self._after()

    # -- popups ----------------------------------------------------------------------
    def popups(self) -> list[ConversationTab]:
        """The conversation's other open pages (its popups), oldest first."""
        page = self._live()
        return [
            bind_tab(
                self._keeper, self._host, self._conversation, p, replay=self._replay, main=False
            )
            for p in self._host.popups(self._conversation)
            if p is not page
        ]

    @_traced("open_page")
    async def open_page(self) -> ConversationTab:
        """Open another page of this conversation, blank, and return it.

        It is one of :meth:`popups` from then on, guarded as the tab is (the Guard sees
        its first request), and the tab stays the conversation's main page. A restart
        takes it and does not reopen it (only the tab is reopened). Raises
        :class:`~session_keeper.errors.BrowserGoneError` when the browser is gone.
        """
        self._live()
        session = self._host.session
        assert session is not None
        page = await session.open_page(self._conversation)
        self._after()
        return bind_tab(
            self._keeper, self._host, self._conversation, page, replay=self._replay, main=False
        )

    @_traced("wait_for_popup")
    async def wait_for_popup(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> ConversationTab:
        """Wait for this page to open a popup; return it as a tab of the same conversation."""
        popup = await self._live().wait_for_event("popup", timeout=timeout_ms)
        self._after()
        return bind_tab(
            self._keeper, self._host, self._conversation, popup, replay=self._replay, main=False
        )

    @_traced("close")
    async def close(self) -> None:
        """Close this page (a popup, or the tab: ``tab()`` then opens a fresh one)."""
        page = self._live()
        session = self._host.session
        assert session is not None
        await session.close_page(page)

    def __repr__(self) -> str:
        kind = "popup" if not self._main else "tab"
        return f"<ConversationTab {kind} of {self._conversation} browser-{self._generation}>"


def bind_tab(
    keeper: TabKeeper,
    host: TabHost,
    conversation: str,
    page: Any,
    *,
    replay: ReplayRecorder | None,
    main: bool = True,
) -> ConversationTab:
    """A handle on ``page`` of ``conversation``, valid in ``host``'s current generation,
    recording into ``replay`` (the keeper's recorder; ``None``: recording is off)."""
    tab = object.__new__(ConversationTab)
    tab._keeper = keeper
    tab._host = host
    tab._page = page
    tab._generation = host.generation
    tab._conversation = conversation
    tab._main = main
    tab._replay = replay
    return tab


def raw_page(tab: ConversationTab) -> Any:
    """The raw page behind ``tab`` (for the keeper's own checks, never for an agent)."""
    return tab._page
