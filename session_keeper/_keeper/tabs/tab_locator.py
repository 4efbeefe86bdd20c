"""TabLocator: elements of one conversation's page, for code an LLM drives.

A Playwright ``Locator`` without ``.page``, frames or element handles (each leads out of
the conversation; see :class:`~session_keeper.ConversationTab`). An action that may
navigate the page (a click, Enter) asks the Guard afterwards whether it refused that
navigation, and says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, get_args

from playwright.async_api import Error as PlaywrightError

from session_keeper._keeper.guard_link.navigation_guard import (
    Guarded,
    blocked_error,
    navigation_mark,
    navigation_refusal,
)
from session_keeper._keeper.tabs.spans import tab_operation
from session_keeper._model.grants import check_name
from session_keeper._telemetry import instruments_for
from session_keeper.errors import (
    BrowserGoneError,
    InvalidArgument,
    InvalidArgumentType,
    UsageError,
)

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "KeyModifier",
    "LocatedTab",
    "MouseButton",
    "TabLocator",
    "WaitState",
    "check_screenshot",
    "check_text",
    "locate",
]

#: Default wait for ``wait_for`` and locator actions, in milliseconds.
DEFAULT_TIMEOUT_MS = 30_000

WaitState = Literal["attached", "detached", "visible", "hidden"]
MouseButton = Literal["left", "right", "middle"]
KeyModifier = Literal["Alt", "Control", "ControlOrMeta", "Meta", "Shift"]
_BUTTONS = frozenset(get_args(MouseButton))
_MODIFIERS = frozenset(get_args(KeyModifier))
P = ParamSpec("P")
R = TypeVar("R")


def check_text(value: object, what: str) -> str:
    """A non-empty ``str`` (selectors and scripts may hold newlines, unlike names)."""
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(f"{what} must not be empty")
    return value


def check_screenshot(image: object, scale: object) -> None:
    """Refuse a screenshot format or scale Playwright does not take."""
    if image not in ("png", "jpeg"):
        raise InvalidArgument("image is 'png' or 'jpeg'")
    if scale not in ("css", "device"):
        raise InvalidArgument("scale is 'css' or 'device'")


class LocatedTab(Protocol):
    """The tab a :class:`TabLocator` belongs to, as far as the locator asks it."""

    @property
    def conversation(self) -> str:
        """The conversation the tab belongs to."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the page is closed, or its browser gone."""
        ...

    @property
    def url(self) -> str:
        """The URL the page shows now."""
        ...

    async def _acting(self) -> None:
        """An act is about to reach the page: the held jar reads go first."""
        ...


#: An element's operations that only look (no act reaches the page).
_LOOKS = frozenset({"screenshot"})


async def _acting(loc: TabLocator) -> None:
    await loc._tab._acting()


def _traced(
    name: str,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    # An element's actions are the tab's operations: the same span names.
    return tab_operation(
        name,
        lambda loc: (instruments_for(getattr(loc._keeper, "telemetry", None)), loc._tab),
        None if name in _LOOKS else _acting,
    )


#: What runs after each act of a locator (the replay's frame), given the act's name.
AfterAct = Callable[[str], Awaitable[None]]


def locate(
    loc: Any, tab: LocatedTab, *, keeper: Guarded, page: object, after_act: AfterAct | None = None
) -> TabLocator:
    """A :class:`TabLocator` over ``loc`` on ``tab``'s ``page``, whose navigations
    ``keeper``'s Guard decides; ``after_act`` is awaited after each act (``None``: nothing)."""
    located = object.__new__(TabLocator)
    located._loc = loc
    located._tab = tab
    located._keeper = keeper
    located._page = page
    located._after = after_act
    return located


class TabLocator:
    """Elements of a :class:`ConversationTab` (a Playwright ``Locator`` without ``.page``,
    frames or element handles)."""

    __slots__ = ("_after", "_keeper", "_loc", "_page", "_tab")
    _loc: Any
    _tab: LocatedTab
    _keeper: Guarded
    _page: object
    _after: AfterAct | None

    def __init__(self) -> None:
        raise UsageError("TabLocator is made by ConversationTab.locator()")

    def _narrow(self, loc: Any) -> TabLocator:
        return locate(loc, self._tab, keeper=self._keeper, page=self._page, after_act=self._after)

    async def _acted(self, act: str) -> None:
        if self._after is not None:
            await self._after(act)

    def _check(self) -> Any:
        if self._tab.closed:
            raise BrowserGoneError(
                f"{self._tab.conversation}'s page is gone; call ensure(), then tab() again"
            )
        return self._loc

    # -- narrowing ---------------------------------------------------------------------
    def locator(self, selector: str) -> TabLocator:
        """Elements matching ``selector`` inside these."""
        return self._narrow(self._check().locator(check_text(selector, "selector")))

    def nth(self, index: int) -> TabLocator:
        """The ``index``-th match (0-based)."""
        return self._narrow(self._check().nth(index))

    @property
    def first(self) -> TabLocator:
        """The first match."""
        return self._narrow(self._check().first)

    @property
    def last(self) -> TabLocator:
        """The last match."""
        return self._narrow(self._check().last)

    def get_by_role(self, role: str, *, name: str | None = None, exact: bool = False) -> TabLocator:
        """Matches by ARIA role inside these."""
        loc = self._check().get_by_role(check_name(role, "role"), name=name, exact=exact)
        return self._narrow(loc)

    def get_by_text(self, text: str, *, exact: bool = False) -> TabLocator:
        """Matches by text inside these."""
        return self._narrow(self._check().get_by_text(text, exact=exact))

    # -- reading -----------------------------------------------------------------------
    async def count(self) -> int:
        """How many elements match."""
        return int(await self._check().count())

    async def inner_text(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> str:
        """The element's visible text."""
        return str(await self._check().inner_text(timeout=timeout_ms))

    async def all_inner_texts(self) -> list[str]:
        """Every match's visible text."""
        return list(await self._check().all_inner_texts())

    async def text_content(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> str | None:
        """The element's ``textContent``."""
        value = await self._check().text_content(timeout=timeout_ms)
        return None if value is None else str(value)

    async def input_value(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> str:
        """An input's value."""
        return str(await self._check().input_value(timeout=timeout_ms))

    async def get_attribute(
        self, name: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> str | None:
        """An attribute's value."""
        value = await self._check().get_attribute(name, timeout=timeout_ms)
        return None if value is None else str(value)

    async def is_visible(self) -> bool:
        """Whether the element is visible now."""
        return bool(await self._check().is_visible())

    async def aria_snapshot(
        self,
        *,
        refs: bool = False,
        depth: int | None = None,
        boxes: bool = False,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
    ) -> str:
        """The element's ARIA snapshot (``refs``, ``depth``, ``boxes``: as
        :meth:`ConversationTab.snapshot`)."""
        return str(
            await self._check().aria_snapshot(
                mode="ai" if refs else None, depth=depth, boxes=boxes or None, timeout=timeout_ms
            )
        )

    async def code(self, language: Literal["python", "javascript"] = "python") -> str | None:
        """Playwright's own locator for the element these match now, as ``codegen``
        writes it: ``get_by_role("button", name="Submit")`` in Python,
        ``getByRole('button', { name: 'Submit' })`` in JavaScript; ``None`` when nothing
        matches (a ref from an older snapshot, say). It does not wait.

        Raises :class:`~session_keeper.errors.BrowserGoneError` when the page is gone.
        """
        loc = self._check()
        try:
            if language == "javascript":
                written = await _javascript_locator(loc)
                if written is not None:
                    return written
            normalized = await loc.normalize()
        except PlaywrightError:
            self._check()  # the page went away meanwhile: say that, not "no match"
            return None
        return str(normalized)

    @_traced("screenshot")
    async def screenshot(
        self,
        *,
        image: Literal["png", "jpeg"] = "png",
        scale: Literal["css", "device"] = "css",
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
    ) -> bytes:
        """A PNG (or ``image="jpeg"``) of the element, in CSS or (``scale="device"``)
        device pixels."""
        check_screenshot(image, scale)
        shot = await self._check().screenshot(timeout=timeout_ms, type=image, scale=scale)
        return bytes(shot)

    # -- acting ------------------------------------------------------------------------
    @_traced("click")
    async def click(
        self,
        *,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
        button: MouseButton = "left",
        modifiers: Sequence[KeyModifier] = (),
        double: bool = False,
    ) -> None:
        """Click the element (``double``: a double click; ``button``, ``modifiers`` as in
        Playwright). Raises :class:`~session_keeper.errors.NavigationBlocked` when the click
        started a navigation of the page that the Guard refused."""
        if button not in _BUTTONS:
            raise InvalidArgument(f"button must be one of {sorted(_BUTTONS)}")
        keys = list(modifiers)
        if any(m not in _MODIFIERS for m in keys):
            raise InvalidArgument(f"modifiers must be among {sorted(_MODIFIERS)}")
        since = navigation_mark(self._keeper)
        loc = self._check()
        if double:
            await loc.dblclick(timeout=timeout_ms, button=button, modifiers=keys)
        else:
            await loc.click(timeout=timeout_ms, button=button, modifiers=keys)
        self._raise_if_refused(since)
        await self._acted("dblclick" if double else "click")

    @_traced("hover")
    async def hover(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Move the mouse over the element."""
        await self._check().hover(timeout=timeout_ms)

    @_traced("drag_to")
    async def drag_to(self, target: TabLocator, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Drag the element onto ``target`` (an element of the same tab)."""
        if not isinstance(target, TabLocator) or target._page is not self._page:
            raise InvalidArgument("drag_to takes an element of the same tab")
        await self._check().drag_to(target._check(), timeout=timeout_ms)
        await self._acted("drag")

    @_traced("drop")
    async def drop(
        self,
        *,
        files: Sequence[Mapping[str, Any]] | None = None,
        data: Mapping[str, str] | None = None,
        timeout_ms: float = DEFAULT_TIMEOUT_MS,
    ) -> None:
        """Drop files (payloads ``{name, mimeType, buffer}``: bytes, never a path) and/or
        MIME-typed ``data`` onto the element, as if dragged from outside the page."""
        if files is not None and any(not isinstance(f.get("buffer"), bytes) for f in files):
            raise InvalidArgument("each file to drop is a payload with its bytes as 'buffer'")
        payload = {k: v for k, v in (("files", list(files or ())), ("data", dict(data or {}))) if v}
        await self._check().drop(payload, timeout=timeout_ms)
        await self._acted("drop")

    def _raise_if_refused(self, since: int) -> None:
        """After an action that may navigate: raise if the Guard refused that navigation.

        Playwright's click and press wait for a navigation they started to be answered;
        refused, it was aborted and the page kept its document: only the Guard can tell.
        """
        self._check()
        refused = navigation_refusal(self._keeper, self._page, since)
        if refused is not None:
            raise blocked_error(refused)

    @_traced("fill")
    async def fill(self, value: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Set an input's value."""
        await self._check().fill(value, timeout=timeout_ms)
        await self._acted("fill")

    @_traced("type")
    async def type(self, text: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Type ``text`` key by key."""
        await self._check().press_sequentially(text, timeout=timeout_ms)
        await self._acted("type")

    @_traced("press")
    async def press(self, key: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Press a key on the element. Raises :class:`~session_keeper.errors.NavigationBlocked`
        when the key started a navigation the Guard refused (Enter submitting a form)."""
        since = navigation_mark(self._keeper)
        await self._check().press(key, timeout=timeout_ms)
        self._raise_if_refused(since)
        await self._acted("press")

    @_traced("check")
    async def check(self, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Tick a checkbox or radio button."""
        await self._check().check(timeout=timeout_ms)
        await self._acted("check")

    @_traced("set_checked")
    async def set_checked(self, checked: bool, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """Tick or untick a checkbox (or tick a radio button)."""
        await self._check().set_checked(bool(checked), timeout=timeout_ms)
        await self._acted("check" if checked else "uncheck")

    @_traced("select")
    async def select(self, *values: str, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> list[str]:
        """Choose options of a ``<select>`` (each string matches an option's value or its
        text); return the values now selected."""
        chosen = list(await self._check().select_option(list(values), timeout=timeout_ms))
        await self._acted("select")
        return chosen

    @_traced("wait_for")
    async def wait_for(
        self, *, state: WaitState = "visible", timeout_ms: float = DEFAULT_TIMEOUT_MS
    ) -> None:
        """Wait until the element reaches ``state``."""
        await self._check().wait_for(state=state, timeout=timeout_ms)

    @_traced("evaluate")
    async def evaluate(self, expression: str, arg: Any = None) -> Any:
        """Run JavaScript with the element as its first argument (in the page; guarded)."""
        return await self._check().evaluate(check_text(expression, "expression"), arg)

    def __repr__(self) -> str:
        return f"<TabLocator of {self._tab.conversation}>"


async def _javascript_locator(loc: Any) -> str | None:
    """The driver's own JavaScript for ``loc``'s element (what ``normalize()`` asks it for
    in Python). Python's API asks only for Python, so this is the driver's call itself;
    ``None`` when this Playwright has no such call (the caller then writes Python)."""
    try:
        impl = loc._impl_obj
        result = await impl._frame._channel.resolveSelector(
            selector=impl._selector, sdkLanguage="javascript", timeout=0
        )
        return str(result["locatorCode"])
    except (AttributeError, TypeError, KeyError):
        return None
