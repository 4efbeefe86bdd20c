"""SessionKeeper: the one object an agent asks "what is true about my browser now?".

A facade: the public methods and their documented guarantees live here; each concern
is a collaborator in its own module (see the class docstring and docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

from session_keeper._browser.backend import BrowserBackend, BrowserSession, PageT
from session_keeper._browser.capabilities import capabilities_of
from session_keeper._keeper.facade.settings import (
    Durability,
    IdleTimeouts,
    LoginSettings,
    settings_group,
)
from session_keeper._keeper.facade.wiring import wire
from session_keeper._keeper.guard_link.navigation_guard import AttachedGuard
from session_keeper._keeper.lifecycle.browser_lifetime import BrowserLifetime
from session_keeper._keeper.lifecycle.conversations import Conversations
from session_keeper._keeper.lifecycle.sweeper import Sweeper, Sweeping, start_sweeper
from session_keeper._keeper.logins.keeper_logins import KeeperLogins
from session_keeper._keeper.logins.login_records import PROBE_CONVERSATION, LoginProbe, Logins
from session_keeper._keeper.logins.renewal import Renewals
from session_keeper._keeper.permissions.granting import GrantDesk
from session_keeper._keeper.permissions.keeper_permissions import KeeperPermissions
from session_keeper._keeper.saving.persistence import KeeperPersistence
from session_keeper._keeper.state.live import KeeperLive
from session_keeper._keeper.state.saved import GenerationRecord
from session_keeper._keeper.tabs.conversation_pages import Tabs
from session_keeper._keeper.tabs.conversation_tab import bind_tab
from session_keeper._keeper.tabs.replay import Replay, ReplayRecorder
from session_keeper._keeper.tabs.spans import traced_turn
from session_keeper._model.authorisation import RestartPolicy
from session_keeper._model.cookies import normalize_site
from session_keeper._model.facts import (
    BrowserLost,
    SweepReport,
    TabView,
    TurnFacts,
)
from session_keeper._model.grants import DEFAULT_ACTIONS, Grant, check_name
from session_keeper._telemetry import Telemetry, instruments_for
from session_keeper._util.clock import Clock
from session_keeper._util.log_fields import log_fields
from session_keeper._util.redact import scrub_secrets, scrubbing_logger
from session_keeper._util.validate import check_duration
from session_keeper.errors import (
    BrowserError,
    GuardAlreadyAttached,
    InvalidArgument,
    InvalidArgumentType,
    UsageError,
)

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from session_keeper._keeper.tabs.conversation_tab import ConversationTab
    from session_keeper._security.audit import AuditLog
    from session_keeper.stores import Store, StoreLifetime

__all__ = [
    "PROBE_CONVERSATION",
    "LoginProbe",
    "RestartPolicy",
    "SessionKeeper",
    "drain_keeper_writes",
    "held_tab_locks",
]

log = scrubbing_logger("session_keeper")


class SessionKeeper(KeeperLogins[PageT], KeeperPermissions[PageT]):
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

    The keeper is a facade: each concern is a part of its own over one shared live
    state — the browser's lifetime, tabs, logins, restart accounting, conversations'
    news and end, persistence, authorisation, borrow requests and the sweeper; the
    login and permission methods are its base classes :class:`KeeperLogins` and
    :class:`KeeperPermissions`.

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
        actions: Iterable[str] = DEFAULT_ACTIONS,
        restart_policy: Mapping[str, RestartPolicy] | None = None,
        on_browser_lost: Callable[[BrowserLost], None] | None = None,
        idle_timeouts: IdleTimeouts | None = None,
        login_settings: LoginSettings | None = None,
        durability: Durability | None = None,
        telemetry: Telemetry | None = None,
        replay: Replay | None = None,
    ) -> None:
        """A keeper over ``backend``'s browsers (none is launched before :meth:`ensure`).

        ``grants``: who may use which site's login; ``actions``: the action names
        grants may name; ``restart_policy``: action -> ``"stop"`` or ``"relogin"`` after
        a restart took the login; ``on_browser_lost``: called when a browser is lost.
        The settings groups: :class:`~session_keeper.IdleTimeouts`,
        :class:`~session_keeper.LoginSettings`, :class:`~session_keeper.Durability`
        (each defaults to its class's defaults), :class:`~session_keeper.Telemetry`
        (OpenTelemetry spans and metrics; default: the global providers), and
        :class:`~session_keeper.Replay`, which turns on the recording of each
        conversation's pages (off by default)::

            SessionKeeper(
                PlaywrightBackend(profile_dir=...),
                idle_timeouts=IdleTimeouts(browser=timedelta(minutes=5)),
                durability=Durability(store=SqliteStore("keeper.db")),
            )

        A group of the wrong type, or bad settings, raise :class:`InvalidArgument` /
        :class:`InvalidArgumentType` before anything is built.
        """
        the_durability = settings_group("durability", durability, Durability)
        the_idle = settings_group("idle_timeouts", idle_timeouts, IdleTimeouts)
        the_login = settings_group("login_settings", login_settings, LoginSettings)
        instruments = instruments_for(telemetry)
        if replay is not None and not isinstance(replay, Replay):
            raise InvalidArgumentType(f"replay must be a Replay, not {type(replay).__name__}")
        parts = wire(
            self,
            backend,
            clock=clock,
            grants=grants,
            actions=actions,
            restart_policy=restart_policy,
            on_browser_lost=on_browser_lost,
            idle=the_idle,
            login=the_login,
            durability=the_durability,
        )
        self._clock: Clock = parts.clock
        self._backend = backend
        self._audit = the_durability.audit
        self._vault = the_durability.vault
        self._sweeper: Sweeper | None = None
        self._live: KeeperLive[PageT] = parts.live
        self._persist: KeeperPersistence[PageT] = parts.persist
        self._authorisation = parts.authorisation
        self._lifetime: BrowserLifetime[PageT] = parts.lifetime
        self._tabs: Tabs[PageT] = parts.tabs
        self._logins: Logins[PageT] = parts.logins
        self._navigation_guard: AttachedGuard | None = None
        self._renewals: Renewals[PageT] = parts.renewals
        self._desk: GrantDesk[PageT] = parts.desk
        self._conversations: Conversations[PageT] = parts.conversations
        self._sweeping: Sweeping[PageT] = parts.sweeping
        self._remember_jar = parts.remember_jar
        self._states = parts.states
        self._telemetry = instruments.settings
        parts.live.instruments = instruments
        self._replay = None if replay is None else ReplayRecorder(replay, parts.clock)

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
        """Stop the sweeper, close the browser cleanly, close the attached Guard
        (:meth:`~session_keeper.Guard.aclose`) and release the backend. Idempotent."""
        if self._live.closed:
            return
        self._live.closed = True
        self.stop_sweeper()
        # The jar reads of the last navigations end before their browser does.
        await self._tabs.baselines.settle()
        try:
            async with self._live.lock:
                await self._lifetime.aclose()
        finally:
            # The keeper owns the link to its Guard: the Guard ends with it (after the
            # browser, so that it asks a closed browser nothing).
            guard = self._navigation_guard
            if guard is not None:
                await guard.aclose()
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
    def telemetry(self) -> Telemetry:
        """Where this keeper's spans and metrics go (the job loop and Guard follow it)."""
        return self._telemetry

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
        """The tab's last committed web URL, however it got there (or as mark_verified set it)."""
        return self._tabs.last_verified_url(conversation)

    # -- the turn -------------------------------------------------------------------

    async def ensure(
        self, conversation: str, *, turn: str | None = None, defer_quiet_write: bool = False
    ) -> TurnFacts:
        """Start a turn: make sure a browser is alive and say what changed for ``conversation``.

        ``turn``: an id that stays the same when a framework re-executes the step (a
        LangGraph checkpoint, an MCP request id). Every call with the same turn id gets
        the same facts — saved with the keeper's state, so a re-execution in a new
        process gets exactly them too — plus what a restart in the middle of the turn,
        in the process running it, added; a new turn id starts afresh and is not told
        them again. A new process's own launch is not added to a turn an earlier process
        told: it is the next turn's news.

        ``defer_quiet_write`` (with ``turn``): a new turn with nothing to tell (nothing
        pending, not the conversation's first turn in this browser) is not written before
        ``ensure`` returns; the caller's next :meth:`persist` (or any later write) carries
        it, so a step that ends with a write of its own writes once. Only for a caller
        whose turn ids are never re-executed in another process before that write (the
        DBOS integration numbers a recovered workflow's turns): a turn whose record was
        never written would be told that process's launch there, not the same nothing. A
        turn with news is written first, as always.

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
        if not isinstance(defer_quiet_write, bool):
            raise InvalidArgumentType("defer_quiet_write must be a bool")
        defer = defer_quiet_write and turn is not None
        instruments = self._live.instruments
        tracing = instruments.tracing
        if turn is None and not (tracing and instruments.in_trace()):
            # Outside a caller's trace a quiet turn gets no span (traced_turn gives one
            # only to a turn with news): it is answered at once, as _ensure would.
            quiet = self._conversations.quiet(conversation)
            if quiet is not None:
                return quiet
        if not tracing:  # the common case, kept one coroutine shallow
            with log_fields(conversation=conversation):
                return await self._ensure(conversation, turn, defer)
        return await traced_turn(
            instruments,
            conversation,
            alive=lambda: self._live.alive,
            run=lambda: self._ensure(conversation, turn, defer),
        )

    async def _ensure(self, conversation: str, turn: str | None, defer: bool) -> TurnFacts:
        await self._persist.writes.settle()
        if self._live.alive:
            self._live.last_used = self._clock.monotonic()
            return await self._conversations.deliver(
                conversation, turn=turn, defer_quiet_write=defer
            )
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
        :meth:`unguarded_page` does, and :class:`~session_keeper.errors.NavigationBlocked`
        when the Guard refused the navigation.
        """
        conversation = check_name(conversation, "conversation")
        page = await self._tabs.tab(conversation)
        handle = bind_tab(self, self._live, conversation, page, replay=self._replay)
        if url is not None:
            await handle.goto(url)
        return handle

    @property
    def navigation_guard(self) -> AttachedGuard | None:
        """The Guard enforcing this keeper's grants (the one attached, open), if any."""
        return self._navigation_guard

    def attach_guard(self, guard: AttachedGuard) -> None:
        """Called by a :class:`~session_keeper.Guard` as it is made on this keeper: the
        keeper's navigations ask it why a page was refused, and closing the keeper
        closes it (:meth:`aclose`).

        Raises :class:`~session_keeper.errors.GuardAlreadyAttached` when another Guard
        is attached (one interception layer per browser: two would each decide and
        count every request); nothing changes then.
        """
        attached = self._navigation_guard
        if attached is not None and attached is not guard:
            raise GuardAlreadyAttached(
                "this keeper already has a Guard: close it (await guard.aclose()) first"
            )
        self._navigation_guard = guard

    def detach_guard(self, guard: AttachedGuard) -> None:
        """Called by a :class:`~session_keeper.Guard` as it closes: the keeper forgets it
        (nothing when another Guard, or none, is attached)."""
        if self._navigation_guard is guard:
            self._navigation_guard = None

    async def sign_in_tab(self, conversation: str, url: str | None = None) -> ConversationTab:
        """A page of its own where a person or a recipe signs ``conversation`` in.

        Secrets are typed where no model reaches: the page is guarded as the
        conversation's (its grants and its sign-in in progress apply) but is none of its
        pages — not its tab, not among its popups or the MCP server's tabs, with no
        opener and no window name — so no handle, tool or popup of the conversation, nor
        a same-origin page the model opened, can read what is typed into it. A popup it
        opens (an identity provider's) is a sign-in page too. Hand it to trusted code
        only (a recipe, the console's live view); close it when done (``close()``), then
        move the conversation's tab to the signed-in page (``tab(conversation, url)``).
        ``url``: navigate first. Raises :class:`~session_keeper.errors.UsageError` on a
        backend whose sessions cannot open such pages, :class:`BrowserGoneError` as
        :meth:`tab` does.
        """
        conversation = check_name(conversation, "conversation")
        session = self._live.session_for(conversation)
        sign_in_pages = capabilities_of(session).sign_in_pages
        if sign_in_pages is None:
            raise UsageError(
                f"{type(session).__name__} cannot open a sign-in page of its own; sign in "
                "on the conversation's tab instead"
            )
        generation = self._live.generation
        # A person or a recipe acts there: the held jar reads go out first (see
        # NavigationBaselines).
        await self._tabs.baselines.acting()
        page = await sign_in_pages.open_sign_in_page(conversation)
        self._live.still_current(session, generation)
        handle = bind_tab(self, self._live, conversation, page, replay=self._replay, main=False)
        if url is not None:
            await handle.goto(url)
        return handle

    def unguarded_sign_in_pages(self, conversation: str) -> tuple[PageT, ...]:
        """The conversation's open sign-in pages (:meth:`sign_in_tab`) and the popups they
        opened (an identity provider's), oldest first, as raw pages.

        For trusted application code only (the console's live view streams them to the
        person signing in): what is typed there is a secret no model may read. No round
        trip; empty while no browser runs or on a backend without sign-in pages. Raises
        :class:`InvalidArgument` for a malformed conversation id.
        """
        conversation = check_name(conversation, "conversation")
        session = self._live.session
        sign_in_pages = None if session is None else capabilities_of(session).sign_in_pages
        if sign_in_pages is None:
            return ()
        # Raw pages go out: the held jar reads are sent first.
        self._tabs.baselines.acting_soon()
        return tuple(cast("Sequence[PageT]", sign_in_pages.sign_in_pages(conversation)))

    async def unguarded_page(self, conversation: str, url: str | None = None) -> PageT:
        """The conversation's raw Playwright ``Page`` — for trusted application code only.

        Unguarded: through the raw page, ``page.request``/``page.context.request`` skip
        the Guard, ``page.context.cookies()`` reads every cookie value and
        ``page.context.pages`` reaches other conversations' tabs. Never hand it to
        LLM-driven code; use :meth:`tab`. Navigates first when ``url`` is given; the
        URL it ends on (and any the page commits later) is what a lost tab reports,
        unless the Guard blocked it.

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
        :class:`~session_keeper.errors.NavigationBlocked` when the Guard refused the navigation
        of a page that showed a document (the page keeps it).
        """
        page = await self._tabs.tab(conversation, url)
        # Its caller acts on the raw page directly: the held jar reads go out before it
        # can (see NavigationBaselines).
        await self._tabs.baselines.acting()
        return page

    async def _navigate_tab(self, conversation: str, url: str) -> None:
        """A :class:`ConversationTab` navigation of the conversation's tab: its jar read
        waits for the conversation's next act (see NavigationBaselines)."""
        await self._tabs.tab(conversation, url, hold=True)

    async def _before_acting(self, conversation: str) -> None:
        """A handle of ``conversation`` is about to act on a page: the held jar reads go
        first (every conversation's: the jar is shared; no round trip when none is held)."""
        del conversation
        await self._tabs.baselines.acting()

    async def save_downloads(
        self, conversation: str, directory: str | os.PathLike[str]
    ) -> tuple[Path, ...]:
        """Save what ``conversation``'s pages downloaded into ``directory`` (for trusted
        application code: it writes files).

        Chromium deletes a browser's downloads when it closes, so a download nobody saved
        is named in the lost list of the restart that takes it (``download:<file>``, as
        typed-but-unsubmitted form input is ``input:<field>``). Each finished download is
        saved under the name the site suggested (``name (2).ext`` when taken) and the
        paths are returned; one still in flight is left for a later call. ``()`` on a
        backend that does not download (``FakeBackend``). Raises
        :class:`InvalidArgument` when ``directory`` is not an existing directory, and
        :class:`BrowserGoneError` as :meth:`unguarded_page` does.
        """
        conversation = check_name(conversation, "conversation")
        target = _existing_directory(directory)
        session = self._live.session_for(conversation)
        # A session that sees no downloads has none to save: ().
        return await capabilities_of(session).activity.save_downloads(conversation, target)

    def unguarded_popups(self, conversation: str) -> tuple[PageT, ...]:
        """The conversation's open pages other than its tab — the popups it opened (an
        OAuth or SSO window) and theirs, oldest first — as raw pages.

        For trusted application code only, as :meth:`unguarded_page` (the console's live
        view follows them). No round trip; empty while no browser runs. Raises
        :class:`InvalidArgument` for a malformed conversation id.
        """
        conversation = check_name(conversation, "conversation")
        # Raw pages go out: the held jar reads are sent first.
        self._tabs.baselines.acting_soon()
        return self._live.popups(conversation)

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

    def mark_verified(self, conversation: str) -> str:
        """Record the tab's current URL as verified (the agent checked the page); return it."""
        return self._tabs.mark_verified(conversation)

    # -- extension points -------------------------------------------------------------

    def add_launch_hook(
        self, hook: Callable[[BrowserSession[PageT], int], Awaitable[None]]
    ) -> None:
        """Run ``await hook(session, generation)`` after each launch, before any page opens.

        Enforcement layers use it to watch every page of every browser the keeper
        starts (``session.on_page``). A hook that raises fails the launch.
        """
        self._lifetime.add_launch_hook(hook)

    def remove_launch_hook(
        self, hook: Callable[[BrowserSession[PageT], int], Awaitable[None]]
    ) -> None:
        """Stop running ``hook`` (added by :meth:`add_launch_hook`); nothing if it is not there.

        A launch under way when it is removed may still run it that once.
        """
        self._lifetime.remove_launch_hook(hook)

    def add_grants_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` each time a grant is added or revoked, before that call returns.

        Enforcement layers that skip decisions whose answer only grants can change
        use it to stop skipping them at once.
        """
        self._live.grants.changed_hooks.append(hook)

    def remove_grants_hook(self, hook: Callable[[], None]) -> None:
        """Stop calling ``hook`` (added by :meth:`add_grants_hook`); nothing if it is not there."""
        with contextlib.suppress(ValueError):
            self._live.grants.changed_hooks.remove(hook)

    @property
    def store(self) -> Store | None:
        """The store the keeper persists to, if any."""
        return self._persist.store

    def stores(self) -> tuple[StoreLifetime, ...]:
        """Every store the keeper reads or writes, each once: its state store, its audit
        log's, its login vault's (in that order, those it has).

        The keeper does not open or close them (several keepers may share one): their
        owner opens them before entering the keeper and closes them after closing it.
        :class:`~session_keeper.integrations.sync.SyncKeeper` does so for the keeper its
        factory builds.
        """
        found: list[StoreLifetime] = []
        for store in (
            self._persist.store,
            None if self._audit is None else self._audit.store,
            None if self._vault is None else self._vault.store,
        ):
            if store is not None and not any(store is s for s in found):
                found.append(store)
        return tuple(found)

    @property
    def keeper_id(self) -> str:
        """The name this keeper's state is saved under in its store."""
        return self._persist.keeper_id

    @property
    def backend(self) -> BrowserBackend[PageT]:
        """The backend the keeper launches its browsers with."""
        return self._backend

    @property
    def replay(self) -> ReplayRecorder | None:
        """The recorder of each conversation's pages, when the keeper was given a
        :class:`~session_keeper.Replay` (``None``: recording is off)."""
        return self._replay

    @property
    def audit(self) -> AuditLog | None:
        """The audit log the keeper writes its entries to, if any."""
        return self._audit

    # -- sweeping ---------------------------------------------------------------------

    async def sweep(self, *, close_browser: bool = False) -> SweepReport:
        """Close a browser idle past the limit, idle tabs, and expired grants; say what closed.

        ``close_browser=True`` closes the running browser now, idle or not, exactly as
        an idle close (a pool evicting its least recently used browser does this): its
        conversations are told on their next :meth:`ensure`, as after any sweep.

        With ``IdleTimeouts.conversation``, conversations without a turn for that long
        are forgotten (see :meth:`forget`), except one that owns a live login or is
        taken over by a person; they are listed in ``retired_conversations``.

        With the default idle policy the logins the ledger knows are deleted from
        the jar before the close, so a swept profile holds no live credential. Then the
        logins due a health check are probed, and renewed when signed out
        (:meth:`check_logins`).
        """
        if not isinstance(close_browser, bool):
            raise InvalidArgumentType("close_browser must be a bool")
        # A sign-in nobody finished must not leave an owned credential behind.
        await self._logins.expire_sign_ins()
        report = await self._sweeping.sweep(close_browser=close_browser)
        if self._replay is not None:
            await self._replay.prune()  # the age bound of conversations no longer acting
        await self.check_logins()
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

    async def write_through(self) -> None:
        """Write everything unsaved now; raise if it cannot be (for enforcement layers,
        which must not let a request go on a use the store does not hold).

        Unlike :meth:`persist`, an earlier background failure stays for the
        application's next call to hear: the Guard must not swallow it.
        """
        await self._persist.write_through()

    def _check_open(self) -> None:
        self._live.check_open()

    def __repr__(self) -> str:
        state = "closed" if self._live.closed else ("alive" if self._live.alive else "not running")
        return f"<SessionKeeper {self._live.browser_id or 'no browser yet'} {state}>"


# -- keeper testing mode: what session_keeper.testing re-exports -------------------------


async def drain_keeper_writes(keeper: SessionKeeper[Any]) -> None:
    """Wait until the keeper's background writer is idle; raise nothing it failed with.

    A failure stays kept for the keeper's next awaited call (see ``SessionKeeper``).
    """
    await keeper._persist.writes.drain()


def own_popups(keeper: SessionKeeper[PageT], conversation: str) -> tuple[PageT, ...]:
    """The conversation's popups as the keeper's own parts see them: nothing is handed out,
    so no held jar read is sent (a look, never an act; see ``unguarded_popups``)."""
    return keeper._live.popups(conversation)


def held_tab_locks(keeper: SessionKeeper[Any]) -> int:
    """How many conversations hold per-conversation tab state (a call in flight or queued)."""
    return keeper._tabs.held_locks


def _existing_directory(directory: str | os.PathLike[str]) -> Path:
    # A quick stat, done before any download is touched so nothing is half saved.
    target = Path(directory)
    if not target.is_dir():
        raise InvalidArgument("save_downloads() needs an existing directory")
    return target
