"""CdpSession: one Chromium reached over CDP, whose dropped socket is reconnected, not a death.

See :mod:`session_keeper._browser.cdp` for what a reconnect compares and when a cut is a
restart after all.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from playwright._impl._impl_to_api_mapping import API_ATTR
from playwright.async_api import Browser, BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from session_keeper._browser.cdp_endpoint import MARKER_HOST
from session_keeper._browser.playwright_session import PlaywrightSession
from session_keeper._model.cookies import Cookie
from session_keeper._util.redact import (
    scrubbing_logger,
)
from session_keeper.errors import (
    BrowserError,
    BrowserGoneError,
    BrowserLaunchError,
    SessionKeeperError,
)

__all__ = ["CdpSession"]

log = scrubbing_logger("session_keeper.cdp")

T = TypeVar("T")


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


class Reconnector(Protocol):
    """What a session asks of the backend that attached it: its bounds, and a new socket."""

    @property
    def profile_dir(self) -> str:
        """What the session's messages call the browser (no secret)."""
        ...

    connect_timeout: float
    close_timeout: float
    load_timeout: float | None
    reconnect_window: float
    reconnect_backoff: float
    reconnect_backoff_max: float
    reconnect_attempts: int | None
    reuse_blank_tab: bool

    async def _connect(self) -> Browser:
        """One connection attempt to the endpoint (see :class:`CdpBackend`)."""
        ...

    async def _release(self) -> None:
        """Tell the provider our session is over (a courtesy; never raises)."""
        ...


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
        self, backend: Reconnector, browser: Browser, marker: str, marker_name: str
    ) -> None:
        context = browser.contexts[0]
        super().__init__(
            backend,  # type: ignore[arg-type]  # uses only profile_dir and close_timeout
            context,
            None,
            -1,
            watch_process=False,
            poll_interval=None,
            load_timeout=backend.load_timeout,
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
        # Unowned blank tabs being looked at for a conversation: no two opens take one.
        self._claimed: set[Page] = set()
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

    # -- names that outlive our process (re-binding) ----------------------------------------
    @property
    def identity(self) -> str:
        """A digest naming this browser process: its marker's, never the marker itself."""
        return _identity(self._marker)

    def target_id(self, page: Page) -> str | None:
        """The CDP target id of an owned page (local state only), if known."""
        return self._targets.get(page)

    def adopt_found(self, page: Page, conversation: str, target: str) -> None:
        """Own a page a previous keeper process opened (found by its target id; for the
        backend re-binding to this browser)."""
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
    def _ending(self) -> bool:
        # A dropped socket closes every page in Playwright's view while the browser may
        # live on: what was typed into them stays, for the reconnect that re-adopts them
        # or for the death that takes them, unless a page was really closed.
        # A kill (ours, or the keeper's fail-closed leave) closes the pages over a live
        # connection before it ends it: what was typed into them is the restart's loss.
        return (
            super()._ending()
            or self._final
            or self._reconnecting is not None
            or not self._browser.is_connected()
        )

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
        # The input watch lived on the dropped connection: installed again, for every
        # page (the held ones included) before anyone uses one.
        self._activity.rebind()
        try:
            await asyncio.shield(self._watch_installed())
        except Exception:
            # Typed input then goes untold (an honesty gap, not a leak); openers retry.
            log.warning("the input watch could not be installed after a reconnect")
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
                    await self._close(page)

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
        try:
            return await super()._call(make, what, failed)
        except BrowserError:
            # close()/kill() close our pages before the session is declared dead: a call
            # they cut short (a goto "aborted") is the browser going, as on a real kill.
            if self._closing or self._final:
                raise self._gone(what) from None
            raise

    # -- pages: remember target ids for re-adoption ----------------------------------------
    def _adopt(self, page: Page, conversation: str) -> None:
        super()._adopt(page, conversation)
        task = self._loop.create_task(self._learn_target(page))
        self._track(task)

    async def _learn_target(self, page: Page) -> None:
        target = await _target_id(page)
        if target is not None and page in self._pages:
            self._targets[page] = target

    async def _new_page(self) -> Page:
        if self._cdp_backend.reuse_blank_tab:
            for page in list(self._context.pages):
                if page in self._pages or page in self._claimed or page.is_closed():
                    continue
                self._claimed.add(page)
                try:
                    if await self._blank(page):
                        return page  # owned by the caller before anything else runs
                finally:
                    self._claimed.discard(page)
        return await super()._new_page()

    async def _blank(self, page: Page) -> bool:
        """Whether ``page`` shows nothing and has nothing behind it (bounded: a page
        held by a dialog or a busy script is not taken)."""
        if page.url != "about:blank":
            return False
        try:
            opener, length = await asyncio.wait_for(
                asyncio.gather(page.opener(), page.evaluate("history.length")),
                self._cdp_backend.connect_timeout,
            )
        except (PlaywrightError, TimeoutError):
            return False
        return opener is None and length == 1 and page.url == "about:blank"

    async def _close(self, page: Page) -> None:
        """Close ``page`` (:meth:`close_page`); if it is the browser's last tab, open a
        blank one first.

        Chromium ends its browsing session with its last tab: every session cookie
        (most logins) is deleted while the browser runs on (measured on Chromium 156,
        headless too). A browser that is not ours keeps its session.
        """
        context = page.context  # the connection it is on (a reconnect may be adopting)
        if all(other is page or other.is_closed() for other in context.pages):
            await context.new_page()  # nobody's: the Guard refuses it everything
        await page.close()

    async def _open(self, conversation: str, *, sign_in: bool = False) -> Page:
        page = await super()._open(conversation, sign_in=sign_in)
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
        """Close our pages (never the browser's last tab) and disconnect; the remote
        browser keeps running."""
        for page in list(self._pages):
            with contextlib.suppress(PlaywrightError, BrowserError):
                if not page.is_closed():
                    closing = self._close(page)
                    await asyncio.wait_for(closing, self._cdp_backend.close_timeout)
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
