"""How a navigation ends: when the page is usable, not when its last image arrives.

A page's ``load`` waits for every image, font, script and iframe; one that never finishes
(a stalled tracker, a slow CDN) holds ``load`` back for good, and a navigation waiting for it
fails after its whole timeout though the page was readable from the start. So a session
navigates to ``domcontentloaded`` (the document is parsed, its deferred scripts have run) and
then waits for ``load`` at most ``load_timeout`` seconds, as Playwright MCP does (5 s):
whatever a page does in its ``load`` handler usually happens, and nothing is stuck behind it.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from playwright.async_api import Page

from session_keeper.errors import (
    BrowserError,
    BrowserGoneError,
    InvalidArgument,
    InvalidArgumentType,
    SessionKeeperError,
)

__all__ = ["DEFAULT_LOAD_TIMEOUT", "PlaywrightCall", "check_load_timeout", "navigate"]

T = TypeVar("T")

#: Seconds a navigation waits for ``load`` once the document is ready (Playwright MCP's cap).
DEFAULT_LOAD_TIMEOUT = 5.0


class PlaywrightCall(Protocol):
    """A session's way to run one Playwright call raced against the browser's death:
    :class:`BrowserGoneError` for a dead browser or closed page, ``failed(reason)`` (a plain
    :class:`BrowserError` by default) for any other failure."""

    def __call__(
        self,
        make: Callable[[], Awaitable[T]],
        what: str,
        failed: Callable[[str], SessionKeeperError] | None = None,
    ) -> Awaitable[T]: ...


def check_load_timeout(value: object) -> float | None:
    """``value`` as a backend's ``load_timeout`` (seconds, or ``None`` to wait for ``load``
    as long as the navigation may take); a typed error for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentType("load_timeout must be a number of seconds or None")
    if not math.isfinite(value) or value < 0:
        raise InvalidArgument("load_timeout must be a finite number of seconds, 0 or more")
    return float(value)


async def navigate(
    call: PlaywrightCall,
    page: Page,
    url: str,
    *,
    load_timeout: float | None,
    failed: Callable[[str], SessionKeeperError],
    browser_alive: Callable[[], bool],
) -> str:
    """Navigate ``page`` to ``url`` through ``call`` and return the URL it ended on.

    A failed navigation raises what ``call`` makes of it (``failed(reason)``); a ``load``
    that does not come within ``load_timeout`` (or a page that navigated on meanwhile) is
    not a failure. Only a browser that died while waiting raises :class:`BrowserGoneError`.
    """
    if load_timeout is None:
        await call(lambda: page.goto(url), "navigation", failed)
        return page.url
    await call(lambda: page.goto(url, wait_until="domcontentloaded"), "navigation", failed)
    if page.is_closed():
        return page.url
    timeout_ms = load_timeout * 1000
    try:
        await call(lambda: page.wait_for_load_state("load", timeout=timeout_ms), "waiting for load")
    except BrowserGoneError:
        if browser_alive():
            return page.url  # only this page closed: the caller's next use of it says so
        raise
    except BrowserError:
        pass
    return page.url
