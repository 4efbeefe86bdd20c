"""The Guard's watch: one browser-wide CDP ``Fetch`` session that sees every request.

Chromium's ``Fetch`` domain, enabled on the **browser** target, pauses the requests of
every page, frame, popup and dedicated worker of the browser — redirect hops included,
and a popup's very first navigation too (measured on Chromium 156). It is the Guard's
only interception layer: one round trip per paused request, no Playwright routing
(which would add a second round trip per request and turn the HTTP cache off).

A paused request names only its frame; the Guard's frame map tells whose page that is.
A frame nobody has attributed yet is waited for briefly, then treated as a page
nobody owns (fail closed: it may not use any login).

A **page not watched yet** cannot have its first navigation decided: its owner and
its frames are unknown, and Playwright announces a popup only once its first
document committed. That navigation is answered with a local holding page (nothing
leaves the browser) and re-issued once the page is watched (:class:`Holds`).

What pauses is only what can carry a protected login (:func:`fetch_patterns`): every
document (a navigation's hops and each new page load must be seen), and every request
to a host a recorded login's cookies go to. Chromium matches a redirect hop against
the patterns by its own URL (measured), so a harmless request redirected into a
signed-in host still pauses at that hop. When any conversation has an origin
allowlist, everything pauses (any hop may leave it). The patterns follow the ledger:
a login recorded while pages are open widens them before ``record_login`` returns,
and every request checks, before it is let go, that they are current.

**Settled reads.** On a host that every conversation showing a document in the browser
may read through an unlimited grant that never expires, a read-only request (image,
script, style, font, media: ``GET`` by construction) would be allowed whatever happens
until a grant or a login changes, so it does not pause. A document of another
conversation is decided, and the patterns re-sent, before it is let go, so its page's
requests meet the wider patterns; a grant or revoke re-sends them at once.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
from collections.abc import Awaitable, Callable, Collection, Coroutine, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from session_keeper._browser.playwright_session import first_line, traceback_worth_logging
from session_keeper._guard.blocks import HOLD_PAGE, MainFrameAnswers, block_page
from session_keeper._guard.frames import PageFrames
from session_keeper._guard.sockets import SocketRules
from session_keeper._model.verdict import GuardVerdict
from session_keeper._util.redact import scrubbing_logger

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Page

    from session_keeper._keeper.guard_link.block_log import BlockLog

__all__ = ["FetchWatch", "browser_initiated", "fetch_patterns", "is_preflight", "without_fragment"]

log = scrubbing_logger("session_keeper.guard")

Patterns = list[dict[str, str]]

#: What the browser's watch pauses (its key tells when it must be re-sent).
PatternsNow = Callable[[], tuple[Hashable, Patterns]]


#: Request types a page can only ever make as a ``GET`` (CDP ``Network.ResourceType``).
READ_ONLY_TYPES: Final = frozenset({"Image", "Media", "Font", "Stylesheet", "Script"})

#: Every other type a ``Fetch`` filter can name: what still pauses on a host whose reads
#: are settled. (Chromium 156 refuses ``TextTrack``, ``Prefetch``, ``Manifest``,
#: ``SignedExchange`` and ``Preflight`` as filter types: measured. The first four are
#: ``GET`` only; a preflight carries no cookie.)
_OTHER_TYPES: Final = ("XHR", "Fetch", "EventSource", "Ping", "CSPViolationReport", "Other")


def fetch_patterns(
    hosts: Collection[str] | None, *, settled: Collection[str] = (), ports: Collection[int] = ()
) -> Patterns:
    """CDP ``Fetch`` patterns pausing every document and every request to ``hosts``.

    ``None`` pauses everything. A host pattern is ``*host*``: a URL whose host is
    ``host`` or one of its subdomains contains it, whatever its scheme, user or port
    (it also pauses some requests that merely mention it: those are decided and let go).
    On a ``settled`` host (every page may read it, and only a grant change can change
    that) requests of the :data:`READ_ONLY_TYPES` do not pause: their answer is known.
    Every request to one of ``ports`` (the keeper's own surfaces, on any host) pauses;
    a surface on a default port (80, 443) makes everything pause.
    """
    if hosts is None or any(port in (80, 443) for port in ports):
        return [{"urlPattern": "*", "requestStage": "Request"}]
    patterns = [{"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]
    for host in sorted(hosts):
        # CDP wildcards are * and ?, escaped with a backslash; hosts never hold them.
        escaped = "".join("\\" + c if c in "*?\\" else c for c in host)
        if host in settled:
            patterns.extend(
                {"urlPattern": f"*{escaped}*", "resourceType": kind, "requestStage": "Request"}
                for kind in _OTHER_TYPES
            )
        else:
            patterns.append({"urlPattern": f"*{escaped}*", "requestStage": "Request"})
    # Chromium spells a non-default port in every URL it requests: host:port/.
    patterns.extend(
        {"urlPattern": f"*:{port}/*", "requestStage": "Request"} for port in sorted(ports)
    )
    return patterns


#: How many requests' spent sites are remembered for their redirect hops.
_SPENT_KEPT: Final = 512


class Decide(Protocol):
    """Decides (and durably counts) one request: the Guard's policy behind its store."""

    def __call__(
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
    ) -> Awaitable[GuardVerdict]: ...


class Holds:
    """First navigations of pages not watched yet: answered locally, re-issued later.

    Keyed by the page's target id (the browser session knows nothing else of it).
    """

    def __init__(self) -> None:
        self._urls: dict[str, str] = {}

    def hold(self, target: str, url: str) -> None:
        self._urls[target] = url

    def take(self, target: str) -> str | None:
        return self._urls.pop(target, None)

    def clear(self) -> None:
        self._urls.clear()


class FetchWatch:
    """The browser-wide ``Fetch`` session, page attribution and per-page bookkeeping."""

    def __init__(
        self,
        *,
        decide: Decide,
        blocks: BlockLog,
        end_page_load: Callable[[Hashable], None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        patterns: PatternsNow,
        owner_of: Callable[[Page], str | None],
        reissue: Callable[[Page, str], Coroutine[Any, Any, None]],
        hold_timeout: float,
        sockets: SocketRules,
    ) -> None:
        self._decide = decide
        self._patterns = patterns
        self._blocks = blocks
        self._end_page_load = end_page_load
        self._spawn = spawn
        self._owner_of = owner_of
        self._reissue = reissue
        self._hold_timeout = hold_timeout
        #: Which conversation owns each page (pages opened through the keeper).
        self.owners: dict[Page, str] = {}
        self._browser: CDPSession | None = None
        self._applied: Hashable = None
        # The context whose new pages are watched, and the listener doing it.
        self._context: BrowserContext | None = None
        self._page_listener: Callable[[Page], None] | None = None
        #: Which page each request's frame belongs to.
        self.frames = PageFrames(spawn=spawn, on_watched=self._on_watched, sockets=sockets)
        #: The WebSocket rules of every watched page's targets.
        self.sockets = sockets
        # Each page's current page load (a fresh token per main-frame navigation): a
        # read use spent under it covers the page's further reads (keeper.admit).
        self._loads: dict[Page, Hashable] = {}
        # Sites each request (by CDP network id) spent a use on: its redirect hops are
        # the same request, not another use. Bounded: a finished request is not told.
        self._spent: collections.OrderedDict[str, frozenset[str]] = collections.OrderedDict()
        # The URL each document request (by network id) was last at: where a redirect hop
        # comes from, which a page's own URL does not say until a document commits.
        self._hops: collections.OrderedDict[str, str] = collections.OrderedDict()
        # Who shows a document in each page (a frame nobody could attribute is keyed by
        # None): the parties whose reads a settled host must allow (fetch_patterns).
        self._parties: dict[Page | None, str | None] = {}
        #: How refused top-level navigations are answered, and each page's refusals.
        self.answers = MainFrameAnswers()
        self.holds = Holds()

    # -- bookkeeping ----------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything (a new browser)."""
        self.reconnected()
        self.owners.clear()
        self._parties.clear()
        self._loads.clear()
        self.answers.reset()

    def reconnected(self) -> None:
        """The CDP connection was replaced under the same browser: every session died.

        Owners and page loads stay (the pages did); sessions, frames and holds go.
        """
        self._browser = None
        self._applied = None
        self.frames.clear()
        self._spent.clear()
        self._hops.clear()
        self.holds.clear()

    def owner(self, page: Page | None) -> str | None:
        """The conversation that owns ``page``; ``None`` for a page nobody owns."""
        if page is None:
            return None
        owner = self.owners.get(page)
        return owner if owner is not None else self._owner_of(page)

    def page_load(self, page: Page | None) -> Hashable | None:
        """The token of ``page``'s current page load, if it has one."""
        return None if page is None else self._loads.get(page)

    def parties(self) -> set[str | None]:
        """The owners of every page that was let show a document (``None``: nobody)."""
        return set(self._parties.values())

    async def watch(self, page: Page) -> None:
        """Learn ``page``'s frames (idempotent; a second caller waits for the first)."""
        await self.frames.watch(page)

    def _on_watched(self, page: Page, target: str) -> None:
        """``page`` (target ``target``) is attributable from now."""
        self.answers.track(page)
        if page not in self.owners:
            # A page nobody owns has no close handler from the keeper's page hook.
            page.on("close", self.forget)
        held = self.holds.take(target)
        if held is not None:
            # A popup whose first navigation shows the holding page: re-issue it.
            self.answers.shows_local(page, held)
            self._spawn(self._reissue(page, held))

    def forget(self, page: Page) -> None:
        """``page`` closed: drop its state and end its page load."""
        self.owners.pop(page, None)
        self._parties.pop(page, None)
        self.frames.forget(page)
        self.answers.forget(page)
        load = self._loads.pop(page, None)
        if load is not None:
            self._end_page_load(load)

    def _new_page_load(self, page: Page) -> None:
        old = self._loads.get(page)
        self._loads[page] = object()
        if old is not None:
            self._end_page_load(old)

    # -- the browser's session --------------------------------------------------------------
    async def start(self, context: BrowserContext) -> None:
        """Enable ``Fetch`` on the browser of ``context``; then watch its open pages.

        Raises (Playwright's error) when the browser target cannot be reached: the
        launch fails rather than run unguarded.
        """
        browser = context.browser
        if browser is None:
            raise RuntimeError("the context has no browser to watch")
        cdp = await browser.new_browser_cdp_session()
        cdp.on("Fetch.requestPaused", lambda event: self._spawn(self._on_paused(cdp, event)))
        key, patterns = self._patterns()
        await cdp.send("Fetch.enable", {"patterns": patterns})
        self._browser, self._applied = cdp, key

        def watch_new(page: Page) -> None:
            self._spawn(self.watch(page))

        context.on("page", watch_new)
        self._context, self._page_listener = context, watch_new
        for page in context.pages:
            await self.watch(page)

    async def stop(self, *, live: bool) -> None:
        """Stop watching for good: every page load ends, everything is forgotten, and on a
        ``live`` browser nothing pauses any more.

        Detaching a CDP session ends what it set in Chromium: the browser's ``Fetch``
        interception and a page's WebSocket rules end with their sessions (measured on
        Chromium 156: a navigation and a page's ``WebSocketStream`` refused before reach
        a surface after), and a page's auto-attach and the sessions of its frames and
        workers go with its session. A browser that is not ``live`` is asked nothing
        (its driver may be closed).
        """
        context, listener = self._context, self._page_listener
        self._context = self._page_listener = None
        browser = self._browser
        sessions = self.frames.sessions()
        for load in list(self._loads.values()):
            self._end_page_load(load)
        self.reset()
        if context is not None and listener is not None:
            with contextlib.suppress(Exception):
                context.remove_listener("page", listener)
        if not live:
            return
        for session in (browser, *sessions):
            if session is None:
                continue
            try:
                await session.detach()
            except Exception as exc:
                # A page that closed meanwhile took its session with it.
                log.debug("guard could not detach a session: %s", first_line(exc))

    async def current(self) -> None:
        """Make the patterns Chromium pauses on current (cheap when nothing changed).

        Called before a request is let go: its redirect hops are matched against the
        patterns Chromium holds then.
        """
        cdp = self._browser
        if cdp is None:
            return
        key, patterns = self._patterns()
        if key == self._applied:
            return
        try:
            await cdp.send("Fetch.enable", {"patterns": patterns})
        except Exception as exc:
            if traceback_worth_logging(exc) is None and cdp is self._browser:
                # The browser (or our session to it) is gone: nothing pauses there now,
                # and a Guard kept past its browser must not ask a closed driver again
                # at every change of the process's surfaces.
                self._browser = self._applied = None
                log.debug("guard's browser session is gone: %s", first_line(exc))
                return
            log.warning(
                "guard could not update what it pauses", exc_info=traceback_worth_logging(exc)
            )
            return
        if cdp is self._browser:
            self._applied = key

    # -- deciding -------------------------------------------------------------------------
    async def _on_paused(self, cdp: CDPSession, event: dict[str, Any]) -> None:
        request = event.get("request", {})
        url = str(request.get("url", ""))
        method = str(request.get("method", "GET"))
        request_id = event["requestId"]
        frame = str(event.get("frameId") or "")
        resource_type = event.get("resourceType")
        document = resource_type == "Document"
        redirect = bool(event.get("redirectedRequestId"))
        page = self.frames.page_of(frame)
        unwatched = False
        info: Mapping[str, Any] | None = None
        if page is None:
            info = await PageFrames.target_info(cdp, frame)
            # Its page may have been watched while we asked (a blank popup is announced
            # at once): then it is simply that page's request.
            page = self.frames.page_of(frame)
        if page is None:
            if info is None or info.get("type") != "page":
                page = await self.frames.wait_for_frame(frame)
            elif document and not redirect and info.get("openerId"):
                # A popup: Playwright announces it only once this navigation committed,
                # so it cannot be watched first. Answer locally, re-issue once watched.
                self.holds.hold(frame, url)
                await _fulfill(cdp, request_id, 200, HOLD_PAGE)
                self._spawn(self._expire_hold(frame, url))
                return
            elif self.frames.unwatchable and document:
                unwatched = True  # an open page could not be watched: maybe this one
            else:
                page = await self.frames.wait_for_page(frame, self._hold_timeout)
                unwatched = page is None and document
        await self._judge(cdp, event, page, url, method, document, redirect, unwatched)

    async def _expire_hold(self, target: str, url: str) -> None:
        """A held navigation whose page was never watched: say so, once it is too late."""
        await asyncio.sleep(self._hold_timeout)
        if self.holds.take(target) is not None:
            verdict = GuardVerdict(
                allowed=False,
                rule="unwatched",
                reason="session_keeper could not watch this window in time",
            )
            await self._blocks.record(None, url, "GET", verdict, "Document")

    async def _judge(
        self,
        cdp: CDPSession,
        event: dict[str, Any],
        page: Page | None,
        url: str,
        method: str,
        document: bool,
        redirect: bool,
        unwatched: bool,
    ) -> None:
        """Decide a paused request of ``page`` (``None``: nobody's) and answer it.

        ``unwatched``: a navigation of a window that could not be watched: refused.
        """
        request = event.get("request", {})
        request_id = event["requestId"]
        frame = str(event.get("frameId") or "")
        closed = page is None or page.is_closed()  # a late event must not start a load
        main_frame = page is not None and document and frame == self.frames.main_frames.get(page)
        if not closed and main_frame and not redirect:
            # A top-level navigation starts a new page load (its redirect hops stay in
            # it); the previous one admits nothing more. Before any await: in order.
            assert page is not None
            self._new_page_load(page)
        conversation = self.owner(page)
        network_id = str(event.get("networkId") or "")
        admitted = self._spent.get(network_id, frozenset()) if redirect else frozenset()
        verdict: GuardVerdict
        if unwatched:
            verdict = GuardVerdict(
                allowed=False,
                rule="unwatched",
                reason="session_keeper could not watch this navigation's window",
            )
        else:
            verdict = await self._decide(
                conversation,
                url,
                method,
                page_load=self._loads.get(page) if page is not None else None,
                # A CORS preflight carries no cookies: it can neither leak the login
                # nor spend a use.
                credentials=not is_preflight(method, request.get("headers")),
                # A redirect hop (307/308 keep a POST a POST) is the same request: the
                # sites it already spent a use on are not asked to count it again.
                admitted=admitted,
                page=page,
                may_spend=not browser_initiated(event.get("resourceType")),
                document=document,
                from_url=self._came_from(page, network_id, redirect) if document else None,
            )
        if document and network_id:
            self._hops[network_id] = url
            self._hops.move_to_end(network_id)
            while len(self._hops) > _SPENT_KEPT:
                self._hops.popitem(last=False)
        if main_frame and page is not None and not page.is_closed():
            # A new page load has read nothing yet: its workers' sockets may use only
            # what it reads from now. In place before its document can start a worker;
            # nothing is sent unless its rules changed.
            await self.sockets.refresh(page)
        elif verdict.spent and page is not None:
            self._spawn(self.sockets.refresh(page))  # it read more: its rules may widen
        if verdict.allowed and network_id and (verdict.spent or admitted):
            self._spent[network_id] = admitted | frozenset(verdict.sites)
            self._spent.move_to_end(network_id)
            while len(self._spent) > _SPENT_KEPT:
                self._spent.popitem(last=False)
        if verdict.allowed:
            if document and (page is None or not page.is_closed()):
                # Its page may load anything now: its owner's reads decide what pauses.
                self._parties[page] = conversation
            # Its hops are matched against the patterns Chromium holds from now.
            await self.current()
            with contextlib.suppress(Exception):
                await cdp.send("Fetch.continueRequest", {"requestId": request_id})
            return
        block = await self._blocks.record(
            conversation,
            url,
            method,
            verdict,
            resource_type=event.get("resourceType"),
            redirect=redirect,
        )
        replace = True
        if main_frame and page is not None and not page.is_closed():
            self.answers.refused(page, block)
            replace = self.answers.replaces_document(page)
            if replace:
                self.answers.answering_locally(page, url)
        with contextlib.suppress(Exception):
            if not replace:
                # Keep the document the tab shows (see MainFrameAnswers): abort.
                await cdp.send(
                    "Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"}
                )
                return
            await _fulfill(cdp, request_id, 403, block_page(verdict.reason))

    def _came_from(self, page: Page | None, network_id: str, redirect: bool) -> str | None:
        """The URL a document request leaves from: the hop before it for a redirect, else
        what its page shows now (``None`` for no page)."""
        if redirect and network_id in self._hops:
            return self._hops[network_id]
        if page is None or page.is_closed():
            return None
        return page.url


async def _fulfill(cdp: CDPSession, request_id: str, status: int, body: str) -> None:
    """Answer a paused request with a local page (nothing leaves the browser)."""
    with contextlib.suppress(Exception):
        await cdp.send(
            "Fetch.fulfillRequest",
            {
                "requestId": request_id,
                "responseCode": status,
                "responseHeaders": [
                    {"name": "Content-Type", "value": "text/html; charset=utf-8"},
                    {"name": "Cache-Control", "value": "no-store"},
                ],
                "body": base64.b64encode(body.encode()).decode(),
            },
        )


def is_preflight(method: str, headers: object) -> bool:
    """Whether a paused request is Chromium's CORS preflight (``resourceType`` says
    ``XHR``/``Fetch`` for it: measured). ``Access-Control-Request-Method`` is a
    forbidden header name, so no script can make its own request look like one."""
    if method.upper() != "OPTIONS" or not isinstance(headers, dict):
        return False
    return any(str(k).lower() == "access-control-request-method" for k in headers)


def browser_initiated(resource_type: object) -> bool:
    """Whether a request is one Chromium makes for a tab on its own (type ``Other``:
    the favicon, measured), not one the page's document or script asked for."""
    return isinstance(resource_type, str) and resource_type.lower() == "other"


def without_fragment(url: str) -> str:
    """``url`` without its ``#fragment`` (CDP reports the fragment apart)."""
    return url.split("#", 1)[0]
