"""FakeBackend: an in-memory browser that behaves like Chromium's persistent profile.

What it copies from the real thing (measured on Debian Chromium with a persistent
profile, and checked by the shared contract suite):

- a clean :meth:`FakeSession.close` keeps persistent cookies in the profile and
  drops session cookies;
- :meth:`FakeSession.kill` (a SIGKILL) loses every cookie set since the last flush,
  and a fake profile, like Chromium's lazily flushed cookie store, flushes only at
  a clean close;
- one jar per browser shared by all pages; popups belong to the opener's
  conversation; ``alive`` turns ``False`` from the browser's own events;
- the jar's rules (checked against Chromium 156 by the contract suite): a cookie's
  domain is lower-cased; a cookie added already expired is not stored and deletes
  its namesake; an expiry further out than 400 days is capped at 400 days from now;
  expired cookies are not returned; a navigated URL is reported normalized (lower-case
  scheme and host, no default port, ``/`` for an empty path);
- a call pending when the browser dies (an ``on_page`` callback still running, a
  navigation to a site :meth:`FakeBackend.stall` holds) raises
  :class:`~session_keeper.errors.BrowserGoneError` at once, as the real session's calls do.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from itertools import count
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import attrs

from session_keeper._browser.backend import CloseCause
from session_keeper._model.cookies import Cookie, normalize_site
from session_keeper._util.clock import Clock
from session_keeper.errors import BrowserGoneError, InvalidArgument, ProfileInUse, UsageError

#: Chromium caps a cookie's lifetime at 400 days from when it is set (RFC 6265bis).
MAX_COOKIE_AGE = 400 * 86400.0

_page_ids = count(1)

T = TypeVar("T")

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _normalize_url(url: str) -> str:
    """The URL as Chromium reports it after navigating: lower-case scheme and host,
    no default port, ``/`` for an empty path (redirects are not simulated)."""
    parts = urlsplit(url)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return url
    host = parts.hostname
    if parts.port is not None and parts.port != _DEFAULT_PORTS[parts.scheme]:
        host = f"{host}:{parts.port}"
    if parts.username is not None:
        auth = parts.username + (f":{parts.password}" if parts.password is not None else "")
        host = f"{auth}@{host}"
    return urlunsplit((parts.scheme, host, parts.path or "/", parts.query, parts.fragment))


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned call's outcome, so asyncio does not report it as lost."""
    if not future.cancelled():
        future.exception()


class FakePage:
    """A page in a :class:`FakeBackend` browser: a URL and an owner, nothing else."""

    def __init__(self, session: FakeSession, conversation: str, opener: FakePage | None) -> None:
        self._session = session
        self.id = next(_page_ids)
        self.conversation = conversation
        self.opener = opener
        self.url = "about:blank"
        self.closed = False

    async def goto(self, url: str) -> str:
        """Navigate (instantly) and return the new URL."""
        return await self._session.goto(self, url)

    async def open_popup(self, url: str) -> FakePage:
        """Open a popup from this page, as ``window.open`` would."""
        return await self._session.open_popup(self, url)

    async def close(self) -> None:
        """Close this page, as ``Page.close()`` does (trusted code closing a raw page)."""
        await self._session.close_page(self)

    def moved_to(self, url: str) -> str:
        """The page moved itself to ``url`` (a link, a form, a script, a redirect, history
        back or forward): the browser commits it, as it would a navigation nobody asked the
        session for. Returns the URL as committed; a closed page stays where it was."""
        return self._session.commit(self, url)

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.url
        return f"<FakePage #{self.id} {self.conversation} {state}>"


class FakeSession:
    """One fake browser; implements :class:`~session_keeper.BrowserSession`."""

    def __init__(self, backend: FakeBackend, cookies: Sequence[Cookie]) -> None:
        self._backend = backend
        self._cookies: dict[tuple[str, str, str], Cookie] = {}
        for c in cookies:
            self._cookies[(c.domain, c.path, c.name)] = c
        # Ordered sets, and one per conversation: a fake browser with 10,000 tabs answers
        # "is it open" and "whose pages" in constant time, as Playwright's own objects do.
        self._pages: dict[FakePage, None] = {}
        self._by_conversation: dict[str, dict[FakePage, None]] = {}
        # Insertion-ordered: sign_in_pages(conversation) is oldest first.
        self._sign_in_pages: dict[FakePage, None] = {}
        self._cause: CloseCause | None = None
        self._close_callbacks: list[Callable[[CloseCause], None]] = []
        self._page_callbacks: list[Callable[[str, FakePage], Awaitable[None] | None]] = []
        self._navigated_callbacks: list[Callable[[str, FakePage, str], None]] = []
        # Resolved when the browser stops: every pending call is raced against it.
        self._died: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- liveness ---------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._cause is None

    def on_close(self, callback: Callable[[CloseCause], None]) -> None:
        if self._cause is None:
            self._close_callbacks.append(callback)
        else:
            asyncio.get_running_loop().call_soon(callback, self._cause)

    def on_page(self, callback: Callable[[str, FakePage], Awaitable[None] | None]) -> None:
        self._page_callbacks.append(callback)

    def on_navigated(self, callback: Callable[[str, FakePage, str], None]) -> None:
        """Call ``callback(conversation, page, url)`` for each navigation a page commits
        (:meth:`goto` and :meth:`FakePage.moved_to` alike), as Chromium's pages report."""
        self._navigated_callbacks.append(callback)

    def commit(self, page: FakePage, url: str) -> str:
        """``page``'s main frame commits ``url``: its URL changes and watchers hear it."""
        if not self.page_is_open(page):
            return page.url
        page.url = _normalize_url(url)
        for callback in list(self._navigated_callbacks):
            callback(page.conversation, page, page.url)
        return page.url

    def _die(self, cause: CloseCause) -> None:
        if self._cause is not None:
            return
        self._cause = cause
        for page in self._pages:
            page.closed = True
        self._pages.clear()
        self._by_conversation.clear()
        self._died.set_result(None)
        callbacks, self._close_callbacks = self._close_callbacks, []
        for cb in callbacks:
            cb(cause)

    def _check(self) -> None:
        if self._cause is not None:
            raise BrowserGoneError(f"the fake browser was {self._cause}")

    async def _race(self, op: Awaitable[T], what: str) -> T:
        """Await ``op`` unless the browser stops first: then BrowserGoneError at once."""
        self._check()
        task: asyncio.Future[T] = asyncio.ensure_future(op)
        try:
            await asyncio.wait((task, self._died), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                task.add_done_callback(_consume)
        if not task.done() or task.cancelled():
            raise BrowserGoneError(f"the fake browser was {self._cause} during {what}")
        return task.result()

    # -- cookies ------------------------------------------------------------------
    async def cookies(self) -> Sequence[Cookie]:
        self._check()
        now = self._backend._now()
        for key, c in list(self._cookies.items()):
            if c.expires is not None and c.expires <= now:
                del self._cookies[key]
        return list(self._cookies.values())

    async def add_cookies(self, cookies: Sequence[Cookie]) -> None:
        self._check()
        for c in cookies:
            if not c.domain:
                raise InvalidArgument(f"cookie {c.name!r} has no domain")
        now = self._backend._now()
        for c in cookies:
            # As Chromium does: canonical lower-case domain, SameSite Lax unless told, a
            # 400-day cap, and an already-expired cookie deletes rather than stores.
            c = attrs.evolve(c, domain=c.domain.lower())
            if c.same_site is None:
                c = attrs.evolve(c, same_site="Lax")  # Chromium's default, as it reports it
            key = (c.domain, c.path, c.name)
            if c.expires is not None and c.expires <= now:
                self._cookies.pop(key, None)
                continue
            if c.expires is not None and c.expires > now + MAX_COOKIE_AGE:
                c = attrs.evolve(c, expires=now + MAX_COOKIE_AGE)
            self._cookies[key] = c

    async def clear_cookies(self, site: str) -> None:
        self._check()
        for key, c in list(self._cookies.items()):
            if c.applies_to(site):
                del self._cookies[key]

    # -- pages --------------------------------------------------------------------
    async def _announce(self, page: FakePage) -> None:
        for cb in list(self._page_callbacks):
            result = cb(page.conversation, page)
            if inspect.isawaitable(result):
                await result

    async def open_page(self, conversation: str) -> FakePage:
        self._check()
        page = FakePage(self, conversation, None)
        self._add(page)
        try:
            await self._race(self._announce(page), "opening a page")
        except BaseException:
            # Abandoned (the caller was cancelled) or the browser died: nobody owns it.
            self._forget(page)
            raise
        return page

    async def open_sign_in_page(self, conversation: str) -> FakePage:
        """A sign-in page of ``conversation``: owned, never one of :meth:`pages`."""
        self._check()
        page = FakePage(self, conversation, None)
        self._sign_in_pages[page] = None
        self._add(page)
        try:
            await self._race(self._announce(page), "opening a sign-in page")
        except BaseException:
            self._forget(page)
            raise
        return page

    def is_sign_in_page(self, page: object) -> bool:
        """Whether ``page`` is a sign-in page (or a popup of one)."""
        return page in self._sign_in_pages

    def sign_in_pages(self, conversation: str) -> Sequence[FakePage]:
        """The open sign-in pages of ``conversation`` (their popups too), oldest first."""
        return [p for p in self._sign_in_pages if p.conversation == conversation and not p.closed]

    def _add(self, page: FakePage) -> None:
        self._pages[page] = None
        if page in self._sign_in_pages:
            return  # owned for enforcement, but none of the conversation's pages
        self._by_conversation.setdefault(page.conversation, {})[page] = None

    def _forget(self, page: FakePage) -> None:
        self._pages.pop(page, None)
        self._sign_in_pages.pop(page, None)
        mine = self._by_conversation.get(page.conversation)
        if mine is not None:
            mine.pop(page, None)
            if not mine:
                del self._by_conversation[page.conversation]
        page.closed = True

    async def open_popup(self, opener: FakePage, url: str) -> FakePage:
        """Open a popup owned by the opener's conversation."""
        self._check()
        if opener.closed:
            raise BrowserGoneError("the opener page is closed")
        page = FakePage(self, opener.conversation, opener)
        if opener in self._sign_in_pages:
            self._sign_in_pages[page] = None
        self._add(page)
        await self._race(self._announce(page), "opening a popup")
        await self.goto(page, url)
        return page

    def pages(self, conversation: str) -> Sequence[FakePage]:
        return list(self._by_conversation.get(conversation, ()))

    def page_url(self, page: FakePage) -> str:
        return page.url

    def page_is_open(self, page: FakePage) -> bool:
        return not page.closed and page in self._pages

    async def goto(self, page: FakePage, url: str) -> str:
        self._check()
        if not self.page_is_open(page):
            raise BrowserGoneError("the page is closed")
        hostname = urlsplit(url).hostname
        site = normalize_site(hostname) if hostname else ""  # about:, data: have no site
        stall = self._backend._stalls.get(site) if site else None
        if stall is not None:
            # A site that does not answer: the navigation waits, as Chromium's would.
            self._backend._waiting[site] = self._backend._waiting.get(site, 0) + 1
            try:
                await self._race(stall.wait(), "navigation")
            finally:
                self._backend._waiting[site] -= 1
            if not self.page_is_open(page):
                raise BrowserGoneError("the page was closed during the navigation")
        return self.commit(page, url)

    async def close_page(self, page: FakePage) -> None:
        self._check()
        self._forget(page)

    # -- lifetime -----------------------------------------------------------------
    async def close(self) -> None:
        if self._cause is not None:
            return
        # A clean close flushes persistent cookies to the profile; session cookies die.
        self._backend._profile = [c for c in self._cookies.values() if not c.is_session]
        self._die("closed")

    async def kill(self) -> None:
        # SIGKILL: nothing since the last flush reaches the profile.
        self._die("crashed")

    def __repr__(self) -> str:
        state = "alive" if self.alive else self._cause
        return f"<FakeSession {state} pages={len(self._pages)}>"


class FakeBackend:
    """An in-memory :class:`~session_keeper.BrowserBackend` with a persistent fake profile.

    Ships for users' tests as much as ours. Besides the protocol it offers what a
    test or demo needs to push the world around: :meth:`crash`, :meth:`sign_in`.

    ``clock`` is where cookie expiry reads the time (its ``now()``); by default the
    system's wall clock, as in a real browser. Pass the keeper's ``FakeClock`` to
    expire cookies by advancing it.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock
        self._profile: list[Cookie] = []
        self._current: FakeSession | None = None
        self._stalls: dict[str, asyncio.Event] = {}
        self._waiting: dict[str, int] = {}
        self.launches = 0

    def _now(self) -> float:
        """Seconds since the epoch, for cookie expiry."""
        return self._clock.now().timestamp() if self._clock is not None else time.time()

    @property
    def current(self) -> FakeSession | None:
        """The live session, if any."""
        if self._current is not None and self._current.alive:
            return self._current
        return None

    @property
    def profile(self) -> tuple[Cookie, ...]:
        """The persistent cookies the profile on disk holds (what the next launch starts with)."""
        return tuple(self._profile)

    def edit_profile(self, edit: Callable[[Cookie], Cookie]) -> None:
        """Change the profile's cookies between two browsers (another account signs in, ...).

        Raises :class:`~session_keeper.errors.UsageError` while a browser is alive: it owns the
        profile then.
        """
        if self.current is not None:
            raise UsageError("the profile belongs to the live fake browser; close it first")
        self._profile = [edit(c) for c in self._profile]

    async def launch(self) -> FakeSession:
        if self.current is not None:
            raise ProfileInUse("the fake profile is already used by a live fake browser")
        self.launches += 1
        self._current = FakeSession(self, self._profile)
        return self._current

    async def aclose(self) -> None:
        """Close the live browser cleanly, if any."""
        if self._current is not None:
            await self._current.close()

    async def crash(self) -> None:
        """Kill the live browser as a crash would (no-op when none is alive)."""
        if self._current is not None:
            await self._current.kill()

    def stall(self, site: str) -> None:
        """Make navigations to ``site`` wait, like a server that does not answer.

        They finish after :meth:`unstall`, or raise
        :class:`~session_keeper.errors.BrowserGoneError` when the browser dies first.
        """
        self._stalls.setdefault(normalize_site(site), asyncio.Event())

    def waiting(self, site: str) -> int:
        """How many navigations to ``site`` are waiting on a :meth:`stall` now."""
        return self._waiting.get(normalize_site(site), 0)

    def unstall(self, site: str) -> None:
        """Let navigations to ``site`` (waiting ones included) finish again."""
        stall = self._stalls.pop(normalize_site(site), None)
        if stall is not None:
            stall.set()

    async def sign_in(
        self,
        site: str,
        *,
        name: str = "session",
        persistent: bool = False,
        value: str | None = None,
        domain: str | None = None,
    ) -> Cookie:
        """Play a human finishing a sign-in: put a fresh login cookie for ``site`` in the jar.

        Host-only (sent to ``site`` alone) unless ``domain`` (``".site"``) names a
        domain cookie, which its subdomains receive too."""
        session = self.current
        if session is None:
            raise BrowserGoneError("no live fake browser to sign in with")
        cookie = Cookie(
            name=name,
            value=value if value is not None else secrets.token_urlsafe(16),
            domain=site if domain is None else domain,
            expires=4102444800.0 if persistent else None,
            http_only=True,
        )
        await session.add_cookies([cookie])
        return cookie

    def __repr__(self) -> str:
        return f"<FakeBackend launches={self.launches}>"
