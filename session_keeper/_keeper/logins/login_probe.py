"""Asking a site's :data:`~session_keeper.LoginProbe` "still signed in, and as whom?", bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper.errors import InvalidArgumentType

__all__ = ["ask_probe"]


async def ask_probe(
    session: BrowserSession[PageT],
    probe: Callable[[PageT], Awaitable[str | None]],
    conversation: str,
    limit_s: float,
) -> str | None:
    """Run ``probe`` on a fresh page of ``conversation``, bounded by ``limit_s`` seconds.

    Returns the identity it sees (``None``: nobody signed in). Whatever the probe
    raises (and :class:`TimeoutError`) reaches the caller; the page is closed anyway.
    """
    page = await session.open_page(conversation)
    try:
        # Bounded: a hung probe must not hold its caller (and the keeper's lock) forever.
        identity = await asyncio.wait_for(probe(page), limit_s)
    finally:
        if session.alive and session.page_is_open(page):
            await session.close_page(page)
    if identity is not None and not isinstance(identity, str):
        raise InvalidArgumentType("a LoginProbe must return a str or None")
    return identity
