"""Guard: grants and origin allowlists enforced on the network of a Playwright browser.

Cookies are shared by every page of the browser; permission must not be. The Guard
answers a request that a conversation may not make with a local ``403`` page that
names the reason — the request never leaves the browser, so the site never sees
the login cookie. *What* it decides is :class:`~session_keeper.GuardPolicy` (no
browser needed); this module is *how* every request of the browser reaches it:

1. **Origin allowlist.** A conversation with an allowlist (:meth:`Guard.allow_origins`)
   may reach only those origins, for navigations and subresources alike.
2. **Logins.** A request to a host that a recorded login's cookies would be sent to
   needs a live grant for the action (``GET``/``HEAD`` are ``read``, every other
   method is ``write``; configurable per site). Reads and writes are counted alike
   (``keeper.admit``): **one write use is one request**, **one read use is one page
   load** (a top-level navigation, its redirect hops, and the reads that page then
   makes to the site until it navigates again or closes). A request that spent a use
   leaves the browser only after the spend is in the keeper's Store.
3. **Pages nobody owns** may not reach a signed-in host at all; the keeper's probe
   pages (:data:`~session_keeper.PROBE_CONVERSATION`) may read and never write.

How it is wired, and why (all measured on Debian Chromium 156 + Playwright 1.65):

- One CDP session on the **browser** target with ``Fetch`` enabled
  (the Guard's watch) pauses the requests of every page, frame, popup and
  dedicated worker, redirect hops included: one interception layer, one round trip
  per paused request. Playwright's own routing is not used: it hides redirect hops,
  adds a second round trip per request and turns the HTTP cache off.
- Only what can carry a protected login pauses: every document, and every request
  to a host a recorded login's cookies go to (everything, once a conversation has an
  origin allowlist). The rest never leaves Chromium's network stack for a decision.
- A popup's first navigation starts before Playwright announces the popup: it gets a
  local holding page, and is re-issued (as a ``GET``) once the popup is watched.
  A window that cannot be watched gets nothing (rule ``unwatched``).
- Service workers: ``PlaywrightBackend`` launches with ``service_workers="block"``;
  shared workers (no page's frame owns them) with ``--disable-shared-workers``.
- WebSockets bypass HTTP interception: each conversation page gets a
  ``route_web_socket`` handler (the handshake is judged as a ``GET``). A dedicated
  worker's cannot be routed or paused: Chromium refuses them by rule
  (:mod:`session_keeper._guard.sockets`) unless they would pass spending nothing.
- Rewriting the ``Cookie`` header does **not** work (Chromium adds cookies after
  interception); the Guard never relies on it.

Only a browser whose session is interceptable can be guarded (its pages in one
Playwright context: :class:`~session_keeper.PlaywrightBackend`'s and
:class:`~session_keeper.CdpBackend`'s): attached to any other, the Guard raises
:class:`~session_keeper.GuardUnsupported` at launch rather than let requests through
unguarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from session_keeper._browser.capabilities import (
    InterceptableSession,
    ReattachingSession,
    capabilities_of,
)
from session_keeper._browser.playwright_session import traceback_worth_logging
from session_keeper._guard.blocks import HOLD_MARK, block_page
from session_keeper._guard.policy import GuardPolicy
from session_keeper._guard.sockets import Rules, SocketRules, socket_rules
from session_keeper._guard.watch import (
    FetchWatch,
    fetch_patterns,
)
from session_keeper._keeper.guard_link.block_log import BlockLog
from session_keeper._leaf.blocks import BlockRecord
from session_keeper._model.cookies import cookie_applies_to
from session_keeper._model.verdict import GuardVerdict
from session_keeper._telemetry import instruments_for
from session_keeper._util.redact import scrubbing_logger
from session_keeper._util.surfaces import PROCESS_SURFACES, SurfaceSubscription, surfaces
from session_keeper.errors import (
    BrowserError,
    GuardUnsupported,
    InvalidArgument,
    InvalidArgumentType,
)

if TYPE_CHECKING:
    from playwright.async_api import Page, WebSocketRoute

    from session_keeper._browser.backend import BrowserSession
    from session_keeper._keeper.facade.keeper import SessionKeeper
    from session_keeper._security.audit import AuditLog

__all__ = ["Guard"]

log = scrubbing_logger("session_keeper.guard")


class Guard:
    """Enforces a keeper's grants (and per-conversation origin allowlists) on the network.

    ``Guard(keeper)`` registers a launch hook: every browser the keeper starts from
    then on is guarded before its first page opens. Construct it before the first
    ``ensure()``; a browser already running is not guarded (:attr:`enforcing` is
    ``False`` until the next launch). The launch raises :class:`GuardUnsupported` when
    the keeper's backend is not a :class:`~session_keeper.PlaywrightBackend`.

    **Lifetime.** The keeper holds its Guard (:attr:`SessionKeeper.navigation_guard`)
    and closes it when it closes; a keeper has one Guard at a time (a second raises
    :class:`~session_keeper.errors.GuardAlreadyAttached`). :meth:`aclose` (or leaving
    ``async with Guard(keeper)``) ends it earlier: see :meth:`aclose` for what it undoes.

    ``actions``, ``protect`` and ``allowlists`` configure its :class:`GuardPolicy`
    (:attr:`policy`); raises :class:`InvalidArgumentType` / :class:`InvalidArgument`
    for malformed ones. ``audit`` sends blocks into a tamper-evident
    :class:`~session_keeper.AuditLog` instead of plain events. ``hold_timeout`` bounds
    how long a held navigation waits for its holding page before it is re-issued; past
    it, the navigation is dropped (the window keeps the holding page).
    """

    def __init__(
        self,
        keeper: SessionKeeper[Any],
        *,
        actions: Mapping[str, Mapping[str, str]] | None = None,
        protect: Iterable[str] = (),
        allowlists: Mapping[str, Iterable[str]] | None = None,
        audit: AuditLog | None = None,
        hold_timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        if not isinstance(hold_timeout, timedelta):
            raise InvalidArgumentType("hold_timeout must be a datetime.timedelta")
        if hold_timeout <= timedelta(0):
            raise InvalidArgument("hold_timeout must be positive")
        self._hold_timeout_ms = hold_timeout / timedelta(milliseconds=1)
        self._keeper = keeper
        # Built first: a malformed configuration is refused before the keeper is touched.
        self._policy = GuardPolicy(keeper, actions=actions, protect=protect, allowlists=allowlists)
        self._log = BlockLog(
            store=keeper.store, clock=keeper.clock, telemetry=keeper.telemetry, audit=audit
        )
        self._instruments = instruments_for(keeper.telemetry)
        self._watch = FetchWatch(
            decide=self._decide,
            blocks=self._log,
            end_page_load=keeper.end_page_load,
            spawn=self._spawn,
            patterns=self._fetch_patterns,
            owner_of=self._owner_of,
            reissue=self._renavigate,
            hold_timeout=hold_timeout.total_seconds(),
            sockets=SocketRules(rules_for=self._socket_rules, refused=self._socket_refused),
        )
        self._patterns_built: tuple[Hashable, list[dict[str, str]]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._updates: set[asyncio.Task[None]] = set()
        # Writes of spent uses under way: they finish even when their request's task is
        # cancelled (aclose), and aclose waits for them.
        self._writes: set[asyncio.Task[None]] = set()
        self._session: InterceptableSession | None = None
        #: The same session when it can re-adopt its pages (decided at its launch).
        self._reattaching: ReattachingSession | None = None
        #: The process's surfaces, followed while a browser of the keeper was watched.
        self._surfaces: SurfaceSubscription | None = None
        self._closed = False
        # First: a keeper that has a Guard refuses this one before any hook is added.
        keeper.attach_guard(self)
        keeper.add_launch_hook(self._on_launch)
        # A login recorded while pages are open: the browser pauses its hosts (and
        # refuses workers' sockets to them) before it returns.
        keeper.add_login_hook(self._logins_changed)
        # A grant or revoke changes which reads are settled: what pauses follows at once.
        keeper.add_grants_hook(self._patterns_changed)

    # -- lifetime -------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End this Guard's part in its keeper and its browser. Idempotent.

        In this order: it stops hearing of the process's surfaces, removes the launch,
        login and grants hooks it added to the keeper, and detaches from it
        (:attr:`SessionKeeper.navigation_guard` is ``None``; another Guard may be made).
        Its own tasks are cancelled and awaited; a store write one of them started (a
        spent use, a block) is finished, never cut. On a browser still running, the
        browser stops pausing requests for it (its ``Fetch`` session and each page's
        session are detached, which lifts the pages' WebSocket rules too): from then on that
        browser is **unguarded**. What Playwright cannot remove stays with the running
        browser and does nothing: the WebSocket routes (they let every socket through)
        and the session's page and re-adoption callbacks. The next browser the keeper
        starts is not guarded unless a new Guard is made first.

        Closing the keeper closes its Guard (after the browser). :attr:`blocks` and
        :attr:`policy` stay readable; the policy still decides (it needs no browser).
        """
        if self._closed:
            return
        self._closed = True
        if self._surfaces is not None:
            self._surfaces.close()
        keeper = self._keeper
        keeper.remove_launch_hook(self._on_launch)
        keeper.remove_login_hook(self._logins_changed)
        keeper.remove_grants_hook(self._patterns_changed)
        keeper.detach_guard(self)
        here = asyncio.current_task()
        tasks = [t for t in (*self._tasks, *self._updates) if t is not here]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # What the cancelled tasks started writing (spent uses, blocks) is stored first.
        await asyncio.gather(*list(self._writes), return_exceptions=True)
        await self._log.drain()
        session = self._session
        self._session = self._reattaching = None
        # A browser that is gone is asked nothing: its driver may be closed.
        await self._watch.stop(live=session is not None and session.alive)

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` ran (the keeper's close runs it too)."""
        return self._closed

    # -- configuration ------------------------------------------------------------------
    @property
    def policy(self) -> GuardPolicy:
        """The decision this Guard enforces (usable without a browser)."""
        return self._policy

    def allow_origins(self, conversation: str, origins: Iterable[str]) -> None:
        """Limit ``conversation`` to ``origins``; see :meth:`GuardPolicy.allow_origins`."""
        self._policy.allow_origins(conversation, origins)
        self._patterns_changed()

    def clear_origins(self, conversation: str) -> None:
        """Remove ``conversation``'s allowlist (its grants still apply)."""
        self._policy.clear_origins(conversation)
        self._patterns_changed()

    def _patterns_changed(self) -> None:
        # What the browser pauses changes (an allowlist, a grant). Every paused request
        # checks the patterns before it is let go; settle() waits for the rest.
        if self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # configured outside the event loop: no page is open to update
        for update in (self._watch.current(), self._watch.sockets.refresh_all()):
            task = loop.create_task(update)
            self._updates.add(task)
            task.add_done_callback(self._updates.discard)

    async def _logins_changed(self) -> None:
        if self._closed:
            return
        await self._watch.current()
        await self._watch.sockets.refresh_all()
        await self._evict_foreign_pages()

    async def _evict_foreign_pages(self) -> None:
        """Take every page frame of a conversation off an origin it may no longer read.

        When an origin starts holding someone's credential (a login recorded or imported,
        a sign-in reaching it), a page of another conversation already there could read
        its storage and cookies from script, whatever the network allows. Each such frame
        is sent to ``about:blank`` (an opaque origin), and a main frame then shows the
        block page naming why; each is recorded as a block. Pages no conversation owns
        (trusted code's) are left alone.
        """
        session = self._session
        if session is None or not session.alive:
            return
        protected = self._policy.protected_hosts()
        if not protected:
            return
        for page in list(session.context.pages):
            if page.is_closed():
                continue
            conversation = self._owner_of(page)
            if conversation is None:
                continue
            for frame in list(page.frames):
                url = frame.url
                host = (urlsplit(url).hostname or "").lower()
                if not host or not any(cookie_applies_to(h, host) for h in protected):
                    continue
                verdict = self._policy.decide(conversation, url, "GET")
                if verdict.allowed:
                    continue
                await self._log.record(conversation, url, "GET", verdict, "Document")
                try:
                    await frame.goto("about:blank")
                    if frame == page.main_frame:
                        await page.set_content(block_page(verdict.reason))
                except Exception as exc:
                    # A frame that went away meanwhile is off the origin already.
                    log.info(
                        "guard could not move a page off a protected origin",
                        exc_info=traceback_worth_logging(exc),
                    )

    async def settle(self) -> None:
        """Wait until the browser pauses what the grants and allowlists now require.

        A grant, revoke or allowlist change starts that update before it returns; a
        request that pauses is decided on the new state at once, but read-only requests
        (images, scripts, styles) of a host whose reads were settled go unpaused until
        the update reached the browser (one CDP round trip). Await this when that
        matters. Never raises: an update that failed was logged.
        """
        while self._updates:
            await asyncio.gather(*list(self._updates), return_exceptions=True)

    def _fetch_patterns(self) -> tuple[Hashable, list[dict[str, str]]]:
        """What the browser's watch pauses: everything under any allowlist, else what
        can carry a protected login (every document, every request to a protected host
        but the read-only ones of a host every page may read for good)."""
        if self._policy.any_allowlist():
            return "everything", fetch_patterns(None)
        ports = frozenset(s.port for s in surfaces())
        hosts = self._policy.protected_hosts()
        # A host every page's owner may read for good needs no decision for its
        # read-only requests (images, scripts, styles...): they do not pause.
        settled = self._policy.settled_hosts(self._watch.parties())
        key = (hosts, settled, ports)
        cached = self._patterns_built
        if cached is not None and cached[0] == key:
            return cached  # asked before every paused request is let go: rebuilt on change
        self._patterns_built = (key, fetch_patterns(hosts, settled=settled, ports=ports))
        return self._patterns_built

    def _socket_rules(self, page: Page) -> tuple[str, Rules]:
        """The rules refusing what ``page``'s workers' sockets may not reach now."""
        conversation = self._watch.owner(page)
        load = self._watch.page_load(page)
        verdict = functools.partial(
            self._policy.socket_verdict, conversation, page_load=load, page=page
        )
        refused = [host for host in self._policy.protected_hosts() if not verdict(host).allowed]
        ports = {s.port for s in surfaces()}
        rules = socket_rules(refused, ports, self._policy.allowlist(conversation))
        return json.dumps(rules), rules

    async def _socket_refused(self, page: Page, url: str) -> None:
        """Chromium refused a worker's socket by rule: record it as its page's refusal."""
        conversation = self._watch.owner(page)
        verdict = self._policy.socket_verdict(
            conversation, url, page_load=self._watch.page_load(page), page=page
        )
        if verdict.allowed:
            # Its rules predate a grant that now lets it through: it was refused still.
            verdict = GuardVerdict(
                allowed=False,
                rule="grant",
                reason="a worker's WebSocket was refused under rules older than a grant",
            )
        await self._log.record(conversation, url, "GET", verdict, "websocket")

    def _owner_of(self, page: Page) -> str | None:
        """The keeper's word on who owns ``page`` (a popup is its opener's at once)."""
        session = self._session
        return session.owner_of(page) if session is not None else None

    def decide(
        self,
        conversation: str | None,
        url: str,
        method: str,
        *,
        spend: bool = False,
        credentials: bool = True,
        page_load: Hashable | None = None,
        page: Hashable | None = None,
        may_spend: bool = True,
    ) -> GuardVerdict:
        """Whether a request of ``conversation`` for ``url`` may leave the browser.

        The policy's answer (:meth:`GuardPolicy.decide`), exactly as enforced.
        """
        return self._policy.decide(
            conversation,
            url,
            method,
            spend=spend,
            credentials=credentials,
            page_load=page_load,
            page=page,
            may_spend=may_spend,
        )

    # -- read-only views -----------------------------------------------------------------
    @property
    def enforcing(self) -> bool:
        """Whether the keeper's current browser is guarded."""
        return self._session is not None and self._session.alive

    @property
    def blocks(self) -> tuple[BlockRecord, ...]:
        """Every block since this Guard was made, oldest first."""
        return self._log.blocks

    async def wait_for_block(
        self, predicate: Callable[[BlockRecord], bool], *, since: int = 0
    ) -> BlockRecord:
        """Wait until a block matching ``predicate`` happened (among ``blocks[since:]``)."""
        return await self._log.wait_for(predicate, since=since)

    # -- wiring ----------------------------------------------------------------------------
    async def _on_launch(self, session: BrowserSession[Any], generation: int) -> None:
        if self._closed:
            return  # a launch under way as the Guard closed: it guards nothing more
        self._session = self._reattaching = None
        self._log.generation = generation
        self._watch.reset()
        capabilities = capabilities_of(session)
        interceptable = capabilities.interceptable
        if interceptable is None:
            # No network we can intercept: refuse, rather than let requests through.
            raise GuardUnsupported(
                f"the Guard enforces on a Playwright browser; {type(session).__name__} "
                "cannot be guarded"
            )
        self._session = interceptable
        self._reattaching = capabilities.reattaching
        if self._surfaces is None:
            # A surface that starts serving (MCP over HTTP, a console) is paused at once.
            # Followed from the first browser watched (before its patterns are sent) until
            # aclose(): a Guard that never watched a browser is held by nothing.
            self._surfaces = PROCESS_SURFACES.subscribe(self._patterns_changed)
        await self._watch_browser(interceptable)
        interceptable.on_page(self._on_page)
        if self._reattaching is not None:
            # A dropped socket to the same browser keeps the generation, but our routes
            # and CDP sessions died with it: they are put back before any call goes on.
            self._reattaching.on_readopt(self._on_readopt)

    async def _watch_browser(self, session: InterceptableSession) -> None:
        context = session.context
        await self._watch.start(context)
        # WebSockets bypass HTTP routing. A page's own handler decides for its
        # conversation; this one catches sockets of pages nobody owns (or not yet).
        await context.route_web_socket(_every_url, self._ws_unowned)

    async def _on_readopt(self, session: ReattachingSession) -> None:
        """Guard the reconnected browser again: its watch, then each owned page.

        Chromium ends a DevTools session's interception with its connection, so what
        pages did *while* the socket was down went out unguarded; that gap is only
        closed by never losing the socket (see the README, "Remote browsers").
        """
        if self._closed or session is not self._session:
            return
        log.warning("CDP connection was replaced; re-installing the Guard")
        self._watch.reconnected()
        await self._watch_browser(session)
        for conversation, page in session.owned_pages():
            await self._on_page(conversation, page)
        for conversation, page in session.owned_pages():
            await self._refuse_unwatched_visit(conversation, page)

    async def _refuse_unwatched_visit(self, conversation: str, page: Page) -> None:
        """A page that went where its conversation may not read while nothing watched it
        (a cut socket, no keeper process) shows what it must not: raise, fail closed."""
        verdict = self._policy.decide(conversation, page.url, "GET")
        if not verdict.allowed:
            await self._log.record(conversation, page.url, "GET", verdict, "document")
            raise BrowserError(
                f"a page of {conversation} went, while unwatched, to a site it may not read"
            )

    async def _on_page(self, conversation: str, page: Any) -> None:
        if self._closed:
            return
        self._watch.owners[page] = conversation
        page.on("close", self._forget)
        await page.route_web_socket(_every_url, functools.partial(self._ws_route, page))
        await self._watch.watch(page)
        # Watched before its owner was known: its workers' rules follow the owner now.
        await self._watch.sockets.refresh(page)
        reattaching = self._reattaching
        if reattaching is not None and reattaching.found_at_rebind(page):
            # Opened by a previous keeper process: where did it go meanwhile?
            await self._refuse_unwatched_visit(conversation, page)

    async def _ws_unowned(self, ws: WebSocketRoute) -> None:
        await self._ws_decide(None, ws)

    async def _ws_route(self, page: Page, ws: WebSocketRoute) -> None:
        await self._ws_decide(self._watch.owner(page), ws, self._watch.page_load(page), page)

    async def _ws_decide(
        self,
        conversation: str | None,
        ws: WebSocketRoute,
        page_load: Hashable | None = None,
        page: Page | None = None,
    ) -> None:
        if self._closed:
            # Playwright cannot take the route back: a closed Guard lets every socket by.
            ws.connect_to_server()
            return
        # The handshake is a GET that carries the site's cookies: judge (and count) it
        # as a read of the page that opens it.
        verdict = await self._decide(conversation, ws.url, "GET", page_load=page_load, page=page)
        if verdict.allowed:
            if page is not None:
                # The page's real socket meets its rules too: what it just read is let
                # through before it connects.
                await self._watch.sockets.refresh(page)
            ws.connect_to_server()
            return
        # Recorded first: by the time the page learns of a block, the record exists.
        await self._log.record(conversation, ws.url, "GET", verdict, "websocket")
        with contextlib.suppress(Exception):
            await ws.close(code=1008, reason="blocked by session_keeper")

    def _forget(self, page: Page) -> None:
        self._watch.forget(page)

    async def _renavigate(self, page: Page, url: str) -> None:
        with contextlib.suppress(Exception):
            # Issued while the holding page is still committing, the new navigation
            # is aborted (measured: net::ERR_ABORTED). Wait for the holding page; if
            # something else navigated the page meanwhile, leave it be.
            await page.locator(f"meta[name='{HOLD_MARK}']").wait_for(
                state="attached", timeout=self._hold_timeout_ms
            )
            # Playwright reported the holding page's commit before it could find it.
            self._watch.answers.reported(page)
            await page.goto(url)
            return
        # Never re-issued: the window keeps the holding page; nothing left the browser.
        log.info("guard dropped a held navigation: its holding page was not there in time")

    def _spawn(self, coro: Any) -> None:
        if self._closed:
            coro.close()  # an event of the browser after aclose(): nothing is started
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _decide(
        self,
        conversation: str | None,
        url: str,
        method: str,
        *,
        page_load: Hashable | None,
        credentials: bool = True,
        admitted: Collection[str] = (),
        page: Hashable | None = None,
        may_spend: bool = True,
        document: bool = False,
        from_url: str | None = None,
    ) -> GuardVerdict:
        """Decide (and count) a request; one that spent a use leaves once that is stored.

        Otherwise a crash right after it could give the use back to a new process.
        If the store cannot take it, the request is refused: fail closed.

        A ``document`` of a conversation that is signing in, leaving from ``from_url`` on
        the sign-in's chain (or a blank page), takes its host into the chain before it
        leaves: what that host sets in answer (an identity provider's session) is guarded
        for the signer from its first instant, and other conversations' pages there are
        taken off it first.
        """
        verdict = self._policy.decide(
            conversation,
            url,
            method,
            spend=True,
            credentials=credentials,
            page_load=page_load,
            admitted=admitted,
            page=page,
            may_spend=may_spend,
        )
        if (
            document
            and verdict.allowed
            and conversation is not None
            and self._keeper.reach_sign_in(conversation, url, from_url=from_url)
        ):
            await self._evict_foreign_pages()
        instruments = self._instruments
        if verdict.allowed and instruments.metering:
            instruments.add("session_keeper.guard.admissions")
        if not (verdict.allowed and verdict.spent):
            return verdict
        # Not persist(): an earlier background failure is the application's to hear.
        # Shielded: closing the Guard cancels this task, never a store write half way.
        write = asyncio.ensure_future(self._keeper.write_through())
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)
        try:
            await asyncio.shield(write)
        except Exception as exc:
            log.error("guard could not store a spent grant use", exc_info=True)
            return GuardVerdict(
                allowed=False,
                rule="grant",
                reason=f"the spent use of the grant on {verdict.site} could not be stored "
                f"({type(exc).__name__}); refused rather than risk a second use",
                site=verdict.site,
                action=verdict.action,
            )
        return verdict

    def navigation_refusal(self, page: Page, since: int) -> BlockRecord | None:
        """The refusal of ``page``'s top-level navigation among ``blocks[since:]``, if any."""
        return self._watch.answers.last_refusal(page, self._log.blocks[since:])

    @property
    def block_log(self) -> BlockLog:
        """Where this Guard keeps its blocks (the keeper's own refusals are kept there too)."""
        return self._log

    def __repr__(self) -> str:
        state = "closed" if self._closed else "enforcing" if self.enforcing else "inactive"
        return f"<Guard {state} blocks={len(self._log)}>"


def _every_url(url: str) -> bool:
    del url
    return True
