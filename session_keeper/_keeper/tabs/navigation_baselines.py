"""Navigation baselines: the jar as a ``tab(url)`` navigation left it, read beside what
follows instead of before it.

A navigation's baseline (see :mod:`session_keeper._model.evidence`) is what a sign-in
that starts on the page must change to count as evidence. Only ``record_login`` ever
compares against it, so nothing needs it the moment the navigation returns: the read
is sent as the navigation ends (the caller's next command to the browser follows it on
the same connection), and a caller of :meth:`NavigationBaselines.settle` (every
reader of baselines) waits for the reads already sent. No CDP event reports a change
a script makes to the jar, so the read itself stays; it only leaves the critical path
of the navigation, which its caller's next step (a snapshot, a job's page work) shares
with it.

A read answered by a browser that is no longer the live one, or that failed because
the browser went away, is dropped: every baseline of a dead browser is forgotten with
it when the next one starts.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import SessionKeeperError

if TYPE_CHECKING:
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._model.evidence import EvidenceTracker

__all__ = ["NavigationBaselines"]

log = scrubbing_logger("session_keeper.keeper")


class NavigationBaselines(Generic[PageT]):
    """The navigation baselines being read (see the module), applied in the order sent."""

    def __init__(self, live: KeeperLive[PageT], evidence: EvidenceTracker) -> None:
        self._live = live
        self._evidence = evidence
        self._pending: set[asyncio.Task[None]] = set()
        self._last: asyncio.Task[None] | None = None

    async def read(
        self, session: BrowserSession[PageT], generation: int, conversation: str, url: str
    ) -> None:
        """Send the jar read for ``conversation``'s navigation that ended on ``url``.

        Returns after one pass of the event loop, not once answered: the read is under
        way by then (a backend that answers without waiting has answered).
        """
        task = asyncio.ensure_future(self._read(session, generation, conversation, url, self._last))
        self._last = task
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        await asyncio.sleep(0)

    async def _read(
        self,
        session: BrowserSession[PageT],
        generation: int,
        conversation: str,
        url: str,
        before: asyncio.Task[None] | None,
    ) -> None:
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
            self._evidence.navigated(conversation, url, jar)

    async def settle(self) -> None:
        """Wait until every read already sent is applied (or dropped)."""
        while self._pending:
            await asyncio.wait(list(self._pending))
