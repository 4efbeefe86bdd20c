"""The live view: a tab's screencast out, a person's mouse, keyboard and paste in (CDP).

Frames come from ``Page.startScreencast`` (JPEG, acknowledged one by one so Chromium
paces itself); input goes in through ``Input.dispatchMouseEvent``,
``Input.dispatchKeyEvent`` and ``Input.insertText`` on the same CDP session. Messages
from the browser are checked field by field: anything malformed is dropped, never
passed on to CDP.

The page streamed is a sign-in page of the keeper's, never the conversation's tab (the
model drives that one; see :meth:`~session_keeper.SessionKeeper.sign_in_tab`). A sign-in
often opens an OAuth or SSO popup: the view lists the sign-in page, then the popups it
opened, shows a popup as soon as one opens and the sign-in page again when it closes,
and lets the person pick a page (``{"type": "show", "page": <id>}``). Input always goes
to the page shown; the page list is sent as ``{"type": "pages", "pages": [...],
"shown": <id>}``, each page of kind ``"sign-in"`` or ``"popup"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from session_keeper._util.redact import redact_url

__all__ = ["LiveView", "replay_act", "translate_input"]

_MOUSE_TYPES = frozenset({"mousePressed", "mouseReleased", "mouseMoved", "mouseWheel"})
_BUTTONS = frozenset({"none", "left", "middle", "right"})
_KEY_TYPES = frozenset({"keyDown", "keyUp"})
#: Coordinates beyond this (CSS pixels) are not a real viewport.
_MAX_COORD = 20_000.0
#: The most a paste may insert at once.
MAX_PASTE = 10_000
#: Pauses (s) between tries to start a page's screencast; about 3 s in all.
_ATTACH_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]


def _number(value: object, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) and low <= f <= high else None


def _int(value: object, low: int, high: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def _short(value: object, limit: int) -> str | None:
    return value if isinstance(value, str) and len(value) <= limit else None


def translate_input(msg: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """A person's input message as ``(CDP method, params)``; ``None`` when malformed."""
    kind = msg.get("type")
    if kind == "mouse":
        action = msg.get("action")
        x = _number(msg.get("x"), 0, _MAX_COORD)
        y = _number(msg.get("y"), 0, _MAX_COORD)
        button = msg.get("button", "none")
        clicks = _int(msg.get("clickCount", 0), 0, 3)
        modifiers = _int(msg.get("modifiers", 0), 0, 15)
        if action not in _MOUSE_TYPES or x is None or y is None or button not in _BUTTONS:
            return None
        if clicks is None or modifiers is None:
            return None
        params: dict[str, Any] = {
            "type": action,
            "x": x,
            "y": y,
            "button": button,
            "clickCount": clicks,
            "modifiers": modifiers,
        }
        if action == "mouseWheel":
            dx = _number(msg.get("deltaX", 0), -10_000, 10_000)
            dy = _number(msg.get("deltaY", 0), -10_000, 10_000)
            if dx is None or dy is None:
                return None
            params.update(deltaX=dx, deltaY=dy, button="none")
        return "Input.dispatchMouseEvent", params
    if kind == "key":
        action = msg.get("action")
        key = _short(msg.get("key"), 32)
        code = _short(msg.get("code", ""), 32)
        text = _short(msg.get("text", ""), 4)
        key_code = _int(msg.get("keyCode", 0), 0, 255)
        modifiers = _int(msg.get("modifiers", 0), 0, 15)
        if action not in _KEY_TYPES or key is None or code is None or text is None:
            return None
        if key_code is None or modifiers is None:
            return None
        # A key that types something is a keyDown with text; others are raw (as CDP wants).
        cdp_type = "keyUp" if action == "keyUp" else ("keyDown" if text else "rawKeyDown")
        params = {
            "type": cdp_type,
            "key": key,
            "code": code,
            "windowsVirtualKeyCode": key_code,
            "nativeVirtualKeyCode": key_code,
            "modifiers": modifiers,
        }
        if text and action == "keyDown":
            params.update(text=text, unmodifiedText=text)
        return "Input.dispatchKeyEvent", params
    if kind == "paste":
        text = _short(msg.get("text"), MAX_PASTE)
        if not text:
            return None
        return "Input.insertText", {"text": text}
    return None


def replay_act(msg: Mapping[str, Any]) -> str | None:
    """The act a person's input completes, as a replay names it (``None``: not one):
    a click released, a paste, Enter or Tab let go — not every key or mouse move."""
    kind, action = msg.get("type"), msg.get("action")
    if kind == "mouse" and action == "mouseReleased":
        return "live:click"
    if kind == "paste":
        return "live:paste"
    if kind == "key" and action == "keyUp" and msg.get("key") in ("Enter", "Tab"):
        return "live:key"
    return None


class LiveView:
    """One person's live view of one conversation: the shown page's frames out, input in.

    ``page`` is the conversation's sign-in page; ``popups()`` (no round trip) lists the
    pages opened from it, as the keeper attributes them
    (:meth:`SessionKeeper.unguarded_sign_in_pages`).
    """

    def __init__(
        self, page: Page, send: Send, *, popups: Callable[[], Sequence[Page]] | None = None
    ) -> None:
        self._main = page
        self._popups = popups
        self._send = send
        self._shown = page
        self._cdp: CDPSession | None = None
        self._ids: dict[Page, str] = {}
        self._watched: list[tuple[Page, str, Callable[..., None]]] = []
        # Switching pages and sending input never interleave: input reaches the page shown.
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._latest: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1)
        self._pump: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def shown(self) -> Page:
        """The page the person sees now (and whose input they send)."""
        return self._shown

    def pages(self) -> list[Page]:
        """The open pages shown: the sign-in page first, then its popups, oldest first."""
        popups = list(self._popups()) if self._popups is not None else []
        every = [self._main, *(p for p in popups if p is not self._main)]
        return [p for p in every if not p.is_closed()]

    async def start(self) -> None:
        """Attach to the newest page (a popup open already is what the person came
        for), start its screencast, and send the page list."""
        self._pump = asyncio.create_task(self._forward())
        async with self._lock:
            pages = self.pages()
            for page in pages:
                self._watch(page)
            await self._show(pages[-1] if pages else self._main)
            await self._announce()

    def _id(self, page: Page) -> str:
        return self._ids.setdefault(page, f"p{len(self._ids)}")

    def _watch(self, page: Page) -> None:
        if any(p is page for p, _, _ in self._watched):
            return

        def on_popup(popup: Page) -> None:
            self._later(self._follow(popup))

        def on_close(_: Page) -> None:
            self._later(self._closed(page))

        page.on("popup", on_popup)
        page.on("close", on_close)
        self._watched += [(page, "popup", on_popup), (page, "close", on_close)]

    def _later(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            with contextlib.suppress(PlaywrightError):
                await work

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, popup: Page) -> None:
        """A shown or listed page opened a popup: show it, if it is the conversation's."""
        async with self._lock:
            if self._stopped or not any(p is popup for p in self.pages()):
                return  # Not attributed to this conversation (or gone): never shown.
            self._watch(popup)
            await self._show(popup)
            await self._announce()

    async def _closed(self, page: Page) -> None:
        """A listed page closed: show the newest page left (the sign-in page at last)."""
        async with self._lock:
            if self._stopped:
                return
            if page is self._shown:
                pages = self.pages()
                await self._show(pages[-1] if pages else self._main)
            await self._announce()

    async def _show(self, page: Page) -> None:
        """Move the screencast (and the input) to ``page`` (``self._lock`` held).

        A popup that leaves ``about:blank`` for another site changes renderer process,
        and CDP refuses the screencast meanwhile ("Not attached to an active page"): the
        attach is tried again for a few seconds. A page that still refuses is shown
        without frames (and takes no input); "show" on it tries again.
        """
        old, self._cdp = self._cdp, None
        if old is not None:
            await self._detach(old)
        self._shown = page
        for pause in (*_ATTACH_PAUSES, None):
            if page.is_closed() or self._stopped:
                return
            try:
                await self._attach(page)
                return
            except PlaywrightError:
                if pause is None:
                    log.warning("live view: no screencast of %s", redact_url(page.url))
                    return
            await asyncio.sleep(pause)

    async def _attach(self, page: Page) -> None:
        cdp = await page.context.new_cdp_session(page)
        self._cdp = cdp  # before the first frame, which must be acknowledged
        try:
            cdp.on("Page.screencastFrame", lambda params: self._on_frame(cdp, page, params))
            size = page.viewport_size or await page.evaluate(
                "() => ({width: innerWidth, height: innerHeight})"
            )
            await cdp.send(
                "Page.startScreencast",
                {
                    "format": "jpeg",
                    "quality": 70,
                    "maxWidth": int(size["width"]),
                    "maxHeight": int(size["height"]),
                },
            )
        except BaseException:
            self._cdp = None
            await self._detach(cdp)
            raise

    async def _announce(self) -> None:
        listed = [
            {
                "id": self._id(p),
                "kind": "sign-in" if p is self._main else "popup",
                "url": redact_url(p.url),
            }
            for p in self.pages()
        ]
        await self._send({"type": "pages", "pages": listed, "shown": self._id(self._shown)})

    def _on_frame(self, cdp: CDPSession, page: Page, params: dict[str, Any]) -> None:
        if cdp is not self._cdp:
            return  # A late frame of a page no longer shown.
        task = asyncio.get_running_loop().create_task(self._ack(cdp, params["sessionId"]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        meta = params.get("metadata") or {}
        frame = {
            "type": "frame",
            "data": params["data"],
            "width": meta.get("deviceWidth"),
            "height": meta.get("deviceHeight"),
            "url": redact_url(page.url),
            "page": self._id(page),
        }
        # Only the newest frame matters to a person; an old one waiting is replaced.
        with contextlib.suppress(asyncio.QueueEmpty):
            if self._latest.full():
                self._latest.get_nowait()
        self._latest.put_nowait(frame)

    @staticmethod
    async def _ack(cdp: CDPSession, session_id: int) -> None:
        with contextlib.suppress(PlaywrightError):
            await cdp.send("Page.screencastFrameAck", {"sessionId": session_id})

    async def _forward(self) -> None:
        while True:
            frame = await self._latest.get()
            await self._send(frame)

    async def dispatch(self, msg: Mapping[str, Any]) -> bool:
        """Act on one message: show a listed page, or forward input to the page shown.
        ``False`` when it was malformed (or names no page of the conversation)."""
        if msg.get("type") == "show":
            wanted = msg.get("page")
            async with self._lock:
                page = next((p for p in self.pages() if self._ids.get(p) == wanted), None)
                if page is None or not isinstance(wanted, str):
                    return False
                if page is not self._shown or self._cdp is None:
                    await self._show(page)
                await self._announce()
            return True
        translated = translate_input(msg)
        if translated is None:
            return False
        method, params = translated
        async with self._lock:
            if self._cdp is None:
                return False
            try:
                await self._cdp.send(method, params)
            except PlaywrightError:
                # The page closed as the key arrived (the sign-in ended, the view was
                # closed): the key has nowhere to go, and the next page list says so.
                return True
        return True

    @staticmethod
    async def _detach(cdp: CDPSession) -> None:
        with contextlib.suppress(PlaywrightError):
            await cdp.send("Page.stopScreencast")
        with contextlib.suppress(PlaywrightError):
            await cdp.detach()

    async def stop(self) -> None:
        """Stop the screencast and detach (the pages may already be gone)."""
        self._stopped = True
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        for page, event, listener in self._watched:
            page.remove_listener(event, listener)
        self._watched.clear()
        async with self._lock:
            cdp, self._cdp = self._cdp, None
            if cdp is not None:
                await self._detach(cdp)
        for task in list(self._tasks):
            task.cancel()
