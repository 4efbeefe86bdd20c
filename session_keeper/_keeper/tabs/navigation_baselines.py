"""Navigation baselines: the jar as a ``tab(url)`` navigation left it, read when it can
first matter instead of before the navigation returns.

A navigation's baseline (see :mod:`session_keeper._model.evidence`) is what a sign-in
that starts on the page must change to count as evidence. Only ``record_login`` ever
compares against it (and only without a :meth:`begin_login` of the site, whose own
jar read wins), so nothing needs it the moment the navigation returns. No CDP event
reports a change a script makes to the jar, so the read itself stays; what moves is
when it is sent:

- **Read as the navigation ends** (:meth:`NavigationBaselines.read`) for a raw page
  (``unguarded_page``: its caller acts on the page directly) and for a browser a person
  may drive (headed, or one the keeper attached to): the caller's next command to the
  browser follows the read on the same connection.
- **Held until the conversation acts** (:meth:`NavigationBaselines.hold`) for a
  :class:`~session_keeper.ConversationTab` navigation in a browser only the keeper's
  handles drive (headless, launched by its backend): there a sign-in can only be typed,
  clicked, pressed or scripted through the keeper's handles, and each such act (of any
  conversation: the jar is shared) sends the held reads first
  (:meth:`NavigationBaselines.acting`), as does handing out a raw page and every reader
  of baselines (:meth:`NavigationBaselines.settle`). Reads that only look (a snapshot, a title, a
  screenshot) and further navigations send nothing: a navigate-and-look agent makes no
  jar read at all, and a navigation to the same host replaces the one held before.

A held read is sent later than the navigation ended, never after an act of the
conversation: what the page's own scripts set meanwhile is in the baseline (set before
any sign-in, so no evidence of one), and what a sign-in sets is not. A read answered by
a browser that is no longer the live one, or that failed because the browser went away,
is dropped: every baseline of a dead browser is forgotten with it when the next one
starts.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic
from urllib.parse import urlsplit

import attrs

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._model.evidence import MAX_HOSTS_PER_CONVERSATION
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import SessionKeeperError

if TYPE_CHECKING:
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._model.evidence import EvidenceTracker

__all__ = ["NavigationBaselines"]

log = scrubbing_logger("session_keeper.keeper")


@attrs.define
class _Held(Generic[PageT]):
    """A conversation's navigations whose jar read waits for its next act."""

    session: BrowserSession[PageT]
    generation: int
    #: host -> the URL a navigation to it ended on, oldest first (the newest host last).
    urls: dict[str, str] = attrs.field(factory=dict)


class NavigationBaselines(Generic[PageT]):
    """The navigation baselines being read or held (see the module), applied in order."""

    def __init__(self, live: KeeperLive[PageT], evidence: EvidenceTracker) -> None:
        self._live = live
        self._evidence = evidence
        self._pending: set[asyncio.Task[None]] = set()
        self._last: asyncio.Task[None] | None = None
        self._held: dict[str, _Held[PageT]] = {}

    async def read(
        self, session: BrowserSession[PageT], generation: int, conversation: str, url: str
    ) -> None:
        """Send the jar read for ``conversation``'s navigation that ended on ``url`` (and
        for every navigation still held).

        Returns after one pass of the event loop, not once answered: the read is under
        way by then (a backend that answers without waiting has answered).
        """
        self._hold(session, generation, conversation, url)
        await self.acting()

    async def hold(
        self, session: BrowserSession[PageT], generation: int, conversation: str, url: str
    ) -> None:
        """Hold the jar read of ``conversation``'s navigation that ended on ``url`` until
        the conversation acts (see the module); read it now in a browser a person may
        drive."""
        if not capabilities_of(session).unattended:
            await self.read(session, generation, conversation, url)
            return
        self._hold(session, generation, conversation, url)

    def _hold(
        self, session: BrowserSession[PageT], generation: int, conversation: str, url: str
    ) -> None:
        held = self._held.get(conversation)
        if held is None or held.session is not session or held.generation != generation:
            # A read held for a browser that is gone has nothing left to read.
            held = self._held[conversation] = _Held(session, generation)
        host = (urlsplit(url).hostname or "").lower()
        held.urls.pop(host, None)  # re-insert: the newest host is last
        held.urls[host] = url
        while len(held.urls) > MAX_HOSTS_PER_CONVERSATION:  # the tracker keeps no more
            del held.urls[next(iter(held.urls))]

    async def acting(self) -> None:
        """A conversation is about to act on its pages (or a raw page goes out): send every
        held read first, one per browser. Every one, not only that conversation's: the
        jar is shared, and what one conversation's sign-in sets is a change since another's
        navigation (which :meth:`SessionKeeper.record_login` tells apart from that
        conversation's own). No round trip when none is held."""
        if not self._held:
            return
        self._send_held()
        await asyncio.sleep(0)

    def acting_soon(self) -> None:
        """As :meth:`acting`, for a caller that cannot wait: the read is sent on the event
        loop's next pass (before any command the caller awaits next reaches the browser)."""
        if self._held:
            self._send_held()

    def _send_held(self) -> None:
        batch = list(self._held.items())
        self._held.clear()
        self._send(batch)

    def _send(self, batch: list[tuple[str, _Held[PageT]]]) -> None:
        """One jar read per browser for the navigations of ``batch``."""
        by_session: dict[int, list[tuple[str, _Held[PageT]]]] = {}
        for item in batch:
            by_session.setdefault(id(item[1].session), []).append(item)
        for items in by_session.values():
            task = asyncio.ensure_future(self._read(items, self._last))
            self._last = task
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _read(
        self, items: list[tuple[str, _Held[PageT]]], before: asyncio.Task[None] | None
    ) -> None:
        session, generation = items[0][1].session, items[0][1].generation
        try:
            jar = await session.cookies()
        except SessionKeeperError:
            return  # the browser went away: so did its baselines
        except Exception:
            log.exception("reading the jar after a navigation failed")
            return
        if before is not None and not before.done():
            # The newest navigation's host is the last one the tracker holds.
            await asyncio.wait([before])
        live = self._live
        if live.session is session and live.generation == generation and session.alive:
            for conversation, held in items:
                for url in held.urls.values():
                    self._evidence.navigated(conversation, url, jar)

    async def settle(self) -> None:
        """Send every held read, then wait until every read sent is applied (or dropped)."""
        self.acting_soon()
        while self._pending:
            await asyncio.wait(list(self._pending))
