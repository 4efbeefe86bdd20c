"""SessionKeeper: the one object an agent asks "what is true about my browser now?".

A facade: the public methods and their documented guarantees live here; each concern
is a collaborator in its own module (see the class docstring and docs/architecture.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Self

from session_keeper._authorisation import Authorisation, BrowserView, Query, RestartPolicy
from session_keeper._backend import BrowserBackend, BrowserSession, Cookie, PageT, normalize_site
from session_keeper._borrows import (
    DEFAULT_REQUEST_TTL,
    ApproverKind,
    BorrowRequest,
    BorrowStatus,
)
from session_keeper._browser_lifetime import BrowserLifetime
from session_keeper._clock import Clock, SystemClock
from session_keeper._conversations import Conversations
from session_keeper._errors import BrowserError, InvalidArgument, InvalidArgumentType
from session_keeper._facts import (
    BrowserLost,
    Decision,
    LoginRecord,
    Lost,
    SweepReport,
    TabView,
    TurnFacts,
)
from session_keeper._fingerprint import Fingerprinter, load_fingerprint_key
from session_keeper._grant_desk import GrantDesk
from session_keeper._grants import DEFAULT_ACTIONS, Grant, GrantBook, check_name
from session_keeper._keeper_live import KeeperLive
from session_keeper._keeper_persistence import KeeperPersistence
from session_keeper._keeper_state import GenerationRecord
from session_keeper._login_evidence import EvidenceTracker, parse_session_cookies
from session_keeper._logins import PROBE_CONVERSATION, LoginProbe, Logins
from session_keeper._rebind import KeeperNamedBackend
from session_keeper._redact import remember_secrets, scrub_secrets, scrubbing_logger
from session_keeper._restarts import RestartAccounting
from session_keeper._sweeper import Sweeper, Sweeping, start_sweeper
from session_keeper._tabs import Tabs
from session_keeper._uses import Requester, arm_target, without_fragment
from session_keeper._validate import check_collection, check_duration, check_mapping

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from session_keeper._audit import AuditLog
    from session_keeper._handle import ConversationTab
    from session_keeper._secrets import Keyring
    from session_keeper._store import Store
    from session_keeper._vault import LoginVault

__all__ = ["PROBE_CONVERSATION", "LoginProbe", "RestartPolicy", "SessionKeeper"]

log = scrubbing_logger("session_keeper")


class SessionKeeper(Generic[PageT]):
    """Keeps a persistent browser honest for an agent with many conversations.

    Call :meth:`ensure` at the start of every turn. It relaunches a browser that
    died or idled out (once, however many callers are waiting) and tells each
    affected conversation, exactly once, that the browser restarted and what *it*
    lost, measured against the new browser's cookie jar.

    Use it as an async context manager; it closes the browser and any sweeper it
    started on exit.

    Durable writes have one owner. The synchronous methods that change durable state
    (:meth:`decide`, :meth:`admit`, :meth:`grant`, :meth:`revoke`,
    :meth:`approve_borrow`, :meth:`confirm_login`, :meth:`mark_verified`,
    :meth:`begin_takeover`, :meth:`end_takeover`) return at once; the keeper writes the
    change (its document, then the audit entries, in order) in one background task. A
    write that fails is kept, not dropped: the next awaited call (:meth:`ensure`,
    :meth:`tab`, :meth:`record_login`, :meth:`sweep`, :meth:`persist`, :meth:`aclose`)
    raises :class:`~session_keeper.UnsavedChanges`, and :meth:`persist` writes everything
    unsaved or raises. A change made with no running event loop is written by the next
    awaited call, before it does anything else. :attr:`unsaved` tells whether anything
    is not in the store yet.

    The keeper is a facade: each concern lives in its own collaborator, over one
    shared live state (``_keeper_live.KeeperLive``) — browser lifetime
    (``_browser_lifetime``), tabs (``_tabs``), logins (``_logins``), restart accounting
    (``_restarts``), conversations' news and end (``_conversations``), persistence
    (``_keeper_persistence``), authorisation (``_authorisation``), borrow requests
    (``_borrows``) and the sweeper (``_sweeper``).

    :meth:`decide`, :meth:`permits` and :meth:`admit` are three modes of one
    permission query (``_authorisation.Query``): ``decide`` counts a use and arms it,
    ``permits`` only looks, ``admit`` answers for one request leaving the browser
    (``dry_run`` spends nothing). :meth:`holds_grant` asks about grants alone.
    """

    def __init__(
        self,
        backend: BrowserBackend[PageT],
        *,
        clock: Clock | None = None,
        grants: Iterable[Grant] = (),
        idle_timeout: timedelta = timedelta(minutes=10),
        tab_idle_timeout: timedelta | None = None,
        conversation_idle_timeout: timedelta | None = None,
        actions: Iterable[str] = DEFAULT_ACTIONS,
        restart_policy: Mapping[str, RestartPolicy] | None = None,
        keep_logins_on_idle_close: bool = False,
        fingerprint_key: bytes | None = None,
        on_browser_lost: Callable[[BrowserLost], None] | None = None,
        store: Store | None = None,
        keeper_id: str = "default",
        login_probes: Mapping[str, LoginProbe[PageT]] | None = None,
        keyring: Keyring | None = None,
        audit: AuditLog | None = None,
        vault: LoginVault | None = None,
        session_cookies: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        for name, value in (
            ("idle_timeout", idle_timeout),
            ("tab_idle_timeout", tab_idle_timeout),
            ("conversation_idle_timeout", conversation_idle_timeout),
        ):
            if value is None and name != "idle_timeout":
                continue
            if not isinstance(value, timedelta):
                raise InvalidArgumentType(f"{name} must be a timedelta")
            if value <= timedelta(0):
                raise InvalidArgument(f"{name} must be positive")
        self._clock: Clock = clock if clock is not None else SystemClock()
        action_list = check_collection(actions, "actions")
        for a in action_list:
            check_name(a, "action")
        known = frozenset(action_list)
        grant_book = GrantBook(known)
        policy: dict[str, RestartPolicy] = dict.fromkeys(known, "stop")
        policies = check_mapping({} if restart_policy is None else restart_policy, "restart_policy")
        for action, p in policies.items():
            grant_book.check_action(action)
            if p not in ("stop", "relogin"):
                raise InvalidArgument(f"restart policy for {action!r} must be 'stop' or 'relogin'")
            policy[action] = p
        fingerprinter = Fingerprinter(load_fingerprint_key(fingerprint_key))
        probes = {
            normalize_site(check_name(site, "site")): probe
            for site, probe in check_mapping(
                {} if login_probes is None else login_probes, "login_probes"
            ).items()
        }
        # Which cookies carry each site's session: only they can be login evidence.
        cookies_by_site = parse_session_cookies(session_cookies)
        for g in check_collection(grants, "grants"):
            grant_book.add(g)
        keeper_id = check_name(keeper_id, "keeper_id")
        if isinstance(backend, KeeperNamedBackend):
            backend.serve_keeper(keeper_id)  # its marker in a shared browser is this keeper's
        self._keyring = keyring  # read by _remember_jar (its keys are secrets too)
        self._backend = backend
        self._vault = vault
        self._audit = audit
        self._sweeper: Sweeper | None = None

        live: KeeperLive[PageT] = KeeperLive(
            clock=self._clock,
            idle_timeout=idle_timeout,
            grants=grant_book,
            fingerprinter=fingerprinter,
        )
        self._live = live
        evidence = EvidenceTracker(fingerprinter)
        self._persist: KeeperPersistence[PageT] = KeeperPersistence(
            live, store=store, keeper_id=keeper_id, keyring=keyring, audit=audit
        )
        self._authorisation = Authorisation(grant_book, live.ledger, live.uses, policy)
        restarts: RestartAccounting[PageT] = RestartAccounting(
            live,
            self._persist,
            login_probes=probes,
            vault=vault,
            remember_jar=self._remember_jar,
        )
        self._lifetime: BrowserLifetime[PageT] = BrowserLifetime(
            live,
            self._persist,
            backend,
            restarts,
            evidence,
            on_browser_lost=on_browser_lost,
            keep_logins_on_idle_close=keep_logins_on_idle_close,
        )
        self._tabs: Tabs[PageT] = Tabs(
            live, self._persist, evidence, tab_idle_timeout=tab_idle_timeout, owner=self
        )
        self._logins: Logins[PageT] = Logins(
            live,
            self._persist,
            evidence,
            login_probes=probes,
            session_cookies=cookies_by_site,
            vault=vault,
        )
        self._desk: GrantDesk[PageT] = GrantDesk(live, self._persist)
        self._conversations: Conversations[PageT] = Conversations(
            live, self._persist, conversation_idle_timeout=conversation_idle_timeout
        )
        self._sweeping: Sweeping[PageT] = Sweeping(
            live,
            self._persist,
            lifetime=self._lifetime,
            tabs=self._tabs,
            conversations=self._conversations,
            tab_idle_timeout=tab_idle_timeout,
        )

    # -- lifetime -------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        self._live.check_open()
        async with self._live.lock:
            await self._persist.load()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the sweeper, close the browser cleanly and release the backend. Idempotent."""
        if self._live.closed:
            return
        self._live.closed = True
        self.stop_sweeper()
        async with self._live.lock:
            await self._lifetime.aclose()
        writes = self._persist.writes
        await writes.drain()
        writes.clear_orphaned()
        # The browser is closed whatever happens here; a write that fails still reaches
        # the caller, and so does an earlier background failure nobody was told of.
        if self._persist.loaded:
            await self._persist.save()
        await self._persist.flush_audit()
        writes.raise_failure(since_written=True)

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._live.closed

    # -- read-only views ------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The clock every decision reads."""
        return self._clock

    @property
    def generation(self) -> int:
        """The current browser generation (0 before the first launch)."""
        return self._live.generation

    @property
    def browser_id(self) -> str | None:
        """``browser-<generation>``, or ``None`` before the first launch."""
        return self._live.browser_id

    @property
    def alive(self) -> bool:
        """Whether the current browser is running and inside its idle limit (no round trip)."""
        return self._live.alive

    def logins(self) -> tuple[LoginRecord, ...]:
        """The logins recorded in the live generation (fingerprints only)."""
        return self._live.ledger.live()

    def lost_logins(self) -> tuple[Lost, ...]:
        """Logins a restart took (or found replaced) that nobody has recorded again.

        Some of their cookies may still be in the jar (a persistent one that survived,
        another account's): enforcement layers keep guarding those sites.
        """
        return self._live.ledger.lost_records()

    def holds_grant(self, conversation: str, site: str, action: str = "read") -> bool:
        """Whether ``conversation`` holds a live grant for ``action`` on ``site`` (no use spent)."""
        self._live.check_open()
        return self._authorisation.holds_grant(conversation, site, action, self._clock.now())

    def holds_standing_grant(self, conversation: str, site: str, action: str = "read") -> bool:
        """Whether ``conversation`` holds an unlimited grant for ``action`` on ``site`` that
        never expires: an answer only a grant or revoke can change (no use, no clock)."""
        self._live.check_open()
        return self._live.grants.standing(conversation, normalize_site(site), action)

    def grants(self) -> tuple[Grant, ...]:
        """Every grant in force or not yet swept."""
        return tuple(s.grant for s in self._live.grants.states())

    def has_tab(self, conversation: str) -> bool:
        """Whether the conversation has an open tab in the live browser (no round trip)."""
        return self._tabs.has_tab(conversation)

    def current_url(self, conversation: str) -> str | None:
        """The URL the conversation's tab shows now, as the browser last reported it.

        No round trip; not verified — see :meth:`mark_verified`.
        """
        return self._tabs.current_url(conversation)

    def last_verified_url(self, conversation: str) -> str | None:
        """The conversation's tab's last verified URL in the live generation."""
        return self._tabs.last_verified_url(conversation)

    # -- the turn -------------------------------------------------------------------

    async def ensure(self, conversation: str, *, turn: str | None = None) -> TurnFacts:
        """Start a turn: make sure a browser is alive and say what changed for ``conversation``.

        ``turn``: an id that stays the same when a framework re-executes the step (a
        LangGraph checkpoint, an MCP request id). Every call with the same turn id gets
        the same facts — saved with the keeper's state, so a re-execution in a new
        process after a crash gets them too — plus anything a restart added meanwhile;
        a new turn id starts afresh and is not told them again.

        The alive path reads only local state (no browser round trip). A dead or
        idle-expired browser is replaced under a lock, so concurrent callers cause
        one relaunch; every affected conversation then hears about it once.

        Raises :class:`KeeperClosedError` after :meth:`aclose`, and
        :class:`~session_keeper.BrowserLaunchError` when no browser can be started
        (nothing is changed then; the next call tries again), and
        :class:`~session_keeper.UnsavedChanges` when a write failed (see the class).
        """
        self._live.check_open()
        conversation = check_name(conversation, "conversation")
        if turn is not None:
            check_name(turn, "turn")
        await self._persist.writes.settle()
        if self._live.alive:
            self._live.last_used = self._clock.monotonic()
            return await self._conversations.deliver(conversation, turn=turn)
        async with self._live.lock:
            self._live.check_open()
            await self._persist.load()
            if not self._live.alive:
                await self._lifetime.restart()
            self._live.last_used = self._clock.monotonic()
        return await self._conversations.deliver(conversation, always_save=True, turn=turn)

    async def tab(self, conversation: str, url: str | None = None) -> ConversationTab:
        """The conversation's tab as a :class:`~session_keeper.ConversationTab`.

        This is what LLM-driven code (tools, MCP, framework adapters) should hold: it
        has no path to the shared context, other conversations' pages, the cookie jar
        or an unrouted request API. ``url``: navigate first (see
        :meth:`ConversationTab.goto`). Raises :class:`BrowserGoneError` as
        :meth:`unguarded_page` does, and :class:`~session_keeper.NavigationBlocked`
        when the Guard refused the navigation.
        """
        from session_keeper._handle import ConversationTab

        page = await self.unguarded_page(conversation)
        handle = ConversationTab._bind(self, check_name(conversation, "conversation"), page)
        if url is not None:
            await handle.goto(url)
        return handle

    async def unguarded_page(self, conversation: str, url: str | None = None) -> PageT:
        """The conversation's raw Playwright ``Page`` — for trusted application code only.

        Unguarded: through the raw page, ``page.request``/``page.context.request`` skip
        the Guard, ``page.context.cookies()`` reads every cookie value and
        ``page.context.pages`` reaches other conversations' tabs. Never hand it to
        LLM-driven code; use :meth:`tab`. Navigates first when ``url`` is given; the
        URL it ends on is remembered as the tab's last verified URL (what a lost tab
        reports) unless the Guard blocked it.

        One conversation has one page, whatever the concurrency: calls for the same
        conversation are served one at a time, in order, so concurrent callers share
        the page the first one opened and their navigations run one after another
        (the last one served decides where the page ends). Calls for different
        conversations run concurrently.

        Raises :class:`BrowserGoneError` when the browser died (also while the call was
        waiting on it: within the backend's bound, see
        :class:`~session_keeper.BrowserSession`), or restarted since this
        conversation's last :meth:`ensure` (call it first);
        :class:`~session_keeper.NavigationError` when the navigation failed in a live
        browser (the site did not answer, or another navigation replaced it);
        :class:`~session_keeper.NavigationBlocked` when the Guard refused the navigation
        of a page that showed a document (the page keeps it).
        """
        return await self._tabs.tab(conversation, url)

    def unguarded_popups(self, conversation: str) -> tuple[PageT, ...]:
        """The conversation's open pages other than its tab — the popups it opened (an
        OAuth or SSO window) and theirs, oldest first — as raw pages.

        For trusted application code only, as :meth:`unguarded_page` (the console's live
        view follows them). No round trip; empty while no browser runs. Raises
        :class:`InvalidArgument` for a malformed conversation id.
        """
        conversation = check_name(conversation, "conversation")
        session = self._session
        if session is None:
            return ()
        return tuple(
            p for p in session.pages(conversation) if not self._is_main_page(conversation, p)
        )

    def tabs(self) -> tuple[TabView, ...]:
        """Every conversation's tab the keeper knows, open or remembered (no round trip)."""
        return self._tabs.views()

    def generations(self) -> tuple[GenerationRecord, ...]:
        """The browsers this keeper ran (the most recent 100), oldest first."""
        return tuple(self._live.generations)

    def takeovers(self) -> dict[str, datetime]:
        """Open human takeovers: conversation -> until when it is not swept."""
        now = self._clock.now()
        return {c: t for c, t in self._live.takeovers.items() if t > now}

    # -- for the conversation handle (same package, not public) ---------------------
    @property
    def _session(self) -> BrowserSession[PageT] | None:
        return self._live.session

    def _touch(self, conversation: str) -> None:
        """A handle of ``conversation`` was used: the browser and the tab are not idle."""
        mono = self._clock.monotonic()
        self._live.last_used = mono
        tab = self._live.tabs.get(conversation)
        if tab is not None:
            tab.last_used = mono

    def _is_main_page(self, conversation: str, page: object) -> bool:
        tab = self._live.tabs.get(conversation)
        return tab is not None and tab.page is page

    def mark_verified(self, conversation: str) -> str:
        """Record the tab's current URL as verified (the agent checked the page); return it."""
        return self._tabs.mark_verified(conversation)

    # -- logins ---------------------------------------------------------------------

    async def begin_login(self, conversation: str, site: str) -> None:
        """Mark the start of a sign-in: the site's cookies now are never evidence of it.

        Optional. Without it the sign-in is taken to begin at the conversation's last
        ``tab(url)`` navigation to the site, or else when the browser launched; call it
        when the conversation navigates the site between the sign-in and
        :meth:`record_login`. Raises :class:`BrowserGoneError` when the browser is gone.
        """
        await self._logins.begin_login(conversation, site)

    async def record_login(
        self, conversation: str, site: str, *, account: str | None = None
    ) -> LoginRecord:
        """Record that a human finished signing ``conversation`` in to ``site``, on evidence.

        The evidence (see ``session_keeper._login_evidence``): the site's session cookies
        (only those named in ``session_cookies=``, when configured) that appeared or
        changed since the sign-in began (:meth:`begin_login`, else the conversation's
        last ``tab(url)`` navigation to the site, else the browser's launch); and, when
        the site has a ``LoginProbe``, the probe run now must see someone signed in —
        its identity fills ``account`` when none is given. The record keeps keyed
        fingerprints of the evidence cookies only, never their values.

        Raises :class:`LoginNotObserved` (nothing recorded) when no such cookie changed
        and no probe vouches, when no configured session cookie is present, or when
        the probe sees nobody, raises or times out; :class:`LoginAccountMismatch` when
        the probe sees another account than ``account``; :class:`BrowserGoneError`
        when the browser died meanwhile.
        """
        return await self._logins.record_login(conversation, site, account=account)

    def has_login_probe(self, site: str) -> bool:
        """Whether a ``LoginProbe`` is configured for ``site``."""
        return self._logins.has_login_probe(site)

    async def probe_login(self, site: str) -> str | None:
        """Ask the site's ``LoginProbe`` now who is signed in (``None``: nobody).

        A query: it changes nothing (see :meth:`report_signed_out`). Raises
        :class:`InvalidArgument` when no probe is configured for ``site``,
        :class:`BrowserGoneError` when the browser is gone, and
        :class:`LoginProbeFailed` when the probe raised or timed out.
        """
        return await self._logins.probe_login(site)

    async def report_signed_out(
        self, site: str, *, reported_by: str, reason: str | None = None
    ) -> Lost | None:
        """The site signed its login out (server-side expiry, its sign-in form shown).

        For a step, a probe or the application that saw it. The site's live login
        becomes lost with cause ``"signed_out"``: its owner and every conversation
        holding a grant on the site are told once, through :meth:`ensure` (``restarted``
        stays ``False``); ``decide``/``permits``/``admit`` stop answering ``act`` until a
        login is recorded again, and the site stays guarded (:meth:`lost_logins`).
        Saved and audited before it returns. Returns the loss, or ``None`` when the
        site had no live login (nothing changes). Raises :class:`InvalidArgument` /
        :class:`InvalidArgumentType` for a bad site, ``reported_by`` or ``reason``.
        """
        return await self._logins.report_signed_out(site, reported_by=reported_by, reason=reason)

    def confirm_login(self, conversation: str, site: str) -> LoginRecord:
        """Mark a login that survived a restart as re-validated (by a probe or a person)."""
        return self._logins.confirm_login(conversation, site)

    # -- authorisation: one query, three modes (see _authorisation.py) ---------------

    def decide(
        self,
        conversation: str,
        site: str,
        action: str = "read",
        *,
        assumes_login: bool = False,
        page: object = None,
        url: str | None = None,
    ) -> Decision:
        """May ``conversation`` do ``action`` on ``site`` with the browser's login, now?

        - ``act``: a login is present and a live grant covers it (one use is spent).
          The use is armed for the request that acts on it: it admits the next such
          request from ``page`` (a :class:`ConversationTab` or page of this
          conversation; default its main tab), and only for ``url`` when given — a
          background request of another page cannot spend it. Raises
          :class:`InvalidArgument` for a tab of another conversation.
        - ``block``: a login is present but this conversation holds no grant for
          the action; the reason names the login's owner.
        - ``stop``: the plan assumed a login that a restart took away (or the
          browser restarted since this conversation's last ``ensure()``) — ask a
          human. With restart policy ``"relogin"`` for the action, a lost login
          gives ``need_login`` instead.
        - ``need_login``: nobody is signed in to the site.
        """
        armed_page, armed_url = arm_target(conversation, page, url)
        decision = self._evaluate(
            Query(
                conversation=conversation,
                site=site,
                action=action,
                assumes_login=assumes_login,
                counts=True,
                requester=Requester(page=armed_page, url=armed_url),
            )
        )
        self._persist.audit_soon(
            "decision",
            {
                "conversation": decision.conversation,
                "site": decision.site,
                "action": decision.action,
                "outcome": decision.outcome,
                "reason": decision.reason,
            },
        )
        return decision

    def permits(self, conversation: str, site: str, action: str = "read") -> Decision:
        """What :meth:`decide` would answer, without spending a use or logging.

        For enforcement layers (the network Guard) that ask on every request.
        """
        return self._evaluate(Query(conversation=conversation, site=site, action=action))

    def admit(
        self,
        conversation: str,
        site: str,
        action: str = "write",
        *,
        dry_run: bool = False,
        page_load: Hashable | None = None,
        page: Hashable | None = None,
        url: str | None = None,
    ) -> Decision:
        """May one request of ``conversation`` for ``action`` leave the browser to ``site``?

        For enforcement layers that see each request (the network Guard asks this for
        every request to a signed-in site, reads and writes alike). Unlike
        :meth:`permits` it counts, exactly as :meth:`decide` does: a grant with
        ``uses`` admits at most that many uses. A use that :meth:`decide` spent on an
        ``act`` admits the next such request of this conversation to this site from
        the page (and for the URL) it was armed for; ``page`` and ``url`` say where
        this request comes from (``page=None``: the caller cannot tell). Without an
        armed act, this spends a use itself.

        ``page_load`` names one page load (the Guard gives each top-level navigation
        of a page its own token, and passes it for reads): a use spent under it also
        admits this conversation's further requests for ``action`` to ``site`` under
        the same token — the subresources of that page — until :meth:`end_page_load`,
        a revoke, the grant's expiry or a restart. Without it one use is one request.
        Unlimited grants spend nothing. ``dry_run`` answers the same without spending
        anything (``spent_use`` then says whether it would). Raises
        :class:`InvalidArgument` for an unknown action.
        """
        if not isinstance(dry_run, bool):
            raise InvalidArgumentType("dry_run must be a bool")
        decision = self._evaluate(
            Query(
                conversation=conversation,
                site=site,
                action=action,
                counts=True,
                request=True,
                dry_run=dry_run,
                page_load=page_load,
                requester=Requester(
                    page=page,
                    main_tab=page is not None and self._is_main_page(conversation, page),
                    url=None if url is None else without_fragment(url),
                ),
            )
        )
        if decision.outcome == "act" and decision.spent_use and not dry_run:
            self._persist.audit_soon(
                "request_admitted",
                {
                    "conversation": decision.conversation,
                    "site": decision.site,
                    "action": decision.action,
                },
            )
        return decision

    def end_page_load(self, page_load: Hashable) -> None:
        """The page of ``page_load`` navigated again or closed: its use admits nothing more."""
        self._live.uses.end_page_load(page_load)

    def _evaluate(self, query: Query) -> Decision:
        """The one permission query; ``decide``/``permits``/``admit`` are its modes."""
        self._live.check_open()
        conversation = check_name(query.conversation, "conversation")
        pending = self._live.pending.get(conversation)
        view = BrowserView(
            alive=self._live.alive,
            generation=self._live.generation or None,
            restarted_unheard=pending is not None and pending.restarted,
        )
        result = self._authorisation.evaluate(query, view, self._clock.now())
        if result.grants_changed:
            self._persist.save_soon()
        return result.decision

    # -- extension points -------------------------------------------------------------

    def add_launch_hook(
        self, hook: Callable[[BrowserSession[PageT], int], Awaitable[None]]
    ) -> None:
        """Run ``await hook(session, generation)`` after each launch, before any page opens.

        Enforcement layers use it to watch every page of every browser the keeper
        starts (``session.on_page``). A hook that raises fails the launch.
        """
        self._lifetime.add_launch_hook(hook)

    def add_grants_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` each time a grant is added or revoked, before that call returns.

        Enforcement layers that skip decisions whose answer only grants can change
        use it to stop skipping them at once.
        """
        self._live.grants.changed_hooks.append(hook)

    def add_login_hook(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``await hook()`` after each login is recorded, before ``record_login`` returns.

        Enforcement layers use it to cover the new login's hosts at once.
        """
        self._live.ledger.recorded_hooks.append(hook)

    @property
    def store(self) -> Store | None:
        """The store the keeper persists to, if any."""
        return self._persist.store

    @property
    def keeper_id(self) -> str:
        """The name this keeper's state is saved under in its store."""
        return self._persist.keeper_id

    @property
    def backend(self) -> BrowserBackend[PageT]:
        """The backend the keeper launches its browsers with."""
        return self._backend

    @property
    def audit(self) -> AuditLog | None:
        """The audit log the keeper writes its entries to, if any."""
        return self._audit

    # -- grants -----------------------------------------------------------------------

    def grant(self, grant: Grant) -> Grant:
        """Add a grant. An action the keeper does not know raises :class:`InvalidArgument`."""
        return self._desk.grant(grant)

    def revoke(self, conversation: str, site: str) -> tuple[Grant, ...]:
        """Remove every grant of ``conversation`` on ``site``; return them."""
        return self._desk.revoke(conversation, site)

    def approve_borrow(
        self,
        conversation: str,
        site: str,
        action: str,
        approved_by: str,
        *,
        expires_in: timedelta | None = None,
    ) -> Grant:
        """A human lets ``conversation`` use ``site``'s login once, for ``action``."""
        return self._desk.approve_borrow(
            conversation, site, action, approved_by, expires_in=expires_in
        )

    def request_borrow(
        self,
        conversation: str,
        site: str,
        action: str = "read",
        *,
        reason: str | None = None,
        expires_in: timedelta = DEFAULT_REQUEST_TTL,
    ) -> BorrowRequest:
        """``conversation`` asks a person for a borrow of ``site``'s login for ``action``.

        Returns the pending :class:`BorrowRequest` (an identical pending one when the
        ask is repeated, as retried tool calls do). A person answers it with
        :meth:`answer_borrow`; unanswered, it expires after ``expires_in`` and grants
        nothing. Saved by the keeper's write owner and audited like any grant.
        Raises :class:`InvalidArgument` / :class:`InvalidArgumentType` for bad input, and
        :class:`~session_keeper.errors.TooManyPendingRequests` when ``conversation``
        already has five other requests pending (nothing is filed then).
        """
        return self._desk.request_borrow(
            conversation, site, action, reason=reason, expires_in=expires_in
        )

    def borrow_requests(
        self, *, status: BorrowStatus | None = "pending"
    ) -> tuple[BorrowRequest, ...]:
        """Borrow requests in the order they were filed (pending ones by default).

        ``status=None`` lists answered and expired ones too (the most recent are kept).
        """
        return self._desk.borrow_requests(status=status)

    def answer_borrow(
        self,
        request_id: str,
        *,
        approve: bool,
        by: str,
        approver: ApproverKind = "application",
        uses: int | None = 1,
        expires_in: timedelta | None = None,
    ) -> BorrowRequest:
        """The login's owner, a person or the application answers a pending borrow request.

        Approving adds a grant for the request's conversation, site and action with
        ``uses`` uses (``None``: unlimited) until ``expires_in`` from now (``None``: no
        expiry); ``by`` names the approver in the grant and the audit chain, and
        ``approver`` says which kind it is (``"owner"``: ``by`` is the conversation that
        owns the site's login; ``"person"``: someone at the console; ``"application"``:
        the application's own code). Denying grants nothing. The requesting conversation
        never answers its own request: ``by`` equal to it raises
        :class:`~session_keeper.errors.SelfApprovalRefused`. Raises
        :class:`InvalidArgument` for an unknown, answered or expired request, an
        ``"owner"`` who does not own the login, and bad ``uses``/``expires_in``; nothing
        changes then.
        """
        return self._desk.answer_borrow(
            request_id,
            approve=approve,
            by=by,
            approver=approver,
            uses=uses,
            expires_in=expires_in,
        )

    # -- human takeover ---------------------------------------------------------------

    def begin_takeover(
        self, conversation: str, *, expires_in: timedelta, by: str | None = None
    ) -> datetime:
        """A person drives the browser for ``conversation``: it is not swept until this expires.

        Written to the audit chain (``takeover_begun``, naming ``by``).
        """
        return self._desk.begin_takeover(conversation, expires_in=expires_in, by=by)

    def end_takeover(self, conversation: str, *, by: str | None = None) -> None:
        """The person handed control back (audited as ``takeover_ended``)."""
        self._desk.end_takeover(conversation, by=by)

    # -- sweeping ---------------------------------------------------------------------

    async def sweep(self, *, close_browser: bool = False) -> SweepReport:
        """Close a browser idle past the limit, idle tabs, and expired grants; say what closed.

        ``close_browser=True`` closes the running browser now, idle or not, exactly as
        an idle close (a pool evicting its least recently used browser does this): its
        conversations are told on their next :meth:`ensure`, as after any sweep.

        With ``conversation_idle_timeout``, conversations without a turn for that long
        are forgotten (see :meth:`forget`), except one that owns a live login or is
        taken over by a person; they are listed in ``retired_conversations``.

        With the default idle policy the logins the ledger knows are deleted from
        the jar before the close, so a swept profile holds no live credential.
        """
        if not isinstance(close_browser, bool):
            raise InvalidArgumentType("close_browser must be a bool")
        return await self._sweeping.sweep(close_browser=close_browser)

    def start_sweeper(
        self,
        every: timedelta = timedelta(minutes=1),
        scheduler: AsyncIOScheduler | None = None,
        *,
        on_sweep: Callable[[SweepReport], None] | None = None,
    ) -> Sweeper:
        """Run :meth:`sweep` every ``every``; return the running :class:`Sweeper`.

        Scheduled on an APScheduler 3 ``AsyncIOScheduler``: without ``scheduler`` the
        keeper starts its own on the running loop and shuts it down in :meth:`aclose`;
        an application's own scheduler is used as it is (the application starts and
        stops it). Idle decisions still read the keeper's clock, not the scheduler's.
        Raises :class:`InvalidArgument` when a sweeper already runs for this keeper.
        """
        self._live.check_open()
        check_duration(every, "every", after=self._clock.now())
        if self._sweeper is not None and self._sweeper.running:
            raise InvalidArgument("a sweeper is already running for this keeper")
        self._sweeper = start_sweeper(
            self.sweep,
            every=every,
            scheduler=scheduler,
            on_sweep=on_sweep,
            is_closed=lambda: self._live.closed,
            job_id=f"session-keeper-sweep-{id(self):x}",
        )
        return self._sweeper

    def stop_sweeper(self) -> None:
        """Stop the sweeper :meth:`start_sweeper` started, if any (see :meth:`Sweeper.stop`)."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.stop()

    # -- the end of a conversation ------------------------------------------------------

    async def forget(self, conversation: str) -> bool:
        """End ``conversation``: close its pages and drop everything the keeper keeps for it.

        Its tab record, unreported facts (pending losses), seen marker, armed uses and
        takeover go, and the saved state no longer mentions it, so the saved document
        stays bounded by the live conversations. Its grants are the application's
        configuration and stay (:meth:`revoke` them). A later :meth:`ensure` with the
        same id starts a new conversation. Returns whether the keeper knew it.

        Raises :class:`InvalidArgument` (nothing changed) while the conversation owns a
        live login: its grantees rely on it; sign it out or let a restart take it first.
        """
        return await self._conversations.forget(conversation)

    # -- secrets in text ----------------------------------------------------------------

    async def scrubber(self) -> Callable[[str], str]:
        """A function that replaces every live secret in a text by ``[redacted]``.

        The secrets are the values of every cookie in the browser's jar, read now
        (the last jar read when the browser is gone), and the keys of the keeper's,
        vault's and audit log's keyrings. They are held in memory only, never stored;
        from this call on the library's own stored error texts and logs are scrubbed
        of them too. Call it before persisting or logging text that came from a page
        or a server (the job loop does, for every error and stop reason it records).
        """
        session = self._live.session
        if session is not None and session.alive and not self._live.closed:
            # A browser that dies meanwhile leaves the last jar we read in force.
            with contextlib.suppress(BrowserError):
                self._remember_jar(await session.cookies())
        return scrub_secrets

    def _remember_jar(self, jar: Iterable[Cookie]) -> None:
        """Scrub these cookie values (and our keys) from every text from now on."""
        values = [c.value for c in jar]
        for holder in (self, self._vault, self._audit):
            keyring = getattr(holder, "_keyring", None)
            if keyring is not None:
                values += keyring._secret_forms()
        remember_secrets(self, values)

    # -- saving -----------------------------------------------------------------------

    @property
    def unsaved(self) -> bool:
        """Whether a change (keeper state or an audit entry) is not in the store yet."""
        return self._persist.unsaved

    async def persist(self) -> None:
        """Wait until every change so far is in the store (and the audit trail).

        Raises :class:`UnsavedChanges` when anything could not be written (the change
        is kept; call again to retry), and — once, before writing anything — when a
        background write failed since the last awaited call.
        """
        await self._persist.persist()

    async def _write_through(self) -> None:
        """Write everything unsaved now; raise if it cannot be (for enforcement layers).

        Unlike :meth:`persist`, an earlier background failure stays for the
        application's next call to hear: the Guard must not swallow it.
        """
        await self._persist.write_through()

    def _check_open(self) -> None:
        self._live.check_open()

    def __repr__(self) -> str:
        state = "closed" if self._live.closed else ("alive" if self._live.alive else "not running")
        return f"<SessionKeeper {self._live.browser_id or 'no browser yet'} {state}>"
