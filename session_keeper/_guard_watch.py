"""The Guard's per-page watch: a CDP ``Fetch`` session that sees every redirect hop.

Playwright hides redirect hops from routing (it continues them itself), so a harmless
URL redirecting into a signed-in site would carry the login out. Each page therefore
gets its own CDP session with ``Fetch`` enabled; Chromium pauses every request there,
hops included, and the Guard's decision runs again. (Dedicated workers' requests pause
there too: measured.)

A cross-site iframe runs in its own renderer, with a target (and interception) of its
own. The page's session auto-attaches to such child targets with
``waitForDebuggerOnStart``: Chromium holds the frame's navigation until we enabled
``Fetch`` on it and let it run, so even its very first request is watched. Playwright's
``CDPSession`` cannot address a flat child session, so children are driven through the
(non-flat) ``Target.sendMessageToTarget`` channel of their parent.

What pauses is only what can carry a protected login (:func:`fetch_patterns`): every
document (a navigation's hops and each new page load must be seen), and every request
to a host a recorded login's cookies go to. Chromium matches a redirect hop against the
patterns by its own URL (measured), so a harmless request redirected into a signed-in
host still pauses at that hop. A page of a conversation with an origin allowlist pauses
everything (any hop may leave the allowlist). The patterns follow the ledger: a login
recorded while a page is open widens its patterns before ``record_login`` returns, and
every request checks, before it is let go, that its page's patterns are current.

This module also keeps each page's bookkeeping: its owner, its current page load, and
the tokens that tell the route which requests the watch already decided.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable, Collection, Coroutine, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from session_keeper._guard_blocks import BlockRecord, MainFrameAnswers, block_page
from session_keeper._guard_policy import GuardVerdict
from session_keeper._redact import scrubbing_logger

if TYPE_CHECKING:
    from playwright.async_api import CDPSession, Frame, Page

__all__ = ["FetchWatch", "browser_initiated", "fetch_patterns", "is_preflight", "without_fragment"]

log = scrubbing_logger("session_keeper.guard")

_Tokens = dict["Page", collections.Counter[tuple[str, str]]]

#: Child targets whose requests the page's own ``Fetch`` does not see.
_OWN_INTERCEPTION: Final = frozenset({"iframe"})

Patterns = list[dict[str, str]]

#: What one page's watch pauses (its key tells when it must be re-sent) for a page.
PatternsFor = Callable[["Page"], tuple[Hashable, Patterns]]


def fetch_patterns(hosts: Collection[str] | None) -> Patterns:
    """CDP ``Fetch`` patterns pausing every document and every request to ``hosts``.

    ``None`` pauses everything. A host pattern is ``*host*``: a URL whose host is
    ``host`` or one of its subdomains contains it, whatever its scheme, user or port
    (it also pauses some requests that merely mention it: those are decided and let go).
    """
    if hosts is None:
        return [{"urlPattern": "*", "requestStage": "Request"}]
    patterns = [{"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}]
    for host in sorted(hosts):
        # CDP wildcards are * and ?, escaped with a backslash; hosts never hold them.
        escaped = "".join("\\" + c if c in "*?\\" else c for c in host)
        patterns.append({"urlPattern": f"*{escaped}*", "requestStage": "Request"})
    return patterns


_AUTO_ATTACH: Final = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": False}

_ids = itertools.count(1)

#: How many requests' spent sites are remembered for their redirect hops.
_SPENT_KEPT: Final = 512


class _Channel:
    """Sends CDP commands to one target: the page's session, or a child through it."""

    def __init__(self, cdp: CDPSession, path: tuple[str, ...] = ()) -> None:
        self.cdp = cdp
        #: Session ids from the page's session down to this child (empty: the page).
        self.path = path

    def child(self, session_id: str) -> _Channel:
        return _Channel(self.cdp, (*self.path, session_id))

    async def send(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send without waiting for a child's answer (it comes back as an event)."""
        if not self.path:
            await self.cdp.send(method, dict(params or {}))
            return
        message: dict[str, Any] = {"id": next(_ids), "method": method, "params": params or {}}
        # Wrap once per level: the innermost child's message goes in first.
        for session_id in reversed(self.path[1:]):
            message = {
                "id": next(_ids),
                "method": "Target.sendMessageToTarget",
                "params": {"sessionId": session_id, "message": json.dumps(message)},
            }
        await self.cdp.send(
            "Target.sendMessageToTarget",
            {"sessionId": self.path[0], "message": json.dumps(message)},
        )


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
    ) -> Awaitable[GuardVerdict]: ...


class Record(Protocol):
    """Keeps one block record."""

    def __call__(
        self,
        conversation: str | None,
        url: str,
        method: str,
        verdict: GuardVerdict,
        resource_type: str | None = None,
        *,
        redirect: bool = False,
    ) -> Awaitable[BlockRecord]: ...


class FetchWatch:
    """Per-page CDP ``Fetch`` sessions and the bookkeeping the route reads."""

    def __init__(
        self,
        *,
        decide: Decide,
        record: Record,
        end_page_load: Callable[[Hashable], None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        patterns: PatternsFor,
    ) -> None:
        self._decide = decide
        self._patterns = patterns
        self._record = record
        self._end_page_load = end_page_load
        self._spawn = spawn
        #: Which conversation owns each page (pages opened through the keeper).
        self.owners: dict[Page, str] = {}
        self._cdp: dict[Page | Frame, CDPSession] = {}
        self._watching: dict[Page | Frame, asyncio.Event] = {}
        # Document requests our CDP session let through, per page, not yet routed.
        self._seen: _Tokens = {}
        # Requests our CDP session admitted by spending a use, not yet routed: the
        # route that follows must not spend a second use on the same request.
        self._admitted: _Tokens = {}
        # Each page's current page load (a fresh token per main-frame navigation): a
        # read use spent under it covers the page's further reads (keeper.admit).
        self._loads: dict[Page, Hashable] = {}
        # The CDP frame id of each watched page's main frame.
        self._main_frames: dict[Page, str] = {}
        # Sites each request (by CDP network id) spent a use on: its redirect hops are
        # the same request, not another use. Bounded: a finished request is not told.
        self._spent: collections.OrderedDict[str, frozenset[str]] = collections.OrderedDict()
        #: How refused top-level navigations are answered, and each page's refusals.
        self.answers = MainFrameAnswers()
        # The key of the patterns each watched page (and its cross-site frames) pause on.
        self._applied: dict[Page, Hashable] = {}
        # Each page's cross-site frames' channels (their patterns follow the page's).
        self._children: dict[Page, dict[tuple[str, ...], _Channel]] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything (a new browser)."""
        for state in (self.owners, self._cdp, self._watching, self._seen, self._admitted):
            state.clear()
        self._loads.clear()
        self._main_frames.clear()
        self._spent.clear()
        self._applied.clear()
        self._children.clear()
        self.answers.reset()

    def reconnected(self) -> None:
        """The CDP connection was replaced under the same browser: every session died.

        Owners and page loads stay (the pages did); tokens of requests our dead sessions
        let through are dropped, so such a request that reaches a route now is held as
        unseen, never admitted on an old word (fail closed).
        """
        for state in (self._cdp, self._watching, self._seen, self._admitted):
            state.clear()
        self._main_frames.clear()
        self._applied.clear()
        self._children.clear()

    def owner(self, page: Page | None) -> str | None:
        """The conversation that owns ``page``; ``None`` for a page nobody owns."""
        return None if page is None else self.owners.get(page)

    def page_load(self, page: Page | None) -> Hashable | None:
        """The token of ``page``'s current page load, if it has one."""
        return None if page is None else self._loads.get(page)

    def watched(self, target: Page | Frame) -> bool:
        """Whether ``target`` has a CDP session with ``Fetch`` enabled."""
        return target in self._cdp

    def take_seen(self, page: Page, method: str, url: str) -> bool:
        """Whether our CDP session let this navigation through (and forget it)."""
        return _take(self._seen, page, method, url)

    def take_admitted(self, page: Page, method: str, url: str) -> bool:
        """Whether our CDP session admitted this request by spending a use (and forget it)."""
        return _take(self._admitted, page, method, url)

    def pending(self, page: Page | None) -> tuple[int, int]:
        """``(admitted, seen)`` tokens of ``page`` (or of every page) not yet routed."""

        def count(tokens: _Tokens) -> int:
            counters = [tokens.get(page)] if page is not None else list(tokens.values())
            return sum(sum(c.values()) for c in counters if c)

        return count(self._admitted), count(self._seen)

    def forget(self, page: Page) -> None:
        """``page`` closed: drop its state and end its page load."""
        self.owners.pop(page, None)
        self._seen.pop(page, None)
        self._admitted.pop(page, None)
        self._main_frames.pop(page, None)
        self.answers.forget(page)
        self._applied.pop(page, None)
        self._children.pop(page, None)
        load = self._loads.pop(page, None)
        if load is not None:
            self._end_page_load(load)
        for target in [t for t in self._cdp if t is page or getattr(t, "page", None) is page]:
            del self._cdp[target]

    def _new_page_load(self, page: Page) -> None:
        old = self._loads.get(page)
        self._loads[page] = object()
        if old is not None:
            self._end_page_load(old)

    # -- what pauses ----------------------------------------------------------------------
    async def current(self, page: Page | None) -> None:
        """Make ``page``'s patterns (every watched page's, for ``None``) current.

        Called before a request is let go: its redirect hops are matched against the
        patterns Chromium holds then. Cheap when nothing changed (a key comparison).
        """
        if page is not None:
            if page in self._applied:
                key, patterns = self._patterns(page)
                if self._applied.get(page) != key:
                    await self._apply(page, key, patterns)
            return
        await self.refresh()

    async def refresh(self) -> None:
        """Make every watched page's patterns current (the ledger changed)."""
        for page in list(self._applied):
            key, patterns = self._patterns(page)
            if self._applied.get(page) != key:
                await self._apply(page, key, patterns)

    async def _apply(self, page: Page, key: Hashable, patterns: Patterns) -> None:
        cdp = self._cdp.get(page)
        if cdp is None:
            return
        try:
            await cdp.send("Fetch.enable", {"patterns": patterns})
        except Exception:
            if not page.is_closed():
                log.warning("guard could not update a page's patterns", exc_info=True)
            return
        children = self._children.get(page, {})
        for path, child in list(children.items()):
            try:
                await child.send("Fetch.enable", {"patterns": patterns})
            except Exception:
                children.pop(path, None)  # a frame that is gone
        if page in self._applied:
            self._applied[page] = key

    # -- watching -------------------------------------------------------------------------
    async def watch(self, target: Page | Frame, page: Page) -> None:
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
        try:
            cdp = await page.context.new_cdp_session(target)
        except Exception:
            # A same-process frame has no session of its own; its page's covers it.
            return

        if target is page:
            self.answers.track(page)
            try:
                # A page target's id is its main frame's id (answered by the browser
                # process: Page.getFrameTree would wait on a renderer held by our route).
                info = await cdp.send("Target.getTargetInfo")
                self._main_frames[page] = str(info["targetInfo"]["targetId"])
            except Exception:
                # Without it no request counts as a page load: each read spends a use.
                log.warning("guard could not learn a page's main frame", exc_info=True)

        channel = _Channel(cdp)

        def paused(event: dict[str, Any]) -> None:
            self._spawn(self._on_paused(channel, target, page, event))

        cdp.on("Fetch.requestPaused", paused)
        cdp.on("Target.attachedToTarget", lambda e: self._spawn(self._on_child(channel, page, e)))
        cdp.on(
            "Target.receivedMessageFromTarget",
            lambda e: self._on_child_message(channel, page, e),
        )
        cdp.on("Target.detachedFromTarget", lambda e: self._on_child_gone(channel, page, e))
        key, patterns = self._patterns(page)
        try:
            await cdp.send("Fetch.enable", {"patterns": patterns})
            if target is page:
                # Cross-site frames (their own renderers) are held until watched.
                await cdp.send("Target.setAutoAttach", dict(_AUTO_ATTACH))
        except Exception:
            log.warning("guard could not watch a page's redirects", exc_info=True)
            return
        # Only now: a request that started before Fetch.enable answered is not watched.
        self._cdp[target] = cdp
        if target is page:
            self._applied[page] = key
        if target is page and page not in self.owners:
            # A page nobody owns has no close handler from the keeper's page hook.
            page.on("close", self.forget)

    async def _on_child(self, parent: _Channel, page: Page, event: dict[str, Any]) -> None:
        """A child target (a cross-site frame, a worker) waits for us: watch it, let it run."""
        child = parent.child(str(event.get("sessionId", "")))
        kind = event.get("targetInfo", {}).get("type")
        try:
            if kind in _OWN_INTERCEPTION:
                # Registered first: a pattern change meanwhile reaches it too.
                self._children.setdefault(page, {})[child.path] = child
                _, patterns = self._patterns(page)
                await child.send("Fetch.enable", {"patterns": patterns})
                # Its own cross-site frames are held the same way.
                await child.send("Target.setAutoAttach", _AUTO_ATTACH)
        except Exception:
            log.warning("guard could not watch a cross-site frame", exc_info=True)
        finally:
            # Always: a child never let run would hang its frame. Messages to one target
            # are handled in order, so Fetch is on before its first request.
            with contextlib.suppress(Exception):
                await child.send("Runtime.runIfWaitingForDebugger")

    def _on_child_message(self, parent: _Channel, page: Page, event: dict[str, Any]) -> None:
        """A child's event (or answer), which may itself carry a grandchild's."""
        child = parent.child(str(event.get("sessionId", "")))
        try:
            message = json.loads(event.get("message", "{}"))
        except ValueError:
            return
        method = message.get("method")
        params = message.get("params", {})
        if method == "Fetch.requestPaused":
            self._spawn(self._on_paused(child, None, page, params))
        elif method == "Target.attachedToTarget":
            self._spawn(self._on_child(child, page, params))
        elif method == "Target.receivedMessageFromTarget":
            self._on_child_message(child, page, params)
        elif method == "Target.detachedFromTarget":
            self._on_child_gone(child, page, params)
        elif "error" in message:
            log.debug("guard: a child target refused a command: %s", message["error"])

    def _on_child_gone(self, parent: _Channel, page: Page, event: dict[str, Any]) -> None:
        """A cross-site frame went away: its patterns need no more updates."""
        gone = parent.child(str(event.get("sessionId", ""))).path
        children = self._children.get(page, {})
        for path in [p for p in children if p[: len(gone)] == gone]:
            del children[path]

    async def _on_paused(
        self,
        channel: _Channel,
        target: Page | Frame | None,
        page: Page,
        event: dict[str, Any],
    ) -> None:
        request = event.get("request", {})
        url = str(request.get("url", ""))
        method = str(request.get("method", "GET"))
        conversation = self.owner(page)
        request_id = event["requestId"]
        redirect = bool(event.get("redirectedRequestId"))
        closed = page.is_closed()  # a late event of a closed page must not leave tokens
        document = event.get("resourceType") == "Document"
        main_frame = (
            target is page and document and event.get("frameId") == self._main_frames.get(page)
        )
        if not closed and main_frame and not redirect:
            # A top-level navigation starts a new page load (its redirect hops stay in
            # it); the previous one admits nothing more. Before any await: in order.
            self._new_page_load(page)
        network_id = str(event.get("networkId") or "")
        admitted = self._spent.get(network_id, frozenset()) if redirect else frozenset()
        verdict = await self._decide(
            conversation,
            url,
            method,
            page_load=self._loads.get(page),
            # A CORS preflight carries no cookies, and Playwright answers it without
            # our route: it can neither leak the login nor spend a use.
            credentials=not is_preflight(method, request.get("headers")),
            # A redirect hop (307/308 keep a POST a POST) is the same request: the
            # sites it already spent a use on are not asked to count it again.
            admitted=admitted,
            page=page,
            may_spend=not browser_initiated(event.get("resourceType")),
        )
        if verdict.allowed and network_id and (verdict.spent or admitted):
            self._spent[network_id] = admitted | frozenset(verdict.sites)
            self._spent.move_to_end(network_id)
            while len(self._spent) > _SPENT_KEPT:
                self._spent.popitem(last=False)
        key = (method.upper(), without_fragment(url))
        if verdict.spent and verdict.allowed and not redirect and not closed:
            self._admitted.setdefault(page, collections.Counter())[key] += 1
        if verdict.allowed and not closed and target is page and not redirect and document:
            # Our interceptor sits before Playwright's (measured: holding a request
            # here holds its route too), so the route that follows can tell that
            # this navigation is watched. Redirect hops are never routed.
            self._seen.setdefault(page, collections.Counter())[key] += 1
        replace = True
        if not verdict.allowed:
            block = await self._record(
                conversation,
                url,
                method,
                verdict,
                resource_type=event.get("resourceType"),
                redirect=redirect,
            )
            if main_frame and not closed:
                self.answers.refused(page, block)
                replace = self.answers.replaces_document(page)
                if replace:
                    self.answers.answering_locally(page, url)
        try:
            if verdict.allowed:
                # Its hops are matched against the patterns Chromium holds from now.
                await self.current(page)
                await channel.send("Fetch.continueRequest", {"requestId": request_id})
                return
            if not replace:
                # Keep the document the tab shows (see MainFrameAnswers): abort.
                await channel.send(
                    "Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"}
                )
                return
            await channel.send(
                "Fetch.fulfillRequest",
                {
                    "requestId": request_id,
                    "responseCode": 403,
                    "responseHeaders": [
                        {"name": "Content-Type", "value": "text/html; charset=utf-8"},
                        {"name": "Cache-Control", "value": "no-store"},
                    ],
                    "body": base64.b64encode(block_page(verdict.reason).encode()).decode(),
                },
            )
        except Exception:
            # The page closed under us: the request died with it.
            return


def _take(tokens: _Tokens, page: Page, method: str, url: str) -> bool:
    """Take one ``(method, url)`` token of ``page``, if there is one."""
    counter = tokens.get(page)
    key = (method.upper(), without_fragment(url))
    if not counter or not counter[key]:
        return False
    counter[key] -= 1
    if not counter[key]:
        del counter[key]
    return True


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
