"""Tabs: one page per conversation, served one call at a time, and where each one is.

Calls for one conversation queue on a :class:`KeyedLock` (so concurrent callers share
one page); calls for different conversations run concurrently. A navigation tells
the login-evidence tracker the site's cookies as it left them (see
:mod:`session_keeper._model.evidence`), read beside the caller's next step rather than
before it, or when the conversation next acts (:class:`NavigationBaselines`).

Where a tab is, is what the browser last said: with a session that reports committed
navigations (:class:`~session_keeper._browser.backend.NavigationObserving`), every
navigation the tab's main frame commits — ``tab(url)``, a form, a link, a script,
``history.pushState``, a redirect, back and forward — moves the tab's last URL, the one
a lost tab is named and reopened at. Only web URLs (``http:``, ``https:``) count: a tab
that went to ``about:blank``, an error page or any other non-web URL keeps its last web
URL (a restart cannot reopen the rest, and they show nothing of a site), and neither
does a page the Guard answered with its 403. A change is saved with the tab's row in the
background, at most once a second (see :meth:`KeeperPersistence.save_url_soon`): a
``pushState`` per keystroke costs no write each.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of, target_of
from session_keeper._keeper.guard_link.navigation_guard import (
    Guarded,
    blocked_error,
    navigation_block,
    navigation_mark,
    navigation_refusal,
    refuse_off_web,
)
from session_keeper._keeper.state.live import Tab
from session_keeper._keeper.tabs.navigation_baselines import NavigationBaselines
from session_keeper._model.facts import ClosedTab, TabView
from session_keeper._model.grants import check_name
from session_keeper._model.web import WEB_SCHEMES, scheme_of
from session_keeper._util.keyed_lock import KeyedLock
from session_keeper.errors import InvalidArgument, NavigationError

if TYPE_CHECKING:
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive
    from session_keeper._model.evidence import EvidenceTracker


class Tabs(Generic[PageT]):
    """Each conversation's page in the live browser (see the module)."""

    def __init__(
        self,
        live: KeeperLive[PageT],
        persist: KeeperPersistence[PageT],
        evidence: EvidenceTracker,
        *,
        tab_idle_timeout: timedelta | None,
        owner: Guarded,
    ) -> None:
        # The facade: the Guard that watches it is looked up by it.
        self._owner = owner
        self._live = live
        self._persist = persist
        #: The jar reads that give each navigation its login-evidence baseline.
        self.baselines: NavigationBaselines[PageT] = NavigationBaselines(live, evidence)
        self._tab_idle_timeout = tab_idle_timeout
        self._tab_locks = KeyedLock()

    @property
    def held_locks(self) -> int:
        """Conversations with a tab call in flight or queued (for the testing mode)."""
        return len(self._tab_locks)

    def has_tab(self, conversation: str) -> bool:
        """Whether the conversation has an open tab in the live browser (no round trip)."""
        tab = self._live.tabs.get(check_name(conversation, "conversation"))
        s = self._live.session
        return (
            tab is not None
            and tab.page is not None
            and s is not None
            and s.alive
            and s.page_is_open(tab.page)
        )

    def current_url(self, conversation: str) -> str | None:
        """See :meth:`SessionKeeper.current_url` (the public contract)."""
        tab = self._live.tabs.get(check_name(conversation, "conversation"))
        s = self._live.session
        if tab is None or tab.page is None or s is None or not s.alive:
            return None
        return s.page_url(tab.page) if s.page_is_open(tab.page) else None

    async def observe(self, session: BrowserSession[PageT], generation: int) -> None:
        """A launch hook: hear every navigation ``session``'s pages commit (no round trip)."""
        del generation  # the session's own: a callback of an older one is ignored below
        # A session that reports no navigations calls nobody: a tab is where it was sent.
        capabilities_of(session).navigation.on_navigated(
            lambda conversation, page, url: self._committed(session, conversation, page, url)
        )

    def _committed(
        self, session: BrowserSession[PageT], conversation: str, page: PageT, url: str
    ) -> None:
        """The tab's main frame committed ``url``: it is where the tab is now (see the module)."""
        tab = self._live.tabs.get(conversation)
        if tab is None or tab.page is not page or self._live.session is not session:
            return  # a popup, a page being opened, or a browser the keeper left
        since, tab.block_mark = tab.block_mark, navigation_mark(self._owner)
        if scheme_of(url) not in WEB_SCHEMES:
            return  # about:blank, an error page: the last web URL stands
        if navigation_block(self._owner, conversation, url, since) is not None:
            return  # the Guard's 403 page, not where the tab is
        if url == tab.last_url:
            return
        tab.last_url = url
        tab.verified_at = self._live.clock.now()
        self._persist.save_url_soon()

    def last_verified_url(self, conversation: str) -> str | None:
        """Where the conversation's tab last was on the web in the live generation (see
        the module)."""
        tab = self._live.tabs.get(check_name(conversation, "conversation"))
        return tab.last_url if tab else None

    async def tab(self, conversation: str, url: str | None = None, *, hold: bool = False) -> PageT:
        """The conversation's page; navigate it first when ``url`` is given.

        See :meth:`SessionKeeper.unguarded_page` (the public contract: one page per
        conversation, calls for it served one at a time in order, and what it raises).
        The URL it ends on is remembered as the tab's last URL (so is every later commit
        of its main frame: see the module), and is what a lost tab reports.

        ``hold``: the navigation is a handle's (a :class:`~session_keeper.ConversationTab`),
        whose jar read may wait for the conversation's next act (see
        :class:`NavigationBaselines`); otherwise it is sent as the navigation ends.
        """
        conversation = check_name(conversation, "conversation")
        if url is not None:
            check_name(url, "url")
        session = self._live.session_for(conversation)  # fail fast, before queueing
        if url is None and not self._tab_locks.busy(conversation) and self._persist.writes.settled:
            # The common turn: nobody else is in this conversation's queue and its page is
            # open. Taking the free lock would not suspend either, so this is the same
            # call served at once, without the lock's bookkeeping.
            tab = self._live.tabs.get(conversation)
            if tab is not None and tab.page is not None and session.page_is_open(tab.page):
                tab.last_used = self._live.last_used = self._live.clock.monotonic()
                return tab.page
        async with self._tab_locks.hold(conversation):
            return await self._tab(conversation, url, hold)

    async def _tab(self, conversation: str, url: str | None, hold: bool = False) -> PageT:
        session = self._live.session_for(conversation)
        await self._persist.writes.settle()
        now = self._live.clock.now()
        mono = self._live.clock.monotonic()
        self._live.last_used = mono
        generation = self._live.generation
        tab = self._live.tabs.get(conversation)
        if tab is None or tab.page is None or not session.page_is_open(tab.page):
            page = await session.open_page(conversation)
            self._live.still_current(session, generation)
            tab = Tab(
                page=page,
                generation=generation,
                last_url=None,
                verified_at=now,
                last_used=mono,
                target_id=target_of(session, page),
            )
            tab.block_mark = navigation_mark(self._owner)
            self._live.conversations.set_tab(conversation, tab)
            self._persist.save_soon()
        assert tab.page is not None
        tab.last_used = mono
        if url is not None:
            off_web = await refuse_off_web(self._owner, conversation, url)
            if off_web is not None:
                raise off_web
            since = navigation_mark(self._owner)
            try:
                final = await session.goto(tab.page, url)
            except NavigationError:
                # The Guard aborts a refused navigation of a page that shows a document.
                refused = navigation_refusal(self._owner, tab.page, since)
                if refused is None:
                    raise
                raise blocked_error(refused) from None
            self._live.still_current(session, generation)
            # The site's cookies as this navigation left them: a sign-in starting
            # here must change one of them to count as evidence. Read beside the
            # caller's next step, or held until the conversation's next act (see
            # NavigationBaselines).
            if hold:
                await self.baselines.hold(session, generation, conversation, final)
            else:
                await self.baselines.read(session, generation, conversation, final)
            if navigation_block(self._owner, conversation, final, since) is not None:
                # A page the Guard answered with its 403 is not where the tab is.
                return tab.page
            tab.last_url = final
            tab.verified_at = self._live.clock.now()
            self._persist.save_url_soon()
        return tab.page

    def views(self) -> tuple[TabView, ...]:
        """Every conversation's tab the keeper knows, open or remembered (no round trip)."""
        mono = self._live.clock.monotonic()
        views = []
        for conversation, tab in sorted(self._live.tabs.items()):
            remembered = tab.page is None
            views.append(
                TabView(
                    conversation=conversation,
                    open=self.has_tab(conversation),
                    url=self.current_url(conversation),
                    last_verified_url=tab.last_url,
                    verified_at=tab.verified_at,
                    generation=tab.generation,
                    idle=None if remembered else timedelta(seconds=max(0.0, mono - tab.last_used)),
                )
            )
        return tuple(views)

    def mark_verified(self, conversation: str) -> str:
        """Record the tab's current URL as verified (the agent checked the page); return it.

        Saved as a navigation is, at most once a second (``save_url_soon``): a job or a
        tool that verifies every page it reads made a keeper write per page, beside
        the page's own durable commit, for a stamp that says where the tab is.
        """
        conversation = check_name(conversation, "conversation")
        session = self._live.session_for(conversation)
        tab = self._live.tabs.get(conversation)
        if tab is None or tab.page is None or not session.page_is_open(tab.page):
            raise InvalidArgument(f"{conversation} has no open tab")
        tab.last_url = session.page_url(tab.page)
        tab.verified_at = self._live.clock.now()
        self._persist.save_url_soon()
        return tab.last_url

    async def close_idle_tabs(self, session: BrowserSession[PageT], mono: float) -> list[ClosedTab]:
        assert self._tab_idle_timeout is not None
        limit = self._tab_idle_timeout.total_seconds()
        closed: list[ClosedTab] = []
        for conversation, tab in list(self._live.tabs.items()):
            idle = mono - tab.last_used
            if idle <= limit:
                continue
            if tab.page is not None and session.page_is_open(tab.page):
                await session.close_page(tab.page)
            self._live.conversations.set_tab(conversation, None)
            closed.append(
                ClosedTab(
                    conversation=conversation, last_url=tab.last_url, idle=timedelta(seconds=idle)
                )
            )
            self._live.pending_for(conversation, restarted=False).add_loss(
                tab.as_lost(conversation, "idle")
            )
        return closed
