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
- A new keeper *process* re-binds (:meth:`CdpBackend.rebind`): the
  saved :attr:`CdpSession.identity` (a digest of the marker) and page target ids.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from playwright.async_api import Browser, BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from session_keeper._browser.cdp_endpoint import (
    MARKER_COOKIE,
    MARKER_HOST,
    Endpoint,
    check_endpoint,
    endpoint_display,
    endpoint_secrets,
    marker_cookie_name,
)
from session_keeper._browser.cdp_session import CdpSession, _identity, _target_id
from session_keeper._browser.navigation import DEFAULT_LOAD_TIMEOUT, check_load_timeout
from session_keeper._browser.playwright_session import first_line
from session_keeper._browser.rebind import Rebound
from session_keeper._browser.selectors import (
    apply_test_id_attribute,
    check_playwright,
    check_test_id_attribute,
)
from session_keeper._util.redact import (
    redact_text,
    remember_secrets,
    scrubbing_logger,
)
from session_keeper._util.surfaces import serve_surface
from session_keeper.errors import (
    BrowserGoneError,
    BrowserLaunchError,
    InvalidArgument,
    InvalidArgumentType,
    ProfileInUse,
    UsageError,
)

__all__ = ["MARKER_COOKIE", "MARKER_HOST", "CdpBackend", "CdpSession", "marker_cookie_name"]

log = scrubbing_logger("session_keeper.cdp")

T = TypeVar("T")


class CdpBackend:
    """A :class:`~session_keeper.BrowserBackend` for a Chromium reached over CDP.

    ``endpoint`` is a CDP URL (``http://host:port`` or a ``ws://`` URL) or an async
    callable returning one; a provider's callable may mint a fresh URL per connection,
    and raises :class:`~session_keeper.errors.BrowserGoneError` to say the browser session is
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
    browser is really gone it raises :class:`~session_keeper.errors.BrowserGoneError` at
    most ``reconnect_window`` seconds after the drop, plus (when some browser
    answered) ``connect_timeout`` to check it, plus :data:`DEATH_BOUND_S`. The
    session stays ``alive`` while the reconnect runs (its death is not known yet),
    so the contract's :data:`DEATH_BOUND_S`, counted from the death being known,
    holds: a provider saying the browser is gone, or a different browser answering,
    ends the generation at once. Each attempt is bounded by ``connect_timeout`` and
    by the end of the window. ``load_timeout`` bounds how long a navigation waits for
    ``load`` after its document is parsed, and ``test_id_attribute`` names the test id
    attribute, as for :class:`~session_keeper.PlaywrightBackend`. ``playwright`` is an
    already-started driver to connect through, the caller's (never stopped here), as for
    :class:`~session_keeper.PlaywrightBackend`; ``None`` starts one of its own.

    ``reuse_blank_tab`` (default ``True``, as Playwright MCP does): a conversation's
    first tab may be a tab the browser already shows, if nobody owns it and it is
    blank (``about:blank``, no opener, nothing in its history), instead of a new one
    beside it. Nothing else already open is ever used: a tab with a page in it or
    behind it is the person's. Closing a tab (a conversation's, or ours as the keeper
    leaves) never closes the browser's last one: a blank tab is opened first, because
    Chromium ends its browsing session, and deletes every session cookie, with its
    last tab.

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
        load_timeout: float | None = DEFAULT_LOAD_TIMEOUT,
        test_id_attribute: str | None = None,
        reuse_blank_tab: bool = True,
        playwright: Playwright | None = None,
    ) -> None:
        if not (isinstance(endpoint, str) or callable(endpoint)):
            raise InvalidArgumentType("endpoint must be a URL or an async callable returning one")
        parts = check_endpoint(endpoint) if isinstance(endpoint, str) else None
        shared = check_playwright(playwright)
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
            remember_secrets(self, endpoint_secrets(parts))
        self._release_hook = release
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.reconnect_window = float(reconnect_window)
        self.reconnect_backoff = float(reconnect_backoff)
        self.reconnect_backoff_max = float(reconnect_backoff_max)
        self.reconnect_attempts = reconnect_attempts
        self.load_timeout = check_load_timeout(load_timeout)
        self.test_id_attribute = check_test_id_attribute(test_id_attribute)
        if not isinstance(reuse_blank_tab, bool):
            raise InvalidArgumentType("reuse_blank_tab must be a bool")
        self.reuse_blank_tab = reuse_blank_tab
        # The caller's driver is never stopped here; ours (started on a connect) is.
        self._shared_driver = shared
        self._playwright: Playwright | None = None
        self._current: CdpSession | None = None
        self._marker_name = marker_cookie_name("default")
        self.launches = 0
        self.rebinds = 0

    def serve_keeper(self, keeper_id: str) -> None:
        """Name the generation marker after ``keeper_id`` (the keeper calls this).

        Raises :class:`~session_keeper.errors.UsageError` while a session for another keeper
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
        remember_secrets(self, endpoint_secrets(parts))
        return url, endpoint_display(parts)

    async def _connect(self) -> Browser:
        """One connection attempt. BrowserGoneError passes through from the provider."""
        if self._playwright is None:
            self._playwright = (
                self._shared_driver
                if self._shared_driver is not None
                else await async_playwright().start()
            )
            apply_test_id_attribute(self._playwright, self.test_id_attribute)
        url, shown = await self._url()
        self._declare_surface(url)
        started = time.monotonic()
        try:
            browser = await self._playwright.chromium.connect_over_cdp(
                url, timeout=self.connect_timeout * 1000
            )
        except PlaywrightError as exc:
            log.info("connecting to %s failed after %.1f s", shown, time.monotonic() - started)
            # redact_text scrubs the endpoint's key (remembered above) from Playwright's text.
            raise BrowserLaunchError(
                f"cannot connect to {shown}: {redact_text(first_line(exc))}"
            ) from None
        log.debug("connected to %s in %.1f s", shown, time.monotonic() - started)
        return browser

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
                session.adopt_found(page, conversation, target)
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
        """Close the live session (our pages; the browser lives on) and stop the driver
        (unless it is the caller's)."""
        self._surface.close()
        if self._current is not None:
            await self._current.close()
            self._current = None
        pw, self._playwright = self._playwright, None
        if pw is not None and pw is not self._shared_driver:
            with contextlib.suppress(PlaywrightError):
                await pw.stop()

    def __repr__(self) -> str:
        return f"<CdpBackend {self.profile_dir} launches={self.launches}>"
