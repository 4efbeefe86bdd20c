"""CdpBackend: a Chromium the keeper did not launch, reached over CDP.

Hosted browser services (and a Chromium started with ``--remote-debugging-port``)
hand out a CDP endpoint; Playwright's ``connect_over_cdp`` attaches to it. What this
module adds is that **a dropped socket is not a dead browser**: the session's
generation follows the browser's identity, not the connection.

- At connect, the session plants a *generation marker*: a session cookie named per
  keeper (:func:`marker_cookie_name`, from the keeper's ``keeper_id``) with a random
  value on the keeper-only host ``session-keeper.invalid`` (never sent
  anywhere: ``.invalid`` never resolves). Only a new browser process loses it.
- When the connection drops, the session reconnects (for ``reconnect_window``
  seconds, capped exponential backoff; see :class:`CdpBackend`) and compares evidence: the marker's
  value in the jar, and the target ids of the pages it owns. Same browser: the
  session stays alive (no close event) and its pages are re-adopted by target id,
  *in place*: the ``Page`` objects handed out before the cut are re-pointed at the
  reconnected targets, so the keeper's tab records stay valid. A different browser,
  no reconnect, or the endpoint callable raising :class:`BrowserGoneError` (the
  provider says the session is gone): the session dies with ``"crashed"`` once, and
  the keeper relaunches and measures losses as for a local crash.
- Routes (the Guard's) live on the connection and die with it. The Guard registers
  :meth:`CdpSession.on_readopt` and re-installs its routes and page watches after a
  re-adoption, before any waiting call goes on; routes nobody re-installs, or a
  re-install that fails, fail closed: the generation ends (our tabs closed, a real
  loss). Requests pages made *during* the cut itself were not intercepted (Chromium
  ends a DevTools session's interception with its connection); the Guard fails
  closed when a page is found on a site its conversation may not read.
- A new keeper *process* re-binds (:meth:`CdpBackend.rebind`, see ``_rebind.py``): the
  saved :attr:`CdpSession.identity` (a digest of the marker) and page target ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import ipaddress
import math
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import SplitResult, unquote, urlsplit

from playwright._impl._impl_to_api_mapping import API_ATTR
from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from session_keeper._backend import Cookie
from session_keeper._errors import (
    BrowserError,
    BrowserGoneError,
    BrowserLaunchError,
    InvalidArgument,
    InvalidArgumentType,
    ProfileInUse,
    SessionKeeperError,
    UsageError,
)
from session_keeper._playwright_session import PlaywrightSession, first_line
from session_keeper._rebind import Rebound
from session_keeper._redact import (
    REDACTED,
    redact_text,
    remember_secrets,
    scrubbing_logger,
)
from session_keeper._surfaces import serve_surface

__all__ = ["MARKER_COOKIE", "MARKER_HOST", "CdpBackend", "CdpSession", "marker_cookie_name"]

log = scrubbing_logger("session_keeper.cdp")

T = TypeVar("T")

#: The keeper-only host that carries the generation marker; ``.invalid`` never resolves.
MARKER_HOST = "session-keeper.invalid"
#: The legacy marker cookie's name, shared by every keeper (still read at re-binding so
#: saved identities keep loading); see :func:`marker_cookie_name` for today's.
MARKER_COOKIE = "session_keeper_generation"


def marker_cookie_name(keeper_id: str) -> str:
    """The marker cookie's name for ``keeper_id``: one per keeper, so two keepers on one
    browser never overwrite each other's marker (its value is random and never logged)."""
    digest = hashlib.sha256(f"session-keeper-id:{keeper_id}".encode()).hexdigest()[:16]
    return f"{MARKER_COOKIE}_{digest}"


Endpoint = str | Callable[[], Awaitable[str]]

#: The longest endpoint URL accepted; hosted endpoints with a token run to a few hundred.
MAX_ENDPOINT_CHARS = 4096
_SCHEMES = frozenset({"ws", "wss", "http", "https"})
_HOST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9_-]+)*\.?")
#: Control characters and spaces: never part of a URL, and a NUL ends a C string early.
_NOT_IN_URL = re.compile(r"[\x00-\x20\x7f-\x9f]")


def check_endpoint(url: object) -> SplitResult:
    """Parse a CDP endpoint URL, or raise :class:`InvalidArgument` (the message never
    quotes the URL: its path, query or userinfo may carry an API key)."""
    if not isinstance(url, str):
        raise InvalidArgumentType("the endpoint must be a URL string")
    if len(url) > MAX_ENDPOINT_CHARS:
        raise InvalidArgument(f"the endpoint URL is longer than {MAX_ENDPOINT_CHARS} characters")
    if _NOT_IN_URL.search(url):
        raise InvalidArgument("the endpoint URL contains a control character or a space")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises for a port that is not a number in 0..65535
    except ValueError:
        raise InvalidArgument("the endpoint is not a parseable URL (host or port)") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise InvalidArgument("the endpoint must be an http(s):// or ws(s):// URL")
    host = parts.hostname
    if not host:
        raise InvalidArgument("the endpoint URL has no host")
    bracketed = parts.netloc.rpartition("@")[2].startswith("[")
    if bracketed:
        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            raise InvalidArgument("the endpoint URL's host is not an IPv6 address") from None
    elif not _HOST_NAME.fullmatch(host):
        raise InvalidArgument("the endpoint URL's host is not a host name or address")
    if port == 0:
        raise InvalidArgument("the endpoint URL's port must be 1..65535")
    return parts


def endpoint_display(parts: SplitResult) -> str:
    """An endpoint as it may be shown: scheme, host and port; its userinfo dropped, its
    path and query (where hosted endpoints carry their API key) shown as redacted."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None else ""
    path = f"/{REDACTED}" if parts.path not in ("", "/") else parts.path
    query = f"?{REDACTED}" if parts.query else ""
    fragment = f"#{REDACTED}" if parts.fragment else ""
    return f"{parts.scheme}://{host}{port}{path}{query}{fragment}"


#: A path segment this long is taken for a token (``/devtools/browser/<id>``); shorter
#: ones are words ("devtools", "browser") that scrubbing would blank everywhere.
_TOKEN_SEGMENT_CHARS = 16


def _endpoint_secrets(parts: SplitResult) -> list[str]:
    """The endpoint's parts that may be a credential, raw and percent-decoded."""
    userinfo = parts.netloc.rpartition("@")[0]
    found = [userinfo, parts.password or "", parts.path, parts.query, parts.fragment]
    found += [seg for seg in parts.path.split("/") if len(seg) >= _TOKEN_SEGMENT_CHARS]
    found += [value for _, _, value in (kv.partition("=") for kv in parts.query.split("&"))]
    found = [piece for piece in found if piece and piece != "/"]
    return found + [unquote(piece) for piece in found]


async def _target_id(page: Page) -> str | None:
    """The CDP target id of ``page`` (one round trip), or ``None`` if it cannot be read."""
    try:
        cdp = await page.context.new_cdp_session(page)
        try:
            info = await cdp.send("Target.getTargetInfo")
        finally:
            with contextlib.suppress(PlaywrightError):
                await cdp.detach()
    except PlaywrightError:
        return None
    target = info.get("targetInfo", {}).get("targetId")
    return target if isinstance(target, str) else None


def _identity(marker: str) -> str:
    """The browser's saved name: a digest of its marker (the marker itself is never stored)."""
    return hashlib.sha256(f"session-keeper-browser:{marker}".encode()).hexdigest()


def _intercepts(context: BrowserContext) -> bool:
    """Whether routes were installed on ``context`` (Playwright keeps them client-side)."""
    impl = context._impl_obj
    return bool(getattr(impl, "_routes", None) or getattr(impl, "_web_socket_routes", None))


def _routes(impl: Any) -> tuple[int, int]:
    """How many HTTP and WebSocket routes a Playwright context or page holds (client-side)."""
    return len(getattr(impl, "_routes", ()) or ()), len(
        getattr(impl, "_web_socket_routes", ()) or ()
    )


def _covers(now: tuple[int, int], before: tuple[int, int]) -> bool:
    return now[0] >= before[0] and now[1] >= before[1]


def _repoint(held: Page, fresh: Page) -> None:
    """Make the ``Page`` the keeper holds drive ``fresh`` (the same target, reconnected).

    Playwright's public ``Page`` is a thin wrapper over an implementation object; the
    wrapper is what the keeper, the handle and agent code hold. Swapping the
    implementation keeps every reference valid, and registering the held wrapper as
    the implementation's API object makes ``context.pages`` hand back the same one.
    """
    impl = fresh._impl_obj
    held._impl_obj = impl
    setattr(impl, API_ATTR, held)


class CdpSession(PlaywrightSession):
    """One attachment to a remote Chromium; a :class:`PlaywrightSession` (Guard works on it).

    Created only by :meth:`CdpBackend.launch`. :attr:`context` is the browser's default
    context *as currently connected* (a new object after a reconnect). ``pid`` is
    ``None``: the process is not ours. :attr:`reconnects` counts reconnects to the
    same browser. A call in flight when the socket drops raises
    :class:`BrowserGoneError` (it may or may not have happened); calls made while a
    reconnect runs wait for its outcome.
    """

    def __init__(
        self, backend: CdpBackend, browser: Browser, marker: str, marker_name: str
    ) -> None:
        context = browser.contexts[0]
        super().__init__(
            backend,  # type: ignore[arg-type]  # uses only profile_dir and close_timeout
            context,
            None,
            -1,
            watch_process=False,
            poll_interval=None,
        )
        self._lock_fd = None  # No profile lock: the profile is the provider's.
        self._cdp_backend = backend
        self._browser = browser
        self._marker = marker
        self._marker_name = marker_name
        self._targets: dict[Page, str] = {}
        self._final = False
        self._reconnecting: asyncio.Task[None] | None = None
        self._unannounced: list[tuple[str, Page]] = []
        self._found: set[Page] = set()
        self._readopt_hooks: list[Callable[[CdpSession], Awaitable[None]]] = []
        self.reconnects = 0

    @property
    def reconnecting(self) -> bool:
        """Whether a reconnect runs now (the socket dropped; calls wait for its outcome)."""
        return self._reconnecting is not None

    def on_readopt(self, callback: Callable[[CdpSession], Awaitable[None]]) -> None:
        """Run ``await callback(session)`` after a reconnect re-adopted our pages.

        For what lived on the dropped connection (the Guard's routes and CDP sessions):
        it runs before any waiting call goes on. If a callback raises, or the routes
        the session had are not all back afterwards, the generation ends instead
        (``"crashed"``, our pages closed): nothing runs unguarded.
        """
        self._readopt_hooks.append(callback)

    def owned_pages(self) -> list[tuple[str, Page]]:
        """``(conversation, page)`` for every page this session owns (local state only)."""
        return [(c, p) for p, c in self._pages.items()]

    # -- names that outlive our process (re-binding, see _rebind.py) -----------------------
    @property
    def identity(self) -> str:
        """A digest naming this browser process: its marker's, never the marker itself."""
        return _identity(self._marker)

    def target_id(self, page: Page) -> str | None:
        """The CDP target id of an owned page (local state only), if known."""
        return self._targets.get(page)

    def _adopt_found(self, page: Page, conversation: str, target: str) -> None:
        """Own a page a previous keeper process opened (found by its target id)."""
        PlaywrightSession._adopt(self, page, conversation)
        self._targets[page] = target
        self._found.add(page)
        self._unannounced.append((conversation, page))

    def found_at_rebind(self, page: Page) -> bool:
        """Whether ``page`` was opened by a previous keeper process and found again here."""
        return page in self._found

    async def announce_adopted(self) -> None:
        """Run the ``on_page`` callbacks (the Guard's watch) for the pages found at re-binding.

        Unlike for a new page, a callback's :class:`BrowserError` propagates: a watcher
        refusing what a found page shows makes the keeper fail closed.
        """
        pending, self._unannounced = self._unannounced, []
        for conversation, page in pending:
            if page in self._pages:
                for callback in list(self._page_callbacks):
                    result = callback(conversation, page)
                    if inspect.isawaitable(result):
                        await self._race(result, "adopting a page")

    async def detach(self) -> None:
        """Disconnect, closing nothing: the browser, our pages and the marker live on."""
        if self._cause is not None:
            return
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(self._browser.close(), self._cdp_backend.close_timeout)
        self._declare_dead()

    # -- death vs. a dropped socket ------------------------------------------------------
    def _die(self) -> None:
        if self._final or self._closing or self._cause is not None:
            self._final = True
            super()._die()
            return
        if self._reconnecting is None:
            log.info("connection to %s dropped; reconnecting", self._cdp_backend.profile_dir)
            self._reconnecting = self._loop.create_task(self._reconnect())

    def _declare_dead(self) -> None:
        self._final = True
        super()._die()

    async def _reconnect(self) -> None:
        backend = self._cdp_backend
        loop = self._loop
        deadline = loop.time() + backend.reconnect_window
        delay = backend.reconnect_backoff
        attempt = 0
        try:
            while backend.reconnect_attempts is None or attempt < backend.reconnect_attempts:
                if self._cause is not None:
                    return
                if attempt:
                    await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
                    delay = min(delay * 2, backend.reconnect_backoff_max)
                attempt += 1
                left = deadline - loop.time()
                if left <= 0:
                    log.info("no reconnect within the reconnect window: a restart")
                    break
                try:
                    # Each attempt ends by the window's end: the bound a waiting call has.
                    browser = await asyncio.wait_for(backend._connect(), left)
                except BrowserGoneError:
                    log.info("provider says the browser is gone")
                    break
                except (BrowserLaunchError, TimeoutError):
                    continue
                try:
                    outcome = await asyncio.wait_for(
                        self._readopt(browser), backend.connect_timeout
                    )
                except TimeoutError:
                    outcome = "reconnected, but the browser did not answer in connect_timeout"
                if outcome is None:
                    self.reconnects += 1
                    return
                with contextlib.suppress(PlaywrightError):
                    await browser.close()  # Disconnects only: the browser is not ours.
                log.info("%s: a restart", outcome)
                break
            self._declare_dead()
        finally:
            self._reconnecting = None

    async def _readopt(self, browser: Browser) -> str | None:
        """Adopt ``browser`` if it is the one we had (marker or a target id matches).

        ``None`` when adopted, else what happened instead (for the log).
        """
        if not browser.contexts:
            return "reconnected to a browser with no default context"
        context = browser.contexts[0]
        try:
            jar = await context.cookies(f"https://{MARKER_HOST}/")
        except PlaywrightError:
            return "reconnected, but the generation marker could not be read"
        name = self._marker_name
        marker_kept = any(c["name"] == name and c["value"] == self._marker for c in jar)
        fresh: dict[str, Page] = {}
        for page in context.pages:
            target = await _target_id(page)
            if target is not None:
                fresh[target] = page
        targets_kept = any(t in fresh for t in self._targets.values())
        if not (marker_kept or targets_kept):
            return "reconnected to a different browser (marker and pages gone)"
        intercepted = _intercepts(self._context)
        if intercepted and not self._readopt_hooks:
            # Routes nobody re-installs lived on the dropped connection: fail closed.
            # Our tabs are closed (a real loss, never an orphan) and the generation ends.
            await self._close_found(fresh)
            return "same browser, but its interception cannot be carried over (fail closed)"
        # What each held page and the context had routed, to check it all came back.
        before = (
            _routes(self._context._impl_obj),
            {held: _routes(held._impl_obj) for held in self._pages},
        )
        self._browser = browser
        self._context = context
        browser.on("disconnected", lambda _b: self._die())
        context.on("close", lambda _c: self._die())
        for held, conversation in list(self._pages.items()):
            match = fresh.get(self._targets.get(held, ""))
            if match is None:
                # Closed while we were away: a real loss, reported by the keeper as one.
                self._pages.pop(held, None)
                self._targets.pop(held, None)
                continue
            _repoint(held, match)
            super()._adopt(held, conversation)
        if intercepted and not await self._reinstall(before):
            await self._close_found(fresh)
            return "same browser, but its interception was not re-installed (fail closed)"
        return None

    async def _reinstall(self, before: tuple[tuple[int, int], dict[Page, tuple[int, int]]]) -> bool:
        """Run the re-adoption callbacks; whether every route is back (else fail closed)."""
        try:
            for hook in list(self._readopt_hooks):
                await hook(self)
        except SessionKeeperError as exc:
            log.warning("interception not re-installed after a reconnect: %s", exc)
            return False
        except Exception:
            log.exception("re-installing interception after a reconnect failed")
            return False
        context_routes, page_routes = before
        if not _covers(_routes(self._context._impl_obj), context_routes):
            return False
        return all(
            _covers(_routes(page._impl_obj), routes)
            for page, routes in page_routes.items()
            if page in self._pages
        )

    async def _close_found(self, fresh: Mapping[str, Page]) -> None:
        for target in self._targets.values():
            page = fresh.get(target)
            if page is not None:
                with contextlib.suppress(PlaywrightError):
                    await page.close()

    async def _settled(self) -> None:
        """Wait for a running reconnect to end (bounded by its attempts)."""
        task = self._reconnecting
        if task is not None:
            await asyncio.wait((task, self._died), return_when=asyncio.FIRST_COMPLETED)

    async def _call(
        self,
        make: Callable[[], Awaitable[T]],
        what: str,
        failed: Callable[[str], SessionKeeperError] | None = None,
    ) -> T:
        await self._settled()
        return await super()._call(make, what, failed)

    # -- pages: remember target ids for re-adoption ----------------------------------------
    def _adopt(self, page: Page, conversation: str) -> None:
        super()._adopt(page, conversation)
        task = self._loop.create_task(self._learn_target(page))
        self._track(task)

    async def _learn_target(self, page: Page) -> None:
        target = await _target_id(page)
        if target is not None and page in self._pages:
            self._targets[page] = target

    async def _open(self, conversation: str) -> Page:
        page = await super()._open(conversation)
        # Known before open_page returns: a cut right after still re-adopts it.
        target = await _target_id(page)
        if target is not None:
            self._targets[page] = target
        return page

    def _forget_page(self, page: Page) -> None:
        # A dropped socket closes every page locally too, before the session hears of the
        # drop (how long before depends on the machine's load): no wait is long enough.
        # Ask the browser, on the connection this page was on, instead.
        if page in self._pages:
            closed = page._impl_obj
            self._track(self._loop.create_task(self._forget_if_gone(page, closed, self._browser)))

    async def _forget_if_gone(self, page: Page, closed: object, browser: Browser) -> None:
        """Forget ``page`` if ``browser`` answers and no longer lists its target.

        Playwright tells a dropped socket as the pages' close events first and the
        browser's disconnect after, and answers nothing more on that connection once
        it dropped: an answer means the connection was live after this close, so the
        close was the page's own. No answer leaves the page to the reconnect, which
        re-adopts it by target id or forgets it as a real loss.
        """
        target = self._targets.get(page)
        try:
            cdp = await asyncio.wait_for(
                browser.new_browser_cdp_session(), self._cdp_backend.connect_timeout
            )
            try:
                info = await asyncio.wait_for(
                    cdp.send("Target.getTargets"), self._cdp_backend.connect_timeout
                )
            finally:
                with contextlib.suppress(PlaywrightError):
                    await cdp.detach()
        except (PlaywrightError, TimeoutError):
            return
        if page._impl_obj is not closed or browser is not self._browser or self.reconnecting:
            return  # Re-adopted since, or a reconnect now decides.
        listed = {t.get("targetId") for t in info.get("targetInfos", ())}
        if target is None or target not in listed:
            super()._forget_page(page)
            self._targets.pop(page, None)

    def page_is_open(self, page: Page) -> bool:
        """Whether ``page`` is an open page of this live browser (local state only).

        While a reconnect runs, an owned page counts as open: it is not known lost.
        """
        if self._cause is not None or page not in self._pages:
            return False
        return self._reconnecting is not None or not page.is_closed()

    def pages(self, conversation: str) -> Sequence[Page]:
        """Open pages of ``conversation``, oldest first (local state only)."""
        return [p for p, c in self._pages.items() if c == conversation and self.page_is_open(p)]

    # -- cookies: the marker is ours, not the user's ---------------------------------------
    async def cookies(self) -> Sequence[Cookie]:
        """Every cookie in the jar except the keeper's generation marker."""
        return [c for c in await super().cookies() if c.domain != MARKER_HOST]

    # -- lifetime of a browser we do not own -----------------------------------------------
    async def _leave(self) -> None:
        """Close our pages and disconnect; the remote browser keeps running."""
        for page in list(self._pages):
            with contextlib.suppress(PlaywrightError, BrowserError):
                if not page.is_closed():
                    await asyncio.wait_for(page.close(), self._cdp_backend.close_timeout)
        self._pages.clear()
        with contextlib.suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(self._browser.close(), self._cdp_backend.close_timeout)
        await self._cdp_backend._release()

    async def close(self) -> None:
        """Close our pages, disconnect, call ``release``; ``"closed"``. Idempotent."""
        if self._cause is not None:
            return
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        with contextlib.suppress(TimeoutError):
            await self._leave()
        self._declare_dead()

    async def kill(self) -> None:
        """Like :meth:`close` but reported as ``"crashed"``: our tabs are gone, the jar stays.

        We cannot kill a browser we do not own; what a kill means to the keeper (tabs
        lost, generation over) is what this does.
        """
        if self._cause is not None:
            return
        self._final = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        with contextlib.suppress(TimeoutError):
            await self._leave()
        self._declare_dead()

    def __repr__(self) -> str:
        state = "alive" if self._cause is None else self._cause
        return f"<CdpSession {self._cdp_backend.profile_dir} {state} pages={len(self._pages)}>"


class CdpBackend:
    """A :class:`~session_keeper.BrowserBackend` for a Chromium reached over CDP.

    ``endpoint`` is a CDP URL (``http://host:port`` or a ``ws://`` URL) or an async
    callable returning one; a provider's callable may mint a fresh URL per connection,
    and raises :class:`~session_keeper.BrowserGoneError` to say the browser session is
    gone for good. ``release`` (optional, async) is called after our pages are closed
    and we disconnected, to hand the browser back to the provider.

    The browser is not ours, so: :meth:`CdpSession.close` (what an idle sweep calls)
    closes the pages our conversations opened, disconnects and calls ``release``; the
    remote browser, its other tabs and its cookie jar live on as the provider keeps
    them (the keeper's idle policy decides, as for a local browser, whether logins
    are forgotten first). :meth:`CdpSession.kill` does the same and is reported as
    ``"crashed"``.

    A dropped connection is retried for ``reconnect_window`` seconds (default 12),
    waiting ``reconnect_backoff`` seconds (0.1) doubling up to ``reconnect_backoff_max``
    (1.0) between attempts, and at most ``reconnect_attempts`` times if given. Why
    these: socket blips, proxy and gateway failovers last seconds, and a false
    restart costs the conversations their tabs and logins, while a 12 s wait only
    delays calls that could not run anyway; the 1 s cap finds a restored socket
    within about a second. A call made while a reconnect runs waits for it; if the
    browser is really gone it raises :class:`~session_keeper.BrowserGoneError` at
    most ``reconnect_window`` seconds after the drop, plus (when some browser
    answered) ``connect_timeout`` to check it, plus :data:`DEATH_BOUND_S`. The
    session stays ``alive`` while the reconnect runs (its death is not known yet),
    so the contract's :data:`DEATH_BOUND_S`, counted from the death being known,
    holds: a provider saying the browser is gone, or a different browser answering,
    ends the generation at once. Each attempt is bounded by ``connect_timeout`` and
    by the end of the window.

    Raises :class:`~session_keeper.InvalidArgumentType` / :class:`InvalidArgument`
    for a bad argument; :meth:`launch` raises :class:`BrowserLaunchError` when it
    cannot connect and :class:`ProfileInUse` while a session is alive.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        release: Callable[[], Awaitable[None]] | None = None,
        connect_timeout: float = 10.0,
        close_timeout: float = 5.0,
        reconnect_window: float = 12.0,
        reconnect_backoff: float = 0.1,
        reconnect_backoff_max: float = 1.0,
        reconnect_attempts: int | None = None,
    ) -> None:
        if not (isinstance(endpoint, str) or callable(endpoint)):
            raise InvalidArgumentType("endpoint must be a URL or an async callable returning one")
        parts = check_endpoint(endpoint) if isinstance(endpoint, str) else None
        self._surface = contextlib.ExitStack()
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("close_timeout", close_timeout),
            ("reconnect_window", reconnect_window),
            ("reconnect_backoff", reconnect_backoff),
            ("reconnect_backoff_max", reconnect_backoff_max),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidArgumentType(f"{name} must be a number of seconds")
            if not math.isfinite(value) or value <= 0:
                raise InvalidArgument(f"{name} must be a positive, finite number of seconds")
        if reconnect_backoff_max < reconnect_backoff:
            raise InvalidArgument("reconnect_backoff_max must be at least reconnect_backoff")
        if reconnect_attempts is not None:
            if isinstance(reconnect_attempts, bool) or not isinstance(reconnect_attempts, int):
                raise InvalidArgumentType("reconnect_attempts must be an int or None")
            if reconnect_attempts < 1:
                raise InvalidArgument("reconnect_attempts must be at least 1")
        self._endpoint = endpoint
        self._shown = endpoint_display(parts) if parts is not None else "(provider)"
        if parts is not None:
            # Its key never reaches a log or an error message, whoever formats one.
            remember_secrets(self, _endpoint_secrets(parts))
        self._release_hook = release
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.reconnect_window = float(reconnect_window)
        self.reconnect_backoff = float(reconnect_backoff)
        self.reconnect_backoff_max = float(reconnect_backoff_max)
        self.reconnect_attempts = reconnect_attempts
        self._playwright: Playwright | None = None
        self._current: CdpSession | None = None
        self._marker_name = marker_cookie_name("default")
        self.launches = 0
        self.rebinds = 0

    def serve_keeper(self, keeper_id: str) -> None:
        """Name the generation marker after ``keeper_id`` (the keeper calls this).

        Raises :class:`~session_keeper.UsageError` while a session for another keeper
        is alive (nothing changed then).
        """
        name = marker_cookie_name(keeper_id)
        if self.current is not None and self.current._marker_name != name:
            raise UsageError("this CdpBackend has a live session for another keeper_id")
        self._marker_name = name

    @property
    def profile_dir(self) -> str:
        """A printable name of the endpoint (secrets redacted), used in messages."""
        return f"CDP endpoint {self._shown}"

    @property
    def current(self) -> CdpSession | None:
        """The live session, if any."""
        if self._current is not None and self._current.alive:
            return self._current
        return None

    async def _url(self) -> tuple[str, str]:
        """The URL to connect to now and how it may be shown."""
        if isinstance(self._endpoint, str):
            return self._endpoint, self._shown
        url = await self._endpoint()
        if not isinstance(url, str):
            raise InvalidArgumentType("the endpoint callable must return a URL string")
        parts = check_endpoint(url)
        # A provider's URL may carry a fresh key each time: scrub the current one.
        remember_secrets(self, _endpoint_secrets(parts))
        return url, endpoint_display(parts)

    async def _connect(self) -> Browser:
        """One connection attempt. BrowserGoneError passes through from the provider."""
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        url, shown = await self._url()
        self._declare_surface(url)
        try:
            return await self._playwright.chromium.connect_over_cdp(
                url, timeout=self.connect_timeout * 1000
            )
        except PlaywrightError as exc:
            # redact_text scrubs the endpoint's key (remembered above) from Playwright's text.
            raise BrowserLaunchError(
                f"cannot connect to {shown}: {redact_text(first_line(exc))}"
            ) from None

    async def launch(self) -> CdpSession:
        """Attach to the remote browser, plant the generation marker, return the session."""
        if self.current is not None:
            raise ProfileInUse(f"{self.profile_dir} already has a live session")
        try:
            browser = await self._connect()
        except BrowserGoneError as exc:
            raise BrowserLaunchError(f"the provider has no browser: {exc}") from None
        if not browser.contexts:
            with contextlib.suppress(PlaywrightError):
                await browser.close()
            raise BrowserLaunchError(f"{self.profile_dir} has no default context")
        marker = secrets.token_hex(16)
        context: BrowserContext = browser.contexts[0]
        cookie: Any = {
            "name": self._marker_name,
            "value": marker,
            "domain": MARKER_HOST,
            "path": "/",
            "expires": -1,
        }
        try:
            await context.add_cookies([cookie])
        except PlaywrightError as exc:
            with contextlib.suppress(PlaywrightError):
                await browser.close()
            raise BrowserLaunchError(
                f"cannot plant the generation marker: {redact_text(first_line(exc))}"
            ) from None
        session = CdpSession(self, browser, marker, self._marker_name)
        self._current = session
        self.launches += 1
        return session

    async def rebind(self, identity: str, targets: Mapping[str, str]) -> Rebound[Page] | None:
        """Attach to the browser a previous keeper process used, if it is still that one.

        ``identity`` is a saved :attr:`CdpSession.identity`; the browser behind the
        endpoint is that one when its jar still holds the marker with that digest
        (only a new browser process loses it). Then no marker is planted and every
        page in ``targets`` (conversation -> target id) that is still open is owned
        again. ``None`` (disconnected, nothing changed) for another browser, or when
        the provider says the session is gone. Raises :class:`BrowserLaunchError`
        when it cannot connect, :class:`ProfileInUse` while a session is alive.
        """
        if self.current is not None:
            raise ProfileInUse(f"{self.profile_dir} already has a live session")
        try:
            browser = await self._connect()
        except BrowserGoneError:
            return None
        marker = None
        # Our keeper's marker, or (saved before markers were per keeper) the shared one.
        names = (self._marker_name, MARKER_COOKIE)
        try:
            if browser.contexts:
                context: BrowserContext = browser.contexts[0]
                jar = await context.cookies(f"https://{MARKER_HOST}/")
                found = sorted(
                    (names.index(c["name"]), c["value"])
                    for c in jar
                    if c["name"] in names and _identity(c["value"]) == identity
                )
                if found:
                    marker = found[0][1]
                    if found[0][0] != 0:
                        # Carry a legacy marker over to our own name (same value, so the
                        # saved identity stays valid); another keeper can no longer clobber it.
                        legacy: Any = {
                            "name": self._marker_name,
                            "value": marker,
                            "domain": MARKER_HOST,
                            "path": "/",
                            "expires": -1,
                        }
                        await context.add_cookies([legacy])
        except PlaywrightError as exc:
            with contextlib.suppress(PlaywrightError):
                await browser.close()
            raise BrowserLaunchError(
                f"cannot read the generation marker: {redact_text(first_line(exc))}"
            ) from None
        if marker is None:
            with contextlib.suppress(PlaywrightError):
                await browser.close()  # Disconnects only: another browser, not ours to close.
            return None
        session = CdpSession(self, browser, marker, self._marker_name)
        wanted = {target: conversation for conversation, target in targets.items()}
        pages: dict[str, Page] = {}
        for page in list(context.pages):
            target = await _target_id(page)
            conversation = wanted.get(target or "")
            if target is not None and conversation is not None and conversation not in pages:
                session._adopt_found(page, conversation, target)
                pages[conversation] = page
        self._current = session
        self.rebinds += 1
        return Rebound(session=session, pages=pages)

    async def _release(self) -> None:
        if self._release_hook is not None:
            try:
                await self._release_hook()
            except Exception:
                # The release is a courtesy to the provider; our side is done either way.
                log.exception("release hook raised")

    def _declare_surface(self, url: str) -> None:
        """The endpoint drives the browser itself: no conversation's page may reach it."""
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
        self._surface.close()
        self._surface.enter_context(serve_surface("cdp", parts.hostname or "", port))

    async def aclose(self) -> None:
        """Close the live session (our pages; the browser lives on) and stop the driver."""
        self._surface.close()
        if self._current is not None:
            await self._current.close()
            self._current = None
        pw, self._playwright = self._playwright, None
        if pw is not None:
            with contextlib.suppress(PlaywrightError):
                await pw.stop()

    def __repr__(self) -> str:
        return f"<CdpBackend {self.profile_dir} launches={self.launches}>"
