"""How the Guard answers a refused navigation: its two local pages (the block page and the
holding page) and which document a refused page keeps, so the mechanics hold only mechanics.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from session_keeper._leaf.blocks import BlockRecord
from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    pass

__all__ = ["HOLD_MARK", "HOLD_PAGE", "MainFrameAnswers", "block_page"]

log = scrubbing_logger("session_keeper.guard")

#: ``<meta name=...>`` that marks the holding page.
HOLD_MARK: Final = "session-keeper-hold"

# The Guard's own pages name an inline icon: otherwise Chromium asks the refused site
# for /favicon.ico (with its cookies) on the tab's behalf.
_NO_ICON: Final = "<link rel='icon' href='data:,'>"

HOLD_PAGE: Final = (
    "<!doctype html><html><head><meta charset='utf-8'>"
    f"<meta name='{HOLD_MARK}' content='1'>{_NO_ICON}<title>Checking…</title></head>"
    "<body><p>session_keeper is checking this window before it loads.</p></body></html>"
)


def block_page(reason: str) -> str:
    """The local 403 page that names why a request was refused."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{_NO_ICON}"
        "<title>Blocked by session_keeper</title></head><body><h1>Blocked by session_keeper</h1>"
        f"<p id='session-keeper-blocked'>{html.escape(reason)}</p></body></html>"
    )


class MainFrameAnswers:
    """How a refused top-level navigation is answered, and each page's refusals.

    The local 403 page must not replace a document the page already shows: Chromium's
    Local Network Access counts a fulfilled page as *public*, so every later request
    of that tab to a loopback or private address fails, whatever the grants
    (measured: ``TypeError: Failed to fetch``). Such a navigation is aborted instead
    (``net::ERR_ABORTED``): the page keeps its document and the navigation call
    raises, which the keeper turns into :class:`~session_keeper.errors.NavigationBlocked`
    with the refusal kept here. A tab with nothing worth keeping (``about:blank``,
    or a page the Guard itself put there) gets the 403 page that names the reason.
    """

    def __init__(self) -> None:
        # The URL of the local page (holding or 403) each page's main frame shows.
        self._local: dict[Any, str] = {}
        # The URL of a local page each page was just answered with, until it commits.
        self._pending: dict[Any, str] = {}
        self._tracked: set[Any] = set()
        # Refused main-frame navigations, oldest first: (page, record).
        self._refused: list[tuple[Any, BlockRecord]] = []

    def track(self, page: Any) -> None:
        """Follow what ``page``'s main frame commits (idempotent)."""
        if page in self._tracked:
            return
        self._tracked.add(page)
        page.on("framenavigated", lambda frame: self._committed(page, frame))

    def _committed(self, page: Any, frame: Any) -> None:
        if frame.parent_frame is not None:
            return
        url = _without_fragment(str(frame.url))
        if self._pending.pop(page, None) == url:
            self._local[page] = url
        else:
            self._local.pop(page, None)  # a real document now: worth keeping

    def replaces_document(self, page: Any) -> bool:
        """Whether a refusal of ``page``'s navigation may show the 403 page (else: abort)."""
        url = _without_fragment(str(page.url))
        return url in ("", "about:blank") or self._local.get(page) == url

    def answering_locally(self, page: Any, url: str) -> None:
        """The Guard answers ``page``'s navigation to ``url`` with a page of its own."""
        self.track(page)
        self._pending[page] = _without_fragment(url)

    def shows_local(self, page: Any, url: str) -> None:
        """``page`` already shows a page of the Guard's own at ``url`` (a held popup).

        Playwright may still report that page's commit after this (measured under
        load): the report is expected, so it does not count as a real document.
        """
        self._local[page] = self._pending[page] = _without_fragment(url)

    def reported(self, page: Any) -> None:
        """Every commit of ``page`` so far has been reported: expect none any more."""
        self._pending.pop(page, None)

    def refused(self, page: Any, block: BlockRecord) -> None:
        """``page``'s top-level navigation (or one of its redirect hops) was refused."""
        self._refused.append((page, block))
        if len(self._refused) > _REFUSALS_KEPT:
            del self._refused[: len(self._refused) - _REFUSALS_KEPT]

    def last_refusal(self, page: Any, recent: Sequence[BlockRecord]) -> BlockRecord | None:
        """The newest refusal of a top-level navigation of ``page`` among ``recent`` blocks."""
        ids = {id(b) for b in recent}
        for refused_page, block in reversed(self._refused):
            if refused_page is page and id(block) in ids:
                found: BlockRecord = block
                return found
        return None

    def forget(self, page: Any) -> None:
        """``page`` closed."""
        self._local.pop(page, None)
        self._pending.pop(page, None)
        self._tracked.discard(page)
        self._refused = [r for r in self._refused if r[0] is not page]

    def reset(self) -> None:
        """A new browser."""
        self._local.clear()
        self._pending.clear()
        self._tracked.clear()
        self._refused.clear()


#: Refusals kept for the navigation calls that ask about them (newest are what matter).
_REFUSALS_KEPT: Final = 256


def _without_fragment(url: str) -> str:
    return url.split("#", 1)[0]
