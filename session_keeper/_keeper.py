"""SessionKeeper: the one object an agent asks "what is true about my browser now?"."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Generic, Literal, NoReturn, Self

import attrs

from session_keeper._authorisation import (
    Authorisation,
    BrowserView,
    Query,
    RestartPolicy,
)
from session_keeper._backend import (
    BrowserBackend,
    BrowserSession,
    CloseCause,
    Cookie,
    PageT,
    normalize_site,
    while_alive,
)
from session_keeper._borrows import (
    DEFAULT_REQUEST_TTL,
    BorrowBook,
    BorrowRequest,
    BorrowStatus,
    check_reason,
)
from session_keeper._clock import Clock, SystemClock
from session_keeper._errors import (
    BrowserError,
    BrowserGoneError,
    BrowserLaunchError,
    InvalidArgument,
    InvalidArgumentType,
    KeeperClosedError,
    LoginAccountMismatch,
    LoginNotObserved,
    LoginProbeFailed,
    ProfileInUse,
)
from session_keeper._facts import (
    BrowserLost,
    ClosedBrowser,
    ClosedTab,
    Decision,
    EndCause,
    LoginRecord,
    Lost,
    SweepReport,
    TurnFacts,
)
from session_keeper._fingerprint import Fingerprinter, load_fingerprint_key
from session_keeper._grants import DEFAULT_ACTIONS, Grant, GrantBook, check_name
from session_keeper._keeper_projection import keeper_projections
from session_keeper._keeper_state import (
    GenerationRecord,
    KeeperState,
    SavedGrant,
    SavedPending,
    SavedTab,
    from_document,
    to_document,
)
from session_keeper._keyed_lock import KeyedLock
from session_keeper._ledger import LoginLedger, classify
from session_keeper._login_evidence import (
    EvidenceTracker,
    ask_probe,
    cookie_id,
    not_observed,
    parse_session_cookies,
)
from session_keeper._redact import redact_text, remember_secrets, scrub_secrets, scrubbing_logger
from session_keeper._sweeper import Sweeper, start_sweeper
from session_keeper._uses import UseTokens
from session_keeper._validate import check_collection, check_duration, check_mapping
from session_keeper._writes import WriteOwner, as_unsaved

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from session_keeper._audit import AuditLog
    from session_keeper._secrets import Keyring
    from session_keeper._store import Store
    from session_keeper._vault import LoginVault

log = scrubbing_logger("session_keeper")

#: How long (attempts x poll) a new process waits for its predecessor's orphaned
#: browser to release the profile.
ORPHAN_EXIT_ATTEMPTS = 100
ORPHAN_EXIT_POLL_S = 0.1

#: Tab URL changes are saved in the background at most this often.
URL_SAVE_INTERVAL_S = 1.0

#: How long a LoginProbe may take before its login counts as unverified (survived).
PROBE_TIMEOUT_S = 15.0

#: The conversation that owns the keeper's own probe pages.
PROBE_CONVERSATION = "session-keeper:probe"

#: Asks a site "still signed in, and as whom?": given a page of the new browser, return
#: the signed-in account's identity, or ``None`` when nobody is signed in.
LoginProbe = Callable[[PageT], Awaitable[str | None]]

#: What the keeper found of a recorded login after a restart.
_Fate = Literal["survived", "confirmed", "replaced", "signed_out", "lost"]


@attrs.define
class _Tab(Generic[PageT]):
    #: ``None`` for a tab remembered from a previous process.
    page: PageT | None
    generation: int
    last_url: str | None
    verified_at: datetime
    last_used: float


@attrs.define
class _Pending:
    """What a conversation has not been told yet."""

    since_generation: int | None
    restarted: bool = False
    lost: list[Lost] = attrs.field(factory=list)
    revalidate: list[str] = attrs.field(factory=list)
    restored: list[str] = attrs.field(factory=list)

    def add_loss(self, loss: Lost) -> None:
        # The newest word on a login or tab replaces an older one.
        self.lost = [x for x in self.lost if (x.kind, x.name) != (loss.kind, loss.name)]
        self.lost.append(loss)
        if loss.kind == "login" and loss.name in self.revalidate:
            self.revalidate.remove(loss.name)


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
        self._backend = backend
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._idle_timeout = idle_timeout
        self._tab_idle_timeout = tab_idle_timeout
        self._conversation_idle_timeout = conversation_idle_timeout
        # Last ensure() per conversation (monotonic, in memory): retirement's idle clock.
        self._active: dict[str, float] = {}
        action_list = check_collection(actions, "actions")
        for a in action_list:
            check_name(a, "action")
        known = frozenset(action_list)
        self._grants = GrantBook(known)
        policy: dict[str, RestartPolicy] = dict.fromkeys(known, "stop")
        policies = check_mapping({} if restart_policy is None else restart_policy, "restart_policy")
        for action, p in policies.items():
            self._grants.check_action(action)
            if p not in ("stop", "relogin"):
                raise InvalidArgument(f"restart policy for {action!r} must be 'stop' or 'relogin'")
            policy[action] = p
        self._restart_policy = policy
        self._keep_logins_on_idle_close = keep_logins_on_idle_close
        self._fingerprinter = Fingerprinter(load_fingerprint_key(fingerprint_key))
        self._on_browser_lost = on_browser_lost
        self._login_probes = {
            normalize_site(check_name(site, "site")): probe
            for site, probe in check_mapping(
                {} if login_probes is None else login_probes, "login_probes"
            ).items()
        }
        # Which cookies carry each site's session: only they can be login evidence.
        self._session_cookies = parse_session_cookies(session_cookies)
        for g in check_collection(grants, "grants"):
            self._grants.add(g)
        self._evidence = EvidenceTracker(self._fingerprinter)

        self._ledger = LoginLedger()
        self._session: BrowserSession[PageT] | None = None
        self._generation = 0
        self._last_used = self._clock.monotonic()
        self._ended: EndCause | None = None
        self._tabs: dict[str, _Tab[PageT]] = {}
        self._tab_locks = KeyedLock()
        self._pending: dict[str, _Pending] = {}
        self._seen: dict[str, int] = {}
        # What a spent use admits on the network: armed acts and page loads (_uses.py).
        self._uses = UseTokens()
        self._authorisation = Authorisation(
            self._grants, self._ledger, self._uses, self._restart_policy
        )
        self._takeovers: dict[str, datetime] = {}
        self._borrows = BorrowBook()
        self._lock = asyncio.Lock()
        self._closed = False
        self._sweeper: Sweeper | None = None
        self._store = store
        self._keyring = keyring
        self._vault = vault
        self._audit = audit
        self._audit_verified = False
        # Entries leave this queue only once written: a failed write keeps them, in order.
        self._audit_pending: list[tuple[str, dict[str, object], int | None]] = []
        self._audit_lock = asyncio.Lock()
        self._keeper_id = check_name(keeper_id, "keeper_id")
        self._loaded = store is None
        self._generations: list[GenerationRecord] = []
        self._save_lock = asyncio.Lock()
        # The one owner of background writes (see _writes.py and the class docstring).
        self._writes = WriteOwner(self._write_all)
        self._last_url_save = float("-inf")
        self._launch_hooks: list[Callable[[BrowserSession[PageT], int], Awaitable[None]]] = []

    # -- lifetime -------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        self._check_open()
        async with self._lock:
            await self._load()
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
        if self._closed:
            return
        self._closed = True
        self.stop_sweeper()
        async with self._lock:
            session = self._session
            if session is not None and session.alive:
                self._end_generation("closed")
                await session.close()
            await self._backend.aclose()
        await self._writes.drain()
        self._writes.clear_orphaned()
        # The browser is closed whatever happens here; a write that fails still reaches
        # the caller, and so does an earlier background failure nobody was told of.
        if self._loaded:
            await self._save()
        await self._flush_audit()
        self._writes.raise_failure(since_written=True)

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    # -- read-only views ------------------------------------------------------------
    @property
    def clock(self) -> Clock:
        """The clock every decision reads."""
        return self._clock

    @property
    def generation(self) -> int:
        """The current browser generation (0 before the first launch)."""
        return self._generation

    @property
    def browser_id(self) -> str | None:
        """``browser-<generation>``, or ``None`` before the first launch."""
        return f"browser-{self._generation}" if self._generation else None

    @property
    def alive(self) -> bool:
        """Whether the current browser is running and inside its idle limit (no round trip)."""
        s = self._session
        return s is not None and s.alive and not self._idle_expired()

    def logins(self) -> tuple[LoginRecord, ...]:
        """The logins recorded in the live generation (fingerprints only)."""
        return self._ledger.live()

    def lost_logins(self) -> tuple[Lost, ...]:
        """Logins a restart took (or found replaced) that nobody has recorded again.

        Some of their cookies may still be in the jar (a persistent one that survived,
        another account's): enforcement layers keep guarding those sites.
        """
        return self._ledger.lost_records()

    def holds_grant(self, conversation: str, site: str, action: str = "read") -> bool:
        """Whether ``conversation`` holds a live grant for ``action`` on ``site`` (no use spent)."""
        self._check_open()
        return self._authorisation.holds_grant(conversation, site, action, self._clock.now())

    def grants(self) -> tuple[Grant, ...]:
        """Every grant in force or not yet swept."""
        return tuple(s.grant for s in self._grants.states())

    def has_tab(self, conversation: str) -> bool:
        """Whether the conversation has an open tab in the live browser (no round trip)."""
        tab = self._tabs.get(check_name(conversation, "conversation"))
        s = self._session
        return (
            tab is not None
            and tab.page is not None
            and s is not None
            and s.alive
            and s.page_is_open(tab.page)
        )

    def current_url(self, conversation: str) -> str | None:
        """The URL the conversation's tab shows now, as the browser last reported it.

        No round trip; not verified — see :meth:`mark_verified`.
        """
        tab = self._tabs.get(check_name(conversation, "conversation"))
        s = self._session
        if tab is None or tab.page is None or s is None or not s.alive:
            return None
        return s.page_url(tab.page) if s.page_is_open(tab.page) else None

    def last_verified_url(self, conversation: str) -> str | None:
        """The conversation's tab's last verified URL in the live generation."""
        tab = self._tabs.get(check_name(conversation, "conversation"))
        return tab.last_url if tab else None

    # -- the turn -------------------------------------------------------------------
    async def ensure(self, conversation: str) -> TurnFacts:
        """Start a turn: make sure a browser is alive and say what changed for ``conversation``.

        The alive path reads only local state (no browser round trip). A dead or
        idle-expired browser is replaced under a lock, so concurrent callers cause
        one relaunch; every affected conversation then hears about it once.

        Raises :class:`KeeperClosedError` after :meth:`aclose`, and
        :class:`~session_keeper.BrowserLaunchError` when no browser can be started
        (nothing is changed then; the next call tries again), and
        :class:`~session_keeper.UnsavedChanges` when a write failed (see the class).
        """
        self._check_open()
        conversation = check_name(conversation, "conversation")
        await self._writes.settle()
        if self.alive:
            self._last_used = self._clock.monotonic()
            return await self._deliver(conversation)
        async with self._lock:
            self._check_open()
            await self._load()
            if not self.alive:
                await self._restart()
            self._last_used = self._clock.monotonic()
        return await self._deliver(conversation, always_save=True)

    async def _deliver(self, conversation: str, *, always_save: bool = False) -> TurnFacts:
        """Hand the conversation its facts; saved first, so they are told exactly once.

        If the save fails the facts stay pending and the error reaches the caller: a
        later ensure() tells them again rather than never.
        """
        pending = self._pending.get(conversation)
        seen = self._seen.get(conversation)
        facts = self._facts_for(conversation)
        if always_save or pending is not None:
            try:
                await self._save()
            except BaseException:
                if pending is not None:
                    self._pending[conversation] = pending
                if seen is not None:
                    self._seen[conversation] = seen
                raise
        return facts

    async def tab(self, conversation: str, url: str | None = None) -> PageT:
        """The conversation's page; navigate it first when ``url`` is given.

        One conversation has one page, whatever the concurrency: calls for the same
        conversation are served one at a time, in order, so concurrent callers share
        the page the first one opened and their navigations run one after another
        (the last one served decides where the page ends). Calls for different
        conversations run concurrently.

        The URL it ends on is remembered as the tab's last verified URL, and is what
        a lost tab reports. Raises :class:`BrowserGoneError` when the browser died
        (also while the call was waiting on it: within the backend's bound, see
        :class:`~session_keeper.BrowserSession`), or restarted since this
        conversation's last :meth:`ensure` (call it first);
        :class:`~session_keeper.NavigationError` when the navigation failed in a live
        browser (the site did not answer, or another navigation replaced it).
        """
        conversation = check_name(conversation, "conversation")
        if url is not None:
            check_name(url, "url")
        self._session_for(conversation)  # fail fast, before queueing behind others
        async with self._tab_locks.hold(conversation):
            return await self._tab(conversation, url)

    async def _tab(self, conversation: str, url: str | None) -> PageT:
        session = self._session_for(conversation)
        await self._writes.settle()
        now = self._clock.now()
        mono = self._clock.monotonic()
        self._last_used = mono
        generation = self._generation
        tab = self._tabs.get(conversation)
        if tab is None or tab.page is None or not session.page_is_open(tab.page):
            page = await session.open_page(conversation)
            self._still_current(session, generation)
            tab = _Tab(
                page=page,
                generation=generation,
                last_url=None,
                verified_at=now,
                last_used=mono,
            )
            self._tabs[conversation] = tab
            self._save_soon()
        assert tab.page is not None
        tab.last_used = mono
        if url is not None:
            final = await session.goto(tab.page, url)
            self._still_current(session, generation)
            # The site's cookies as this navigation left them: a sign-in starting
            # here must change one of them to count as evidence (see _login_evidence).
            self._evidence.navigated(conversation, final, await session.cookies())
            self._still_current(session, generation)
            tab.last_url = final
            tab.verified_at = self._clock.now()
            self._save_url_soon()
        return tab.page

    def _still_current(self, session: BrowserSession[PageT], generation: int) -> None:
        """After an await: the browser may have died or been replaced meanwhile."""
        if self._session is not session or self._generation != generation or not session.alive:
            raise BrowserGoneError(
                f"browser-{generation} went away during the call; "
                "call ensure() to learn what was lost"
            )

    def mark_verified(self, conversation: str) -> str:
        """Record the tab's current URL as verified (the agent checked the page); return it."""
        conversation = check_name(conversation, "conversation")
        session = self._session_for(conversation)
        tab = self._tabs.get(conversation)
        if tab is None or tab.page is None or not session.page_is_open(tab.page):
            raise InvalidArgument(f"{conversation} has no open tab")
        tab.last_url = session.page_url(tab.page)
        tab.verified_at = self._clock.now()
        self._save_soon()
        return tab.last_url

    async def begin_login(self, conversation: str, site: str) -> None:
        """Mark the start of a sign-in: the site's cookies now are never evidence of it.

        Optional. Without it the sign-in is taken to begin at the conversation's last
        ``tab(url)`` navigation to the site, or else when the browser launched; call it
        when the conversation navigates the site between the sign-in and
        :meth:`record_login`. Raises :class:`BrowserGoneError` when the browser is gone.
        """
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        session = self._session_for(conversation)
        generation = self._generation
        jar = await session.cookies()
        self._still_current(session, generation)
        self._evidence.begin(conversation, site, jar)

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
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        if account is not None:
            check_name(account, "account")
        session = self._session_for(conversation)
        await self._writes.settle()
        generation = self._generation
        self._last_used = self._clock.monotonic()
        jar = await session.cookies()
        # Cookies read from a browser that died during the await vouch for nothing.
        self._still_current(session, generation)
        changed, candidates, since = self._evidence.select(
            conversation, site, jar, self._session_cookies.get(site)
        )
        probe = self._login_probes.get(site)
        if not changed and (probe is None or not candidates):
            raise not_observed(site, since, self.browser_id)
        vouched = False
        if probe is not None:
            try:
                identity = await self._probe(session, generation, site, probe)
            except LoginProbeFailed as exc:
                # A probe that fails proves nothing: no login is recorded on it.
                raise LoginNotObserved(f"{exc}; nothing recorded") from exc
            if identity is None:
                raise LoginNotObserved(
                    f"the login probe for {site} sees nobody signed in; nothing recorded"
                )
            if account is not None and identity != account:
                raise LoginAccountMismatch(
                    f"the login probe for {site} sees another account than the one given; "
                    "nothing recorded"
                )
            account = identity
            vouched = True
        # Nothing changed but the probe sees the account: the site's session cookies
        # present now are what carries it (the probe is the evidence).
        evidence = changed or candidates
        record = LoginRecord(
            site=site,
            owner=conversation,
            account=account,
            recorded_at=self._clock.now(),
            generation=generation,
            cookies=tuple(self._fingerprinter.fingerprint(c) for c in evidence),
        )
        self._ledger.record(record)
        self._evidence.recorded(conversation, site, evidence)
        if self._vault is not None and self._vault.allows(site):
            # Sealed (AES-GCM) so a policy-approved site can be put back after a crash.
            await self._vault.save(session, site)
        self._audit_soon(
            "login_recorded",
            {
                "site": site,
                "owner": conversation,
                "evidence": "probe" if vouched and not changed else f"changed since {since}",
                "cookies": [
                    {"name": c.name, "domain": c.domain, "path": c.path, "fp": c.fingerprint}
                    for c in record.cookies
                ],
            },
        )
        await self._save()
        log.info(
            "login recorded",
            extra={"site": site, "owner": conversation, "generation": self._generation},
        )
        return record

    def has_login_probe(self, site: str) -> bool:
        """Whether a ``LoginProbe`` is configured for ``site``."""
        return normalize_site(check_name(site, "site")) in self._login_probes

    async def probe_login(self, site: str) -> str | None:
        """Ask the site's ``LoginProbe`` now who is signed in (``None``: nobody).

        A query: it changes nothing (see :meth:`report_signed_out`). Raises
        :class:`InvalidArgument` when no probe is configured for ``site``,
        :class:`BrowserGoneError` when the browser is gone, and
        :class:`LoginProbeFailed` when the probe raised or timed out.
        """
        site = normalize_site(check_name(site, "site"))
        probe = self._login_probes.get(site)
        if probe is None:
            raise InvalidArgument(f"no LoginProbe is configured for {site}")
        session = self._session_for(PROBE_CONVERSATION)
        return await self._probe(session, self._generation, site, probe)

    async def _probe(
        self,
        session: BrowserSession[PageT],
        generation: int,
        site: str,
        probe: LoginProbe[PageT],
    ) -> str | None:
        try:
            identity = await ask_probe(session, probe, PROBE_CONVERSATION, PROBE_TIMEOUT_S)
        except Exception as exc:
            self._still_current(session, generation)  # a dead browser is BrowserGoneError
            raise LoginProbeFailed(
                f"the login probe for {site} failed ({type(exc).__name__})"
            ) from exc
        self._still_current(session, generation)
        return identity

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
        self._check_open()
        site = normalize_site(check_name(site, "site"))
        reported_by = check_name(reported_by, "reported_by")
        if reason is not None and not isinstance(reason, str):
            raise InvalidArgumentType("reason must be a str or None")
        record = self._ledger.get(site)
        if record is None:
            return None
        loss = Lost(
            kind="login",
            name=site,
            owner=record.owner,
            when=record.recorded_at,
            generation=record.generation,
            cause="signed_out",
        )
        recipients = {record.owner} | self._grants.holders(site, self._clock.now())
        self._ledger.mark_lost(loss)
        self._uses.end_site(site)  # an act armed on the dead login admits nothing
        for c in sorted(recipients):
            self._pending_for(c, restarted=False).add_loss(loss)
        self._audit_soon(
            "login_signed_out",
            {
                "site": site,
                "owner": record.owner,
                "reported_by": reported_by,
                "reason": redact_text(reason) if reason is not None else None,
                "generation": record.generation,
            },
        )
        await self._save()
        log.warning(
            "login signed out",
            extra={"site": site, "owner": record.owner, "reported_by": reported_by},
        )
        return loss

    def confirm_login(self, conversation: str, site: str) -> LoginRecord:
        """Mark a login that survived a restart as re-validated (by a probe or a person)."""
        check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        rec = self._ledger.confirm(site)
        if rec is None:
            raise InvalidArgument(f"no live login for {site} to confirm")
        self._audit_soon("login_confirmed", {"site": site, "by": conversation})
        self._save_soon()
        return rec

    def decide(
        self, conversation: str, site: str, action: str = "read", *, assumes_login: bool = False
    ) -> Decision:
        """May ``conversation`` do ``action`` on ``site`` with the browser's login, now?

        - ``act``: a login is present and a live grant covers it (one use is spent).
        - ``block``: a login is present but this conversation holds no grant for
          the action; the reason names the login's owner.
        - ``stop``: the plan assumed a login that a restart took away (or the
          browser restarted since this conversation's last ``ensure()``) — ask a
          human. With restart policy ``"relogin"`` for the action, a lost login
          gives ``need_login`` instead.
        - ``need_login``: nobody is signed in to the site.
        """
        decision = self._evaluate(
            Query(
                conversation=conversation,
                site=site,
                action=action,
                assumes_login=assumes_login,
                counts=True,
            )
        )
        self._audit_soon(
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
    ) -> Decision:
        """May one request of ``conversation`` for ``action`` leave the browser to ``site``?

        For enforcement layers that see each request (the network Guard asks this for
        every request to a signed-in site, reads and writes alike). Unlike
        :meth:`permits` it counts, exactly as :meth:`decide` does: a grant with
        ``uses`` admits at most that many uses. A use that :meth:`decide` spent on an
        ``act`` admits the next such request of this conversation to this site, from
        any of its pages; without one, this spends a use itself.

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
            )
        )
        if decision.outcome == "act" and decision.spent_use and not dry_run:
            self._audit_soon(
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
        self._uses.end_page_load(page_load)

    def _evaluate(self, query: Query) -> Decision:
        """The one permission query; ``decide``/``permits``/``admit`` are its modes."""
        self._check_open()
        conversation = check_name(query.conversation, "conversation")
        pending = self._pending.get(conversation)
        view = BrowserView(
            alive=self.alive,
            generation=self._generation or None,
            restarted_unheard=pending is not None and pending.restarted,
        )
        result = self._authorisation.evaluate(query, view, self._clock.now())
        if result.grants_changed:
            self._save_soon()
        return result.decision

    # -- extension points -------------------------------------------------------------
    def add_launch_hook(
        self, hook: Callable[[BrowserSession[PageT], int], Awaitable[None]]
    ) -> None:
        """Run ``await hook(session, generation)`` after each launch, before any page opens.

        Enforcement layers use it to watch every page of every browser the keeper
        starts (``session.on_page``). A hook that raises fails the launch.
        """
        self._launch_hooks.append(hook)

    @property
    def store(self) -> Store | None:
        """The store the keeper persists to, if any."""
        return self._store

    # -- grants -----------------------------------------------------------------------
    def grant(self, grant: Grant) -> Grant:
        """Add a grant. An action the keeper does not know raises :class:`InvalidArgument`."""
        self._check_open()
        added = self._grants.add(grant).grant
        self._save_soon()
        self._audit_soon("grant_added", _grant_body(added))
        return added

    def revoke(self, conversation: str, site: str) -> tuple[Grant, ...]:
        """Remove every grant of ``conversation`` on ``site``; return them."""
        self._check_open()
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        gone = self._grants.revoke(conversation, site)
        self._uses.revoke(conversation, site)  # nothing more, armed or loading
        self._save_soon()
        if gone:
            self._audit_soon("grants_revoked", {"grants": [_grant_body(g) for g in gone]})
        return gone

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
        self._check_open()
        check_name(approved_by, "approved_by")
        action = self._grants.check_action(action)
        g = self._borrow_grant(conversation, site, action, approved_by, expires_in, uses=1)
        self._audit_soon("borrow_approved", _grant_body(g))
        return g

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
        Raises :class:`InvalidArgument` / :class:`InvalidArgumentType` for bad input.
        """
        self._check_open()
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        action = self._grants.check_action(action)
        reason = check_reason(reason)
        now = self._clock.now()
        ttl = check_duration(expires_in, "expires_in", after=now)
        request, filed = self._borrows.file(conversation, site, action, reason, now, ttl)
        if filed:
            self._save_soon()
            self._audit_soon(
                "borrow_requested",
                {
                    "id": request.id,
                    "conversation": conversation,
                    "site": site,
                    "action": action,
                    "reason": reason,
                },
            )
            log.info(
                "borrow requested",
                extra={"conversation": conversation, "site": site, "action": action},
            )
        return request

    def borrow_requests(
        self, *, status: BorrowStatus | None = "pending"
    ) -> tuple[BorrowRequest, ...]:
        """Borrow requests in the order they were filed (pending ones by default).

        ``status=None`` lists answered and expired ones too (the most recent are kept).
        """
        self._check_open()
        if status is not None and status not in ("pending", "approved", "denied", "expired"):
            raise InvalidArgument(f"unknown borrow request status {status!r}")
        now = self._clock.now()
        if any(r.expires_at <= now for r in self._borrows.requests(status="pending")):
            self._borrows.expire(now)
            self._save_soon()
        return self._borrows.requests(status=status)

    def answer_borrow(
        self,
        request_id: str,
        *,
        approve: bool,
        by: str,
        uses: int | None = 1,
        expires_in: timedelta | None = None,
    ) -> BorrowRequest:
        """A person answers a pending borrow request.

        Approving adds a grant for the request's conversation, site and action with
        ``uses`` uses (``None``: unlimited) until ``expires_in`` from now (``None``: no
        expiry); ``by`` names the approver in the grant and the audit chain. Denying
        grants nothing. Raises :class:`InvalidArgument` for an unknown, answered or
        expired request, and for bad ``uses``/``expires_in``; nothing changes then.
        """
        self._check_open()
        if not isinstance(approve, bool):
            raise InvalidArgumentType("approve must be a bool")
        check_name(request_id, "request_id")
        check_name(by, "by")
        if uses is not None and (isinstance(uses, bool) or not isinstance(uses, int) or uses < 1):
            raise InvalidArgument("uses must be a positive int or None")
        now = self._clock.now()
        if expires_in is not None:
            check_duration(expires_in, "expires_in", after=now)
        request = self._borrows.get(request_id)
        if approve and request is not None and request.status == "pending":
            self._grants.check_action(request.action)
        answered = self._borrows.answer(
            request_id,
            status="approved" if approve else "denied",
            by=by,
            now=now,
            uses=uses if approve else None,
            grant_expires_at=now + expires_in if approve and expires_in is not None else None,
        )
        if approve:
            g = self._borrow_grant(
                answered.conversation, answered.site, answered.action, by, expires_in, uses=uses
            )
            body = {**_grant_body(g), "request": answered.id}
            self._audit_soon("borrow_approved", body)
        else:
            self._save_soon()
            self._audit_soon("borrow_denied", {"request": answered.id, "by": by})
        return answered

    def _borrow_grant(
        self,
        conversation: str,
        site: str,
        action: str,
        approved_by: str,
        expires_in: timedelta | None,
        *,
        uses: int | None,
    ) -> Grant:
        now = self._clock.now()
        if expires_in is not None:
            check_duration(expires_in, "expires_in", after=now)
        g = Grant(
            conversation,
            site,
            actions={action},
            uses=uses,
            expires_at=now + expires_in if expires_in is not None else None,
            approved_by=approved_by,
        )
        self._grants.add(g)
        self._save_soon()
        log.info(
            "borrow approved",
            extra={"conversation": g.conversation, "site": g.site, "action": action},
        )
        return g

    # -- human takeover ---------------------------------------------------------------
    def begin_takeover(self, conversation: str, *, expires_in: timedelta) -> datetime:
        """A person drives the browser for ``conversation``: it is not swept until this expires."""
        self._check_open()
        conversation = check_name(conversation, "conversation")
        until = self._clock.now() + check_duration(
            expires_in, "expires_in", after=self._clock.now()
        )
        self._takeovers[conversation] = until
        self._save_soon()
        return until

    def end_takeover(self, conversation: str) -> None:
        """The person handed control back."""
        if self._takeovers.pop(check_name(conversation, "conversation"), None) is not None:
            self._save_soon()

    # -- sweeping ---------------------------------------------------------------------
    async def sweep(self) -> SweepReport:
        """Close a browser idle past the limit, idle tabs, and expired grants; say what closed.

        With ``conversation_idle_timeout``, conversations without a turn for that long
        are forgotten (see :meth:`forget`), except one that owns a live login or is
        taken over by a person; they are listed in ``retired_conversations``.

        With the default idle policy the logins the ledger knows are deleted from
        the jar before the close, so a swept profile holds no live credential.
        """
        self._check_open()
        await self._writes.settle()
        async with self._lock:
            now = self._clock.now()
            mono = self._clock.monotonic()
            expired = self._grants.expire(now)
            for r in self._borrows.expire(now):
                self._save_soon()
                self._audit_soon("borrow_request_expired", {"id": r.id})
            if expired:
                self._audit_soon("grants_expired", {"grants": [_grant_body(g) for g in expired]})
            takeovers = {c: t for c, t in self._takeovers.items() if t > now}
            if takeovers != self._takeovers:
                self._takeovers = takeovers
                self._save_soon()
            closed_browser: ClosedBrowser | None = None
            closed_tabs: list[ClosedTab] = []
            retired = await self._retire_idle_conversations()
            session = self._session
            if session is not None and session.alive:
                if self._idle_expired():
                    closed_browser = ClosedBrowser(
                        browser_id=f"browser-{self._generation}",
                        generation=self._generation,
                        idle=timedelta(seconds=mono - self._last_used),
                    )
                    await self._close_idle(session)
                elif self._tab_idle_timeout is not None:
                    closed_tabs = await self._close_idle_tabs(session, mono)
        report = SweepReport(
            at=now,
            closed_browser=closed_browser,
            closed_tabs=tuple(closed_tabs),
            expired_grants=expired,
            retired_conversations=retired,
        )
        if not report.nothing_done:
            await self._save()
        if not report.nothing_done:
            log.info(
                "sweep",
                extra={
                    "closed_browser": closed_browser.browser_id if closed_browser else None,
                    "closed_tabs": [t.conversation for t in closed_tabs],
                    "expired_grants": len(expired),
                    "retired_conversations": len(retired),
                },
            )
        return report

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
        self._check_open()
        check_duration(every, "every", after=self._clock.now())
        if self._sweeper is not None and self._sweeper.running:
            raise InvalidArgument("a sweeper is already running for this keeper")
        self._sweeper = start_sweeper(
            self.sweep,
            every=every,
            scheduler=scheduler,
            on_sweep=on_sweep,
            is_closed=lambda: self._closed,
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
        self._check_open()
        conversation = check_name(conversation, "conversation")
        async with self._lock:
            owned = sorted(r.site for r in self._ledger.live() if r.owner == conversation)
            if owned:
                raise InvalidArgument(
                    f"{conversation} owns the live login to {', '.join(owned)}; "
                    "it cannot be forgotten while others may rely on it"
                )
            known = await self._drop_conversation(conversation)
        if known:
            await self._save()
            log.info("conversation forgotten", extra={"conversation": conversation})
        return known

    async def _drop_conversation(self, conversation: str) -> bool:
        known = any(
            conversation in d for d in (self._tabs, self._pending, self._seen, self._active)
        )
        session = self._session
        if session is not None and session.alive:
            for page in list(session.pages(conversation)):
                known = True
                if session.page_is_open(page):
                    await session.close_page(page)
        self._borrows.forget(conversation)
        for book in (self._tabs, self._pending, self._seen, self._active, self._takeovers):
            book.pop(conversation, None)
        self._uses.forget(conversation)
        return known

    async def _retire_idle_conversations(self) -> tuple[str, ...]:
        """Forget conversations idle past ``conversation_idle_timeout`` (under the lock)."""
        limit = self._conversation_idle_timeout
        if limit is None:
            return ()
        mono, now = self._clock.monotonic(), self._clock.now()
        owners = {r.owner for r in self._ledger.live()}
        retired: list[str] = []
        for conversation in sorted({*self._seen, *self._pending, *self._tabs}):
            # Known from a saved state or only through news: its idle clock starts now.
            last = self._active.setdefault(conversation, mono)
            tab = self._tabs.get(conversation)
            if tab is not None:
                last = max(last, tab.last_used)
            taken_over = self._takeovers.get(conversation, now) > now
            if mono - last <= limit.total_seconds() or conversation in owners or taken_over:
                continue
            await self._drop_conversation(conversation)
            retired.append(conversation)
        return tuple(retired)

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
        session = self._session
        if session is not None and session.alive and not self._closed:
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

    # -- internals --------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise KeeperClosedError("this SessionKeeper was closed")

    def _takeover_active(self) -> bool:
        now = self._clock.now()
        return any(until > now for until in self._takeovers.values())

    def _idle_expired(self) -> bool:
        idle = self._clock.monotonic() - self._last_used
        return idle > self._idle_timeout.total_seconds() and not self._takeover_active()

    def _session_for(self, conversation: str) -> BrowserSession[PageT]:
        self._check_open()
        session = self._session
        if session is None or not session.alive or self._idle_expired():
            raise BrowserGoneError(
                f"{self.browser_id or 'the browser'} is gone; call ensure() to learn what was lost"
            )
        pending = self._pending.get(conversation)
        if pending is not None and pending.restarted:
            raise BrowserGoneError(
                f"the browser restarted since {conversation}'s last ensure(); call ensure() first"
            )
        return session

    def _facts_for(self, conversation: str) -> TurnFacts:
        pending = self._pending.pop(conversation, None)
        self._seen[conversation] = self._generation
        self._active[conversation] = self._clock.monotonic()
        common = {
            "conversation": conversation,
            "browser_id": f"browser-{self._generation}",
            "generation": self._generation,
        }
        if pending is None:
            return TurnFacts(restarted=False, **common)  # type: ignore[arg-type]
        return TurnFacts(
            restarted=pending.restarted,
            lost=tuple(pending.lost),
            revalidate=tuple(pending.revalidate),
            restored=tuple(pending.restored),
            previous_generation=pending.since_generation if pending.restarted else None,
            **common,  # type: ignore[arg-type]
        )

    def _pending_for(self, conversation: str, *, restarted: bool) -> _Pending:
        p = self._pending.get(conversation)
        if p is None:
            p = _Pending(since_generation=self._seen.get(conversation))
            self._pending[conversation] = p
        p.restarted = p.restarted or restarted
        return p

    def _session_closed(self, generation: int, cause: CloseCause) -> None:
        # Runs from the browser's own close/disconnect event: this is how a crash is
        # noticed without a round trip on the alive path.
        if generation != self._generation or self._ended is not None:
            return
        self._end_generation(cause)
        self._save_soon()
        log.warning("browser gone", extra={"generation": generation, "cause": cause})
        if self._on_browser_lost is not None:
            self._on_browser_lost(
                BrowserLost(
                    browser_id=f"browser-{generation}",
                    generation=generation,
                    cause=cause,
                    at=self._clock.now(),
                )
            )

    async def _close_idle(self, session: BrowserSession[PageT]) -> None:
        self._end_generation("idle")
        if not self._keep_logins_on_idle_close:
            # A swept browser must not leave a live credential in the profile.
            for record in self._ledger.live():
                await session.clear_cookies(record.site)
        await session.close()

    async def _close_idle_tabs(
        self, session: BrowserSession[PageT], mono: float
    ) -> list[ClosedTab]:
        assert self._tab_idle_timeout is not None
        limit = self._tab_idle_timeout.total_seconds()
        closed: list[ClosedTab] = []
        for conversation, tab in list(self._tabs.items()):
            idle = mono - tab.last_used
            if idle <= limit:
                continue
            if tab.page is not None and session.page_is_open(tab.page):
                await session.close_page(tab.page)
            del self._tabs[conversation]
            closed.append(
                ClosedTab(
                    conversation=conversation, last_url=tab.last_url, idle=timedelta(seconds=idle)
                )
            )
            self._pending_for(conversation, restarted=False).add_loss(
                Lost(
                    kind="tab",
                    name=conversation,
                    owner=conversation,
                    when=tab.verified_at,
                    last_url=tab.last_url,
                    generation=tab.generation,
                    cause="idle",
                )
            )
        return closed

    async def _restart(self) -> None:
        old = self._session
        if old is not None and old.alive:
            # Alive but idle past the limit: the seed's rule is that it has expired
            # even if no sweep ran yet.
            await self._close_idle(old)
        new = await self._launch()
        try:
            for hook in self._launch_hooks:
                await while_alive(new, hook(new, self._generation + 1), "a launch hook")
            fates = await self._measure_logins(new)
        except BaseException as exc:
            died = not new.alive
            await new.kill()
            if died and not isinstance(exc, asyncio.CancelledError):
                # Whatever a hook's driver said about it, the fact is a failed start.
                raise BrowserLaunchError("the new browser died while starting") from None
            raise
        old_generation = self._generation
        # An act decided in the old browser carries nothing into the new one.
        self._uses.clear()
        self._generation += 1
        self._session = new
        self._ended = None
        generation = self._generation
        self._generations.append(
            GenerationRecord(generation=generation, started_at=self._clock.now())
        )
        new.on_close(lambda cause: self._session_closed(generation, cause))
        if old_generation:
            gone = self._account_restart(old_generation, fates)
            if self._vault is not None and gone:
                await self._restore_from_vault(new, gone)
        # The jar as this browser starts: a cookie already in it is never sign-in evidence.
        self._evidence.reset(await new.cookies())
        log.info("browser started", extra={"generation": generation})

    async def _launch(self) -> BrowserSession[PageT]:
        """Launch; after our own process died, give its orphaned browser time to exit.

        Measured here: a browser whose keeper process was SIGKILLed exits about half
        a second later, when Playwright's driver is gone. Until then its profile is
        locked, so ProfileInUse is retried for a bounded time in that case only.
        """
        attempts = ORPHAN_EXIT_ATTEMPTS if self._ended == "process_exit" else 1
        for attempt in range(attempts):
            try:
                return await self._backend.launch()
            except ProfileInUse:
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(ORPHAN_EXIT_POLL_S)
        raise AssertionError("unreachable")

    def _end_generation(self, cause: EndCause) -> None:
        self._ended = cause
        if self._generations and self._generations[-1].ended_at is None:
            self._generations[-1] = attrs.evolve(
                self._generations[-1], ended_at=self._clock.now(), cause=cause
            )

    # -- persistence ------------------------------------------------------------------
    async def _load(self) -> None:
        """Pick up where a previous process stopped (once; under ``self._lock``).

        The previous process's browser died with it, so its generation counts as
        ended; the first ensure() then relaunches and reports, per conversation, what
        that took — measured against the new browser's cookie jar as usual.
        """
        state = None
        if not self._loaded and self._store is not None:
            doc = await self._store.load_keeper_state(self._keeper_id)
            if doc is not None:
                state = from_document(doc, self._keyring)  # raises before changing anything
        if self._audit is not None and not self._audit_verified:
            # A tampered audit trail, or one cut short of the head our sealed state
            # remembers: refuse to act (AuditTampered), write nothing.
            head = state.audit_head if state is not None else None
            await self._audit.open(expected_head=head)
            self._audit_verified = True
        if self._loaded or self._store is None:
            return
        if state is not None:
            self._apply(state)
        self._loaded = True

    def _apply(self, state: KeeperState) -> None:
        # Grants first: the only part that can still refuse, before anything changes.
        self._grants.merge_saved((s.grant, s.uses_left) for s in state.grants)
        self._generation = state.generation
        self._generations = list(state.generations)
        if self._generations and self._generations[-1].ended_at is None:
            self._end_generation("process_exit")
        self._ended = self._ended or ("process_exit" if state.generation else None)
        self._ledger.load(state.logins, state.lost_logins)
        self._tabs = {
            t.conversation: _Tab(
                page=None,
                generation=t.generation,
                last_url=t.last_url,
                verified_at=t.verified_at,
                last_used=self._clock.monotonic(),
            )
            for t in state.tabs
        }
        self._pending = {
            conv: _Pending(
                since_generation=p.since_generation,
                restarted=p.restarted,
                lost=list(p.lost),
                revalidate=list(p.revalidate),
                restored=list(p.restored),
            )
            for conv, p in state.pending.items()
        }
        self._seen = dict(state.seen)
        self._takeovers = dict(state.takeovers)
        self._borrows.load(state.borrow_requests)

    def _snapshot(self) -> KeeperState:
        return KeeperState(
            generation=self._generation,
            generations=tuple(self._generations[-100:]),
            logins=self._ledger.live(),
            lost_logins=self._ledger.lost_records(),
            tabs=tuple(
                SavedTab(
                    conversation=conv,
                    last_url=t.last_url,
                    verified_at=t.verified_at,
                    generation=t.generation,
                )
                for conv, t in self._tabs.items()
            ),
            grants=tuple(
                SavedGrant(grant=s.grant, uses_left=s.uses_left) for s in self._grants.states()
            ),
            pending={
                conv: SavedPending(
                    since_generation=p.since_generation,
                    restarted=p.restarted,
                    lost=tuple(p.lost),
                    revalidate=tuple(p.revalidate),
                    restored=tuple(p.restored),
                )
                for conv, p in self._pending.items()
            },
            seen=dict(self._seen),
            takeovers=dict(self._takeovers),
            borrow_requests=self._borrows.requests(),
            audit_head=self._audit.head if self._audit is not None else None,
        )

    async def _save(self) -> None:
        """Write the keeper's document now (no-op without a store).

        Raises :class:`UnsavedChanges` (the store's error as its cause) when the
        store cannot take it; the change stays unsaved and counted.
        """
        if self._store is None or not self._loaded:
            return
        async with self._save_lock:
            # Snapshot inside the lock so the last write carries the newest state.
            changes = self._writes.changes
            doc = to_document(self._snapshot(), self._keyring)
            try:
                await self._store.save_keeper_state(
                    self._keeper_id, doc, projections=keeper_projections(doc)
                )
            except Exception as exc:
                _raise_unsaved(exc, "the keeper's state")
            self._writes.saved_up_to(changes)

    def _save_soon(self) -> None:
        """A synchronous method (decide, grant, ...) changed durable state: its owner writes it."""
        if self._store is None:
            return
        self._writes.changed()

    def _save_url_soon(self) -> None:
        """Save a tab's new verified URL in the background, at most once a second.

        A navigation is not worth an fsync on the agent's path; the change is counted
        as unsaved, and any save in between, persist() and aclose() carry it.
        """
        mono = self._clock.monotonic()
        if mono - self._last_url_save >= URL_SAVE_INTERVAL_S:
            self._last_url_save = mono
            self._save_soon()
        elif self._store is not None:
            self._writes.changed(schedule=False)

    async def _write_all(self) -> None:
        """The owner's write: the document when it changed, then every queued audit entry."""
        if self._writes.state_unsaved():
            await self._save()
        await self._flush_audit()

    async def _write_through(self) -> None:
        """Write everything unsaved now; raise if it cannot be (for enforcement layers).

        Unlike :meth:`persist`, an earlier background failure stays for the
        application's next call to hear: the Guard must not swallow it.
        """
        await self._writes.drain()
        await self._save()
        await self._flush_audit()

    @property
    def unsaved(self) -> bool:
        """Whether a change (keeper state or an audit entry) is not in the store yet."""
        return self._writes.state_unsaved() or bool(self._audit_pending)

    async def persist(self) -> None:
        """Wait until every change so far is in the store (and the audit trail).

        Raises :class:`UnsavedChanges` when anything could not be written (the change
        is kept; call again to retry), and — once, before writing anything — when a
        background write failed since the last awaited call.
        """
        await self._writes.drain()
        self._writes.raise_failure()
        self._writes.clear_orphaned()
        await self._save()
        await self._flush_audit()

    def _audit_soon(self, type: str, body: dict[str, object]) -> None:
        """Queue an audit entry; entries are written in the order things happened."""
        if self._audit is None:
            return
        self._audit_pending.append((type, body, self._generation or None))
        self._writes.changed(document=False)

    async def _flush_audit(self) -> None:
        """Write the queued audit entries, oldest first; one writer, in order.

        An entry leaves the queue only once it is written: a failed write keeps it
        (and everything after it) queued, and the next flush retries from there.
        """
        if self._audit is None:
            return
        async with self._audit_lock:
            while self._audit_pending:
                type_, body, generation = self._audit_pending[0]
                try:
                    await self._audit.record(type_, body, generation=generation)
                except Exception as exc:
                    _raise_unsaved(exc, "an audit entry")
                self._audit_pending.pop(0)

    async def _measure_logins(self, session: BrowserSession[PageT]) -> dict[str, _Fate]:
        """Classify every recorded login against a new browser: its jar, then its probe."""
        records = self._ledger.live()
        if not records:
            return {}
        jar = await session.cookies()
        self._remember_jar(jar)  # a probe's error may quote them
        fates: dict[str, _Fate] = {}
        for record in records:
            fate: _Fate = classify(record, jar, self._fingerprinter)
            probe = self._login_probes.get(record.site)
            if fate == "survived" and probe is not None:
                fate = await self._run_probe(session, record, probe)
            fates[record.site] = fate
        return fates

    async def _run_probe(
        self, session: BrowserSession[PageT], record: LoginRecord, probe: LoginProbe[PageT]
    ) -> _Fate:
        """Ask the site who is signed in: the cookies may be there while the login is not."""
        try:
            identity = await ask_probe(session, probe, PROBE_CONVERSATION, PROBE_TIMEOUT_S)
        except Exception:
            log.warning("login probe failed", extra={"site": record.site}, exc_info=True)
            return "survived"
        if identity is None:
            return "signed_out"
        if record.account is not None and identity != record.account:
            return "replaced"
        return "confirmed" if record.account is not None else "survived"

    async def _restore_from_vault(
        self, session: BrowserSession[PageT], gone: Mapping[str, tuple[LoginRecord, set[str]]]
    ) -> None:
        """Put back, from the vault, lost logins whose policy allows it.

        Runs after the jar was measured, so a restored login can never read as
        survived; it stays in ``lost`` and is reported in ``restored``.
        """
        assert self._vault is not None
        restored = await self._vault.restore(session, sorted(gone))
        if not restored:
            return
        jar = await session.cookies()
        for r in restored:
            old, recipients = gone[r.site]
            # The restored login is carried by the cookies that were its evidence,
            # not by whatever else of the site (a CSRF cookie) is in the jar.
            wanted = {(f.name, f.domain, f.path) for f in old.cookies}
            cookies = sorted(
                (c for c in jar if c.applies_to(r.site) and cookie_id(c) in wanted),
                key=lambda c: (c.domain, c.path, c.name),
            )
            self._ledger.record(
                attrs.evolve(
                    old,
                    recorded_at=self._clock.now(),
                    generation=self._generation,
                    cookies=tuple(self._fingerprinter.fingerprint(c) for c in cookies),
                    needs_revalidation=True,
                )
            )
            for c in sorted(recipients):
                p = self._pending_for(c, restarted=True)
                if r.site not in p.restored:
                    p.restored.append(r.site)
            self._audit_soon("login_restored", {"site": r.site, "cookies": list(r.cookie_names)})
            log.info("login restored from the vault", extra={"site": r.site})

    def _account_restart(
        self, old_generation: int, fates: Mapping[str, _Fate]
    ) -> dict[str, tuple[LoginRecord, set[str]]]:
        """Tell every affected conversation what the restart took, as measured.

        Returns the logins that are simply gone (not replaced or signed out), with
        who was told: the ones a vault may put back.
        """
        gone: dict[str, tuple[LoginRecord, set[str]]] = {}
        now = self._clock.now()
        for record in self._ledger.live():
            recipients = {record.owner} | self._grants.holders(record.site, now)
            fate = fates.get(record.site, "lost")
            if fate == "confirmed":
                # The probe vouched for the same account: nothing to re-validate.
                self._ledger.carry(record, self._generation)
                self._ledger.confirm(record.site)
                for c in sorted(recipients):
                    self._pending_for(c, restarted=True)
                continue
            if fate == "survived":
                self._ledger.carry(record, self._generation)
                for c in sorted(recipients):
                    p = self._pending_for(c, restarted=True)
                    if record.site not in p.revalidate:
                        p.revalidate.append(record.site)
                continue
            loss = Lost(
                kind="login",
                name=record.site,
                owner=record.owner,
                when=record.recorded_at,
                generation=old_generation,
                cause="replaced"
                if fate == "replaced"
                else "signed_out"
                if fate == "signed_out"
                else "gone",
            )
            self._ledger.mark_lost(loss)
            if loss.cause == "gone":
                gone[record.site] = (record, recipients)
            self._audit_soon(
                "login_lost",
                {
                    "site": loss.name,
                    "owner": loss.owner,
                    "cause": loss.cause,
                    "generation": old_generation,
                },
            )
            for c in sorted(recipients):
                self._pending_for(c, restarted=True).add_loss(loss)
        for conversation, tab in self._tabs.items():
            self._pending_for(conversation, restarted=True).add_loss(
                Lost(
                    kind="tab",
                    name=conversation,
                    owner=conversation,
                    when=tab.verified_at,
                    last_url=tab.last_url,
                    generation=old_generation,
                )
            )
        self._tabs.clear()
        log.warning(
            "browser restarted",
            extra={
                "previous_generation": old_generation,
                "generation": self._generation,
                "affected": sorted(c for c, p in self._pending.items() if p.restarted),
            },
        )
        return gone

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("alive" if self.alive else "not running")
        return f"<SessionKeeper {self.browser_id or 'no browser yet'} {state}>"


def _raise_unsaved(exc: Exception, what: str) -> NoReturn:
    typed = as_unsaved(exc, what)
    if typed is exc:
        raise exc
    raise typed from exc


def _grant_body(g: Grant) -> dict[str, object]:
    return {
        "conversation": g.conversation,
        "site": g.site,
        "actions": sorted(g.actions),
        "expires_at": g.expires_at.isoformat() if g.expires_at is not None else None,
        "uses": g.uses,
        "approved_by": g.approved_by,
    }
