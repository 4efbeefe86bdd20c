"""Guard: grants and origin allowlists enforced on the network, inside the browser.

Cookies are shared by every page of the browser; permission must not be. The Guard
answers a request that a conversation may not make with a local ``403`` page that
names the reason — the request never leaves the browser, so the site never sees
the login cookie. What it decides, per request:

1. **Origin allowlist.** A conversation with an allowlist (:meth:`Guard.allow_origins`)
   may reach only those origins, for navigations and subresources alike.
2. **Logins.** A request to a host that a recorded login's cookies would be sent to
   (``LoginRecord.cookies[*].domain``, RFC 6265 domain match) needs a live grant for
   the action: ``keeper.permits(conversation, site, action)`` must answer ``act``.
   ``GET``/``HEAD`` are ``read``, every other method is ``write``; per site this is
   configurable (``actions={"billing.example": {"POST": "read"}}``). Reads and
   writes are counted alike (``keeper.admit``), as ``decide()`` counts them: a grant
   with ``uses=1`` admits one use — the one an ``act`` of ``decide()`` armed, or else
   the first. **One write use is one request.** **One read use is one page load**: a
   top-level navigation of a page (its main-frame document request, redirect hops
   included) plus the read requests that page then makes to the site (its
   subresources, its scripts' fetches), until the page navigates again or closes. A
   read that belongs to no such page load (another page's ``fetch``) spends a use by
   itself. A request that spent a use leaves the browser only after the spend is in
   the keeper's Store, so a crash cannot hand the use back to the next process.
   Unlimited grants spend nothing and write nothing per request.
3. **Pages nobody owns** (not opened through the keeper, or popups of such pages)
   may not reach a signed-in host at all. The keeper's own probe pages
   (conversation ``session-keeper:probe``) may *read* signed-in hosts — they ask
   "who is signed in?" while a restart is being measured, when ``permits()`` says
   ``stop`` to everybody — and may not write.

Every block is appended to the keeper's Store as an event of kind ``guard_block``
(or to an :class:`~session_keeper.AuditLog` chain, when one is given) and logged on
``session_keeper.guard``. A block record holds names, the origin and the path, never
the query string (it may carry tokens) and never a cookie.

How it is wired, and why (all measured on Debian Chromium 156 + Playwright 1.65):

- ``BrowserContext.route`` sees the first request of every page, frame, popup and
  worker of the browser. ``Page.route`` does not see a popup's first navigation.
- Playwright hides **redirect hops** from routing (it continues them itself), so a
  harmless URL redirecting into a signed-in site would carry the login out. Each
  conversation page therefore also gets its own CDP session with ``Fetch`` enabled
  *before its first navigation*; Chromium pauses every hop there, redirects included,
  and the same decision runs again.
- A popup's first navigation starts before the popup exists for anyone to attach
  to. The Guard answers it with a local holding page, attaches to the popup when the
  backend announces it, then re-issues the navigation (now with every hop watched).
  The re-issued navigation is a ``GET``: a ``target=_blank`` form ``POST`` is not
  replayed.
- Our page's ``Fetch`` interceptor sits in front of Playwright's (measured: holding a
  request in ours holds its route too). So the route of a main-frame navigation knows
  whether our session saw it; one it did not see started before the watch (a popup
  announced a moment ago, a page nobody owns) and is held and re-issued the same way.
  If the re-issued one is unseen too, it is refused (rule ``unwatched``): fail closed.
- Service workers could fetch without any page's routing: ``PlaywrightBackend``
  launches with ``service_workers="block"`` (tested: registration, even through
  ``ServiceWorkerContainer.prototype``, yields no registration and no request).
- WebSockets do not go through HTTP routing: each conversation page gets a
  ``route_web_socket`` handler (the handshake is judged as a ``GET``), and the
  context one refuses sockets to signed-in hosts from pages nobody owns.
- Rewriting the ``Cookie`` header does **not** work (Chromium adds cookies after
  interception); the Guard never relies on it.

Known limits: a cross-site iframe runs in its own renderer (site isolation); its
document's redirects are watched through the page, and its own subresources through a
CDP session attached on its first routed request — the hops of that very first
request are not re-checked. Backends without Playwright pages (``FakeBackend``) have no
network: there the Guard is a no-op and :attr:`Guard.enforcing` says so.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import functools
import html
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

import attrs

from session_keeper._backend import BrowserSession, cookie_applies_to, normalize_site
from session_keeper._errors import InvalidArgumentType
from session_keeper._grants import check_name
from session_keeper._guard_link import link_guard
from session_keeper._keeper import PROBE_CONVERSATION
from session_keeper._origins import AllowedOrigin, parse_origins, url_allowed
from session_keeper._redact import scrubbing_logger
from session_keeper._validate import check_collection, check_mapping

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Frame, Page, Route, WebSocketRoute

    from session_keeper._audit import AuditLog
    from session_keeper._keeper import SessionKeeper

__all__ = ["BlockRecord", "Guard"]

log = scrubbing_logger("session_keeper.guard")

#: Event kind of a block in the Store's event log.
BLOCK_EVENT: Final = "guard_block"

#: Methods that only read; every other method writes.
READ_METHODS: Final = frozenset({"GET", "HEAD"})

#: Which rule refused a request.
BlockRule = Literal["grant", "allowlist", "unowned", "unwatched"]

_SCHEMES: Final = frozenset({"http", "https", "ws", "wss"})

_HOLD_MARK: Final = "session-keeper-hold"
#: How long a held navigation waits for its holding page before giving up.
_HOLD_TIMEOUT_MS: Final = 10_000


@attrs.frozen(kw_only=True)
class BlockRecord:
    """One request the Guard answered with a local 403. Names only, never a secret."""

    conversation: str | None
    method: str
    #: ``scheme://host[:port]`` of the refused request.
    origin: str
    #: The path, without query string or fragment (they may carry tokens).
    path: str
    rule: BlockRule
    reason: str
    #: The signed-in site whose login the request would have carried, if any.
    site: str | None = None
    action: str | None = None
    resource_type: str | None = None
    #: ``True`` when the request was a redirect hop (seen through CDP ``Fetch``).
    redirect: bool = False
    generation: int | None = None

    def to_data(self) -> dict[str, object]:
        """The record as JSON-ready event data."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class _Verdict:
    allowed: bool
    rule: BlockRule | None = None
    reason: str = ""
    site: str | None = None
    action: str | None = None
    #: The request used up one of a counted grant's uses (``SessionKeeper.admit``).
    spent: bool = False


def _origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` lower-cased, or ``None`` for a non-network URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in _SCHEMES or not parts.hostname:
        return None
    host = parts.hostname.lower()
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme.lower()}://{host}{port}"


def _block_page(reason: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Blocked by session_keeper"
        "</title></head><body><h1>Blocked by session_keeper</h1>"
        f"<p id='session-keeper-blocked'>{html.escape(reason)}</p></body></html>"
    )


_HOLD_PAGE: Final = (
    "<!doctype html><html><head><meta charset='utf-8'>"
    f"<meta name='{_HOLD_MARK}' content='1'><title>Checking…</title></head>"
    "<body><p>session_keeper is checking this window before it loads.</p></body></html>"
)


class Guard:
    """Enforces a keeper's grants (and per-conversation origin allowlists) on the network.

    ``Guard(keeper)`` registers a launch hook: every browser the keeper starts from
    then on is guarded before its first page opens. Construct it before the first
    ``ensure()``; a browser already running is not guarded (:attr:`enforcing` is
    ``False`` until the next launch).

    ``actions`` maps a site to ``{method: action}`` overrides of the default mapping
    (``GET``/``HEAD`` → ``read``, anything else → ``write``). ``protect`` names extra
    sites to treat as signed in even before a login is recorded. ``allowlists`` sets
    initial per-conversation origin allowlists. ``audit`` sends blocks into a
    tamper-evident :class:`~session_keeper.AuditLog` instead of plain events.
    """

    def __init__(
        self,
        keeper: SessionKeeper[Any],
        *,
        actions: Mapping[str, Mapping[str, str]] | None = None,
        protect: Iterable[str] = (),
        allowlists: Mapping[str, Iterable[str]] | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self._keeper = keeper
        self._actions: dict[str, dict[str, str]] = {}
        for site, mapping in check_mapping({} if actions is None else actions, "actions").items():
            if not isinstance(mapping, Mapping):
                raise InvalidArgumentType("actions must map a site to {method: action}")
            self._actions[normalize_site(check_name(site, "site"))] = {
                check_name(m, "method").upper(): check_name(a, "action") for m, a in mapping.items()
            }
        if isinstance(protect, str):
            raise InvalidArgumentType("protect must be a collection of sites, not a single str")
        self._protect = frozenset(
            normalize_site(check_name(s, "site")) for s in check_collection(protect, "protect")
        )
        self._allowlists: dict[str, tuple[AllowedOrigin, ...]] = {}
        for conversation, origins in check_mapping(
            {} if allowlists is None else allowlists, "allowlists"
        ).items():
            self.allow_origins(conversation, origins)
        self._audit = audit
        self._pages: dict[Page, str] = {}
        self._cdp: dict[Page | Frame, CDPSession] = {}
        self._watching: dict[Page | Frame, asyncio.Event] = {}
        self._held: dict[str, int] = {}
        # Document requests our CDP session let through, per page, not yet routed.
        self._seen: dict[Page, collections.Counter[tuple[str, str]]] = {}
        self._renavigated: dict[Page, collections.Counter[str]] = {}
        # Requests our CDP session admitted by spending a use, not yet routed: the
        # route that follows must not spend a second use on the same request.
        self._admitted: dict[Page, collections.Counter[tuple[str, str]]] = {}
        # Each page's current page load (a fresh token per main-frame navigation): a
        # read use spent under it covers the page's further reads (keeper.admit).
        self._loads: dict[Page, Hashable] = {}
        # The CDP frame id of each watched page's main frame.
        self._main_frames: dict[Page, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: BrowserSession[Any] | None = None
        self._generation: int | None = None
        self._enforcing = False
        self._blocks: list[BlockRecord] = []
        self._changed = asyncio.Condition() if _has_loop() else None
        keeper.add_launch_hook(self._on_launch)
        link_guard(keeper, self)

    # -- configuration ------------------------------------------------------------------
    def allow_origins(self, conversation: str, origins: Iterable[str]) -> None:
        """Limit ``conversation`` to ``origins`` (``https://docs.example`` or bare hosts).

        Scheme and host must match an entry, the port only when the entry names one
        (``http://docs.example`` admits ``http://docs.example:8000``). Raises
        :class:`InvalidArgumentType` / :class:`InvalidArgument` for a malformed entry.
        """
        conversation = check_name(conversation, "conversation")
        self._allowlists[conversation] = parse_origins(check_collection(origins, "origins"))

    def clear_origins(self, conversation: str) -> None:
        """Remove ``conversation``'s allowlist (its grants still apply)."""
        self._allowlists.pop(check_name(conversation, "conversation"), None)

    # -- read-only views -----------------------------------------------------------------
    @property
    def enforcing(self) -> bool:
        """Whether the keeper's current browser is guarded (``False`` on FakeBackend)."""
        return self._enforcing and self._session is not None and self._session.alive

    @property
    def blocks(self) -> tuple[BlockRecord, ...]:
        """Every block since this Guard was made, oldest first."""
        return tuple(self._blocks)

    async def wait_for_block(
        self, predicate: Callable[[BlockRecord], bool], *, since: int = 0
    ) -> BlockRecord:
        """Wait until a block matching ``predicate`` happened (among ``blocks[since:]``)."""
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            while True:
                found = next((b for b in self._blocks[since:] if predicate(b)), None)
                if found is not None:
                    return found
                await self._changed.wait()

    # -- the decision ---------------------------------------------------------------------
    def _action(self, site: str, method: str) -> str:
        override = self._actions.get(site, {}).get(method)
        if override is not None:
            return override
        return "read" if method in READ_METHODS else "write"

    def _protected_sites(self, host: str) -> list[str]:
        """Every signed-in site whose login cookies ``host`` would receive."""
        sites: list[str] = []
        for record in self._keeper.logins():
            if cookie_applies_to(record.site, host) or any(
                cookie_applies_to(c.domain, host) for c in record.cookies
            ):
                sites.append(record.site)
        # A lost login may leave cookies behind (a persistent one that survived):
        # its site stays guarded until someone records a login there again.
        sites.extend(
            lost.name for lost in self._keeper.lost_logins() if cookie_applies_to(lost.name, host)
        )
        sites.extend(s for s in sorted(self._protect) if cookie_applies_to(s, host))
        return list(dict.fromkeys(sites))

    def decide(
        self,
        conversation: str | None,
        url: str,
        method: str,
        *,
        spend: bool = False,
        credentials: bool = True,
        page_load: Hashable | None = None,
    ) -> _Verdict:
        """Whether a request of ``conversation`` for ``url`` may leave the browser.

        A host that receives several sites' logins (``billing.example`` and
        ``api.billing.example``) passes only if every one of them permits it.
        With ``spend``, the request is about to leave: it is counted against a
        grant's ``uses`` (:meth:`SessionKeeper.admit`); ``page_load`` is the token of
        the page load it belongs to (a read use covers its page's further reads).
        """
        origin = _origin_of(url)
        if origin is None:
            return _Verdict(allowed=True)
        host = urlsplit(url).hostname or ""
        method = method.upper()
        if conversation is not None:
            allowed = self._allowlists.get(conversation)
            if allowed is not None and not url_allowed(url, allowed):
                return _Verdict(
                    allowed=False,
                    rule="allowlist",
                    reason=f"{origin} is outside {conversation}'s origin allowlist",
                )
        verdict = _Verdict(allowed=True)
        if not credentials:
            return verdict
        sites = self._protected_sites(host)
        # Every site first, spending nothing: a request refused for one site must not
        # use up another's grant. Nothing awaits in between, so the answers hold.
        would_spend = False
        for site in sites:
            verdict = self._login_verdict(
                conversation, site, method, mode="peek" if spend else "permits", page_load=page_load
            )
            if not verdict.allowed:
                return verdict
            would_spend = would_spend or verdict.spent
        if not would_spend:
            # Reads and unlimited grants (nearly every request): nothing to spend,
            # so no second pass on this per-request path.
            return attrs.evolve(verdict, spent=False)
        spent = False
        for site in sites:
            verdict = self._login_verdict(
                conversation, site, method, mode="spend", page_load=page_load
            )
            if not verdict.allowed:
                return verdict  # cannot happen after the peek; refuse if it does
            spent = spent or verdict.spent
        return attrs.evolve(verdict, spent=spent)

    def _login_verdict(
        self,
        conversation: str | None,
        site: str,
        method: str,
        *,
        mode: Literal["permits", "peek", "spend"],
        page_load: Hashable | None = None,
    ) -> _Verdict:
        action = self._action(site, method)
        if conversation is None:
            return _Verdict(
                allowed=False,
                rule="unowned",
                reason=f"a page no conversation owns may not use the login to {site}",
                site=site,
                action=action,
            )
        if conversation == PROBE_CONVERSATION:
            if method in READ_METHODS:
                return _Verdict(allowed=True, site=site, action="read")
            return _Verdict(
                allowed=False,
                rule="grant",
                reason=f"the keeper's login probe may only read {site}",
                site=site,
                action=action,
            )
        lost = next((x for x in self._keeper.lost_logins() if x.name == site), None)
        if lost is not None and not any(r.site == site for r in self._keeper.logins()):
            # Only its owner and its grantees may go there: to sign in again.
            try:
                entitled = conversation == lost.owner or self._keeper.holds_grant(
                    conversation, site, action
                )
            except Exception:
                entitled = False
            if entitled:
                return _Verdict(allowed=True, site=site, action=action)
            return _Verdict(
                allowed=False,
                rule="grant",
                reason=f"the login to {site} (belonged to {lost.owner}) was lost; "
                f"{conversation} holds no grant for it",
                site=site,
                action=action,
            )
        try:
            if mode != "permits":
                # Counted, reads and writes alike: a read use is one page load (the
                # page's further reads ride on it), a write use is one request.
                decision = self._keeper.admit(
                    conversation,
                    site,
                    action,
                    dry_run=mode == "peek",
                    page_load=page_load if action == "read" else None,
                )
            else:
                decision = self._keeper.permits(conversation, site, action)
        except Exception as exc:
            # An action the keeper does not know, a closed keeper: refuse, say why.
            return _Verdict(
                allowed=False,
                rule="grant",
                reason=f"cannot decide {action} on {site}: {type(exc).__name__}",
                site=site,
                action=action,
            )
        if decision.outcome == "act":
            return _Verdict(allowed=True, site=site, action=action, spent=decision.spent_use)
        reason = decision.reason or f"{conversation} may not {action} on {site}"
        return _Verdict(allowed=False, rule="grant", reason=reason, site=site, action=action)

    # -- wiring ----------------------------------------------------------------------------
    async def _on_launch(self, session: BrowserSession[Any], generation: int) -> None:
        self._session = session
        self._generation = generation
        self._pages.clear()
        self._cdp.clear()
        self._watching.clear()
        self._held.clear()
        self._seen.clear()
        self._renavigated.clear()
        self._admitted.clear()
        self._loads.clear()
        self._main_frames.clear()
        context: BrowserContext | None = getattr(session, "context", None)
        if context is None or not hasattr(context, "route"):
            # FakeBackend: no network, nothing to route. Say so rather than pretend.
            self._enforcing = False
            log.info("guard inactive: backend has no network", extra={"generation": generation})
            return
        await context.route("**/*", self._route)
        # WebSockets bypass HTTP routing. A page's own handler decides for its
        # conversation; this one catches sockets of pages nobody owns (or not yet).
        await context.route_web_socket(_every_url, self._ws_unowned)
        session.on_page(self._on_page)
        self._enforcing = True

    async def _on_page(self, conversation: str, page: Any) -> None:
        self._pages[page] = conversation
        page.on("close", self._forget)
        await page.route_web_socket(_every_url, functools.partial(self._ws_route, page))
        await self._watch(page, page, conversation)
        url = page.url
        if self._held.get(url):
            # A popup whose first navigation was held: re-issue it, now watched.
            self._held[url] -= 1
            with contextlib.suppress(Exception):
                held = await page.locator(f"meta[name='{_HOLD_MARK}']").count()
                if held:
                    self._spawn(self._renavigate(page, url))

    async def _ws_unowned(self, ws: WebSocketRoute) -> None:
        await self._ws_decide(None, ws)

    async def _ws_route(self, page: Page, ws: WebSocketRoute) -> None:
        await self._ws_decide(self._owner(page), ws, self._loads.get(page))

    async def _ws_decide(
        self, conversation: str | None, ws: WebSocketRoute, page_load: Hashable | None = None
    ) -> None:
        # The handshake is a GET that carries the site's cookies: judge (and count) it
        # as a read of the page that opens it.
        verdict = await self._durable(
            self.decide(conversation, ws.url, "GET", spend=True, page_load=page_load)
        )
        if verdict.allowed:
            ws.connect_to_server()
            return
        # Recorded first: by the time the page learns of a block, the record exists.
        await self._record(conversation, ws.url, "GET", verdict, "websocket")
        with contextlib.suppress(Exception):
            await ws.close(code=1008, reason="blocked by session_keeper")

    def _forget(self, page: Page) -> None:
        self._pages.pop(page, None)
        self._seen.pop(page, None)
        self._renavigated.pop(page, None)
        self._admitted.pop(page, None)
        self._main_frames.pop(page, None)
        load = self._loads.pop(page, None)
        if load is not None:
            self._keeper.end_page_load(load)
        for target in [t for t in self._cdp if t is page or getattr(t, "page", None) is page]:
            del self._cdp[target]

    async def _renavigate(self, page: Page, url: str) -> None:
        with contextlib.suppress(Exception):
            # Issued while the holding page is still committing, the new navigation
            # is aborted (measured: net::ERR_ABORTED). Wait for the holding page; if
            # something else navigated the page meanwhile, leave it be.
            await page.locator(f"meta[name='{_HOLD_MARK}']").wait_for(
                state="attached", timeout=_HOLD_TIMEOUT_MS
            )
            await page.goto(url)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self, target: Page | Frame, page: Page, conversation: str | None) -> None:
        """Attach a CDP session with ``Fetch`` to ``target``: it sees redirect hops.

        Idempotent; a second caller waits until the first has ``Fetch`` enabled.
        """
        if target in self._cdp or target in self._watching:
            ready = self._watching.get(target)
            if ready is not None:
                await ready.wait()
            return
        ready = asyncio.Event()
        self._watching[target] = ready
        try:
            await self._attach(target, page)
        finally:
            ready.set()
            self._watching.pop(target, None)

    async def _attach(self, target: Page | Frame, page: Page) -> None:
        context = page.context
        try:
            cdp = await context.new_cdp_session(target)
        except Exception:
            # A same-process frame has no session of its own; its page's covers it.
            return

        if target is page:
            try:
                # A page target's id is its main frame's id (answered by the browser
                # process: Page.getFrameTree would wait on a renderer held by our route).
                info = await cdp.send("Target.getTargetInfo")
                self._main_frames[page] = str(info["targetInfo"]["targetId"])
            except Exception:
                # Without it no request counts as a page load: each read spends a use.
                log.warning("guard could not learn a page's main frame", exc_info=True)

        def paused(event: dict[str, Any]) -> None:
            self._spawn(self._on_paused(cdp, target, page, event))

        cdp.on("Fetch.requestPaused", paused)
        try:
            await cdp.send(
                "Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}
            )
        except Exception:
            log.warning("guard could not watch a page's redirects", exc_info=True)
            return
        # Only now: a request that started before Fetch.enable answered is not watched.
        self._cdp[target] = cdp
        if target is page and page not in self._pages:
            # A page nobody owns has no close handler from _on_page; forget it too.
            page.on("close", self._forget)

    def _new_page_load(self, page: Page) -> None:
        old = self._loads.get(page)
        self._loads[page] = object()
        if old is not None:
            self._keeper.end_page_load(old)

    def _consume_seen(self, page: Page, method: str, url: str) -> bool:
        """Whether our CDP session let this navigation through (and forget it)."""
        return _take(self._seen, page, method, url)

    async def _durable(self, verdict: _Verdict) -> _Verdict:
        """A request that spent a counted use leaves only once the spend is stored.

        Otherwise a crash right after it could give the use back to a new process.
        If the store cannot take it, the request is refused: fail closed.
        """
        if not (verdict.allowed and verdict.spent):
            return verdict
        try:
            # Not persist(): an earlier background failure is the application's to hear.
            await self._keeper._write_through()
        except Exception as exc:
            log.error("guard could not store a spent grant use", exc_info=True)
            return _Verdict(
                allowed=False,
                rule="grant",
                reason=f"the spent use of the grant on {verdict.site} could not be stored "
                f"({type(exc).__name__}); refused rather than risk a second use",
                site=verdict.site,
                action=verdict.action,
            )
        return verdict

    def _owner(self, page: Page | None) -> str | None:
        if page is None:
            return None
        return self._pages.get(page)

    async def _on_paused(
        self, cdp: CDPSession, target: Page | Frame, page: Page, event: dict[str, Any]
    ) -> None:
        request = event.get("request", {})
        url = str(request.get("url", ""))
        method = str(request.get("method", "GET"))
        conversation = self._owner(page)
        request_id = event["requestId"]
        redirect = bool(event.get("redirectedRequestId"))
        closed = page.is_closed()  # a late event of a closed page must not leave tokens
        if (
            not closed
            and target is page
            and not redirect
            and event.get("resourceType") == "Document"
            and event.get("frameId") == self._main_frames.get(page)
        ):
            # A top-level navigation starts a new page load (its redirect hops stay in
            # it); the previous one admits nothing more. Before any await: in order.
            self._new_page_load(page)
        if _is_preflight(method, request.get("headers")):
            # A CORS preflight carries no cookies, and Playwright answers it without our
            # route: it can neither leak the login nor spend a use. Only the allowlist.
            verdict = self.decide(conversation, url, method, credentials=False)
        else:
            verdict = await self._durable(
                self.decide(conversation, url, method, spend=True, page_load=self._loads.get(page))
            )
        if verdict.spent and verdict.allowed and not redirect and not closed:
            key = (method.upper(), _without_fragment(url))
            self._admitted.setdefault(page, collections.Counter())[key] += 1
        if (
            verdict.allowed
            and not closed
            and target is page
            and not redirect
            and event.get("resourceType") == "Document"
        ):
            # Our interceptor sits before Playwright's (measured: holding a request
            # here holds its route too), so the route that follows can tell that
            # this navigation is watched. Redirect hops are never routed.
            key = (method.upper(), _without_fragment(url))
            self._seen.setdefault(page, collections.Counter())[key] += 1
        if not verdict.allowed:
            await self._record(
                conversation,
                url,
                method,
                verdict,
                resource_type=event.get("resourceType"),
                redirect=redirect,
            )
        try:
            if verdict.allowed:
                await cdp.send("Fetch.continueRequest", {"requestId": request_id})
                return
            await cdp.send(
                "Fetch.fulfillRequest",
                {
                    "requestId": request_id,
                    "responseCode": 403,
                    "responseHeaders": [
                        {"name": "Content-Type", "value": "text/html; charset=utf-8"},
                        {"name": "Cache-Control", "value": "no-store"},
                    ],
                    "body": base64.b64encode(_block_page(verdict.reason).encode()).decode(),
                },
            )
        except Exception:
            # The page closed under us: the request died with it.
            return

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            frame: Frame | None = request.frame
        except Exception:
            frame = None  # a popup's first navigation, or a worker's request
        page = frame.page if frame is not None else None
        if frame is None:
            if request.is_navigation_request() and _origin_of(request.url) is not None:
                # The popup does not exist yet; hold it, decide when it is announced.
                self._held[request.url] = self._held.get(request.url, 0) + 1
                await self._answer(route, 200, _HOLD_PAGE)
                return
            conversation = None
        else:
            conversation = self._owner(page)
            if conversation is None and page is not None and request.is_navigation_request():
                with contextlib.suppress(Exception):
                    opener = await page.opener()
                    if opener is not None and self._owner(opener) is not None:
                        # A popup its opener's conversation will own, not announced yet
                        # (window.open('') then location=...): hold it like a first
                        # navigation, re-issue it once it is watched.
                        self._held[request.url] = self._held.get(request.url, 0) + 1
                        await self._answer(route, 200, _HOLD_PAGE)
                        return
        main_navigation = (
            frame is not None
            and page is not None
            and frame is page.main_frame
            and request.is_navigation_request()
        )
        if (
            main_navigation
            and page is not None
            and not self._consume_seen(page, request.method, request.url)
        ):
            # Our CDP session did not see this navigation: it started before the page
            # was watched (a popup announced a moment ago, a page nobody owns), so its
            # redirect hops would escape. Hold it (nothing leaves, nothing is spent);
            # the re-issued navigation is decided when it comes back, watched.
            await self._hold_unwatched(route, page, conversation)
            return
        if page is not None and _take(self._admitted, page, request.method, request.url):
            verdict = _Verdict(allowed=True)  # our CDP session admitted it a moment ago
        else:
            verdict = await self._durable(
                self.decide(
                    conversation,
                    request.url,
                    request.method,
                    spend=True,
                    page_load=self._loads.get(page) if page is not None else None,
                )
            )
        if not verdict.allowed:
            await self._record(
                conversation, request.url, request.method, verdict, request.resource_type
            )
            await self._answer(route, 403, _block_page(verdict.reason))
            return
        if frame is not None and page is not None and frame is not page.main_frame:
            if request.is_navigation_request():
                # Our page's session counted this frame's document too; only a main
                # frame's route needs it, so drop it here rather than keep it forever.
                self._consume_seen(page, request.method, request.url)
            # A cross-site iframe has its own target: watch its redirects too.
            await self._watch(frame, page, conversation)
        elif main_navigation and page is not None:
            self._renavigated.get(page, collections.Counter()).pop(
                _without_fragment(request.url), None
            )
        with contextlib.suppress(Exception):
            await route.continue_()

    async def _hold_unwatched(self, route: Route, page: Page, conversation: str | None) -> None:
        """Answer an unwatched navigation with a holding page, then re-issue it watched.

        Fails closed (a 403 of rule ``unwatched``) when the page cannot be watched or
        the re-issued navigation arrives unwatched again, so this never loops.
        """
        request = route.request
        await self._watch(page, page, conversation)
        url = _without_fragment(request.url)
        again = self._renavigated.setdefault(page, collections.Counter())
        if page not in self._cdp or again[url] >= 1:
            again.pop(url, None)
            verdict = _Verdict(
                allowed=False,
                rule="unwatched",
                reason="session_keeper could not watch this navigation's redirects",
            )
            await self._record(
                conversation, request.url, request.method, verdict, request.resource_type
            )
            await self._answer(route, 403, _block_page(verdict.reason))
            return
        again[url] += 1
        await self._answer(route, 200, _HOLD_PAGE)
        self._spawn(self._renavigate(page, request.url))

    async def _answer(self, route: Route, status: int, body: str) -> None:
        with contextlib.suppress(Exception):
            await route.fulfill(
                status=status,
                body=body,
                content_type="text/html; charset=utf-8",
                headers={"Cache-Control": "no-store"},
            )

    async def _record(
        self,
        conversation: str | None,
        url: str,
        method: str,
        verdict: _Verdict,
        resource_type: str | None = None,
        *,
        redirect: bool = False,
    ) -> None:
        parts = urlsplit(url)
        assert verdict.rule is not None
        block = BlockRecord(
            conversation=conversation,
            method=method.upper(),
            origin=_origin_of(url) or "",
            path=parts.path or "/",
            rule=verdict.rule,
            reason=verdict.reason,
            site=verdict.site,
            action=verdict.action,
            resource_type=resource_type,
            redirect=redirect,
            generation=self._generation,
        )
        self._blocks.append(block)
        log.warning(
            "guard blocked %s %s%s (%s): %s",
            block.method,
            block.origin,
            block.path,
            block.rule,
            block.reason,
            extra={"guard_block": block.to_data()},
        )
        try:
            if self._audit is not None:
                await self._audit.record(BLOCK_EVENT, block.to_data())
            else:
                store = self._keeper.store
                if store is not None:
                    from session_keeper._store import Event

                    await store.append_event(
                        Event(
                            kind=BLOCK_EVENT,
                            at=self._keeper.clock.now(),
                            generation=self._generation,
                            data=block.to_data(),
                        )
                    )
        except Exception:
            # The block itself already happened; losing its record must not undo it.
            log.exception("guard could not store a block record")
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    def __repr__(self) -> str:
        state = "enforcing" if self.enforcing else "inactive"
        return f"<Guard {state} blocks={len(self._blocks)}>"


def _take(
    tokens: dict[Page, collections.Counter[tuple[str, str]]], page: Page, method: str, url: str
) -> bool:
    """Take one ``(method, url)`` token of ``page``, if there is one."""
    counter = tokens.get(page)
    key = (method.upper(), _without_fragment(url))
    if not counter or not counter[key]:
        return False
    counter[key] -= 1
    if not counter[key]:
        del counter[key]
    return True


def _is_preflight(method: str, headers: object) -> bool:
    """Whether a paused request is Chromium's CORS preflight (``resourceType`` says
    ``XHR``/``Fetch`` for it: measured). ``Access-Control-Request-Method`` is a
    forbidden header name, so no script can make its own request look like one."""
    if method.upper() != "OPTIONS" or not isinstance(headers, dict):
        return False
    return any(str(k).lower() == "access-control-request-method" for k in headers)


def _without_fragment(url: str) -> str:
    """``url`` without its ``#fragment`` (CDP reports the fragment apart)."""
    return url.split("#", 1)[0]


def _every_url(url: str) -> bool:
    del url
    return True


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
