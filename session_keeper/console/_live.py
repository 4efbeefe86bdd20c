"""The live view: a tab's screencast out, a person's mouse, keyboard and paste in (CDP).

Frames come from ``Page.startScreencast`` (JPEG, acknowledged one by one so Chromium
paces itself); input goes in through ``Input.dispatchMouseEvent``,
``Input.dispatchKeyEvent`` and ``Input.insertText`` on the same CDP session. Messages
from the browser are checked field by field: anything malformed is dropped, never
passed on to CDP.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from session_keeper._redact import redact_url

__all__ = ["LiveView", "translate_input"]

_MOUSE_TYPES = frozenset({"mousePressed", "mouseReleased", "mouseMoved", "mouseWheel"})
_BUTTONS = frozenset({"none", "left", "middle", "right"})
_KEY_TYPES = frozenset({"keyDown", "keyUp"})
#: Coordinates beyond this (CSS pixels) are not a real viewport.
_MAX_COORD = 20_000.0
#: The most a paste may insert at once.
MAX_PASTE = 10_000

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


class LiveView:
    """One person's live view of one page: screencast frames out, input in."""

    def __init__(self, page: Page, send: Send) -> None:
        self._page = page
        self._send = send
        self._cdp: CDPSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._latest: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1)
        self._pump: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Attach to the page and start the screencast."""
        self._cdp = await self._page.context.new_cdp_session(self._page)
        self._cdp.on("Page.screencastFrame", self._on_frame)
        size = self._page.viewport_size or await self._page.evaluate(
            "() => ({width: innerWidth, height: innerHeight})"
        )
        self._pump = asyncio.create_task(self._forward())
        await self._cdp.send(
            "Page.startScreencast",
            {
                "format": "jpeg",
                "quality": 70,
                "maxWidth": int(size["width"]),
                "maxHeight": int(size["height"]),
            },
        )

    def _on_frame(self, params: dict[str, Any]) -> None:
        cdp = self._cdp
        if cdp is None:
            return
        task = asyncio.get_running_loop().create_task(self._ack(cdp, params["sessionId"]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        meta = params.get("metadata") or {}
        frame = {
            "type": "frame",
            "data": params["data"],
            "width": meta.get("deviceWidth"),
            "height": meta.get("deviceHeight"),
            "url": redact_url(self._page.url),
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
        """Forward one input message to the page; ``False`` when it was malformed."""
        translated = translate_input(msg)
        if translated is None or self._cdp is None:
            return False
        method, params = translated
        await self._cdp.send(method, params)
        return True

    async def stop(self) -> None:
        """Stop the screencast and detach (the page may already be gone)."""
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        cdp, self._cdp = self._cdp, None
        if cdp is not None:
            with contextlib.suppress(PlaywrightError):
                await cdp.send("Page.stopScreencast")
            with contextlib.suppress(PlaywrightError):
                await cdp.detach()
        for task in list(self._tasks):
            task.cancel()
