"""PlaywrightSession: one running Chromium, as :class:`~session_keeper.PlaywrightBackend` starts it.

The backend (``_playwright.py``) launches Chromium on a persistent profile; the session
is what it hands back. What the two add to Playwright:

- **Liveness without round trips.** ``alive`` turns ``False`` on the first of three
  signals: the context's ``close`` event (and the browser's ``disconnected``); the
  kernel telling us the browser's main process exited (a ``pidfd`` watched by the
  event loop); a look at ``/proc/<pid>`` every 20 ms finding the process condemned
  (SIGKILL queued, or exiting); the last two are a
  :class:`~session_keeper._browser.process_watch.ProcessWatch`. Measured on Debian
  Chromium 156 on 2 cores (``benchmarks/crash_detection.py``): the kernel takes
  40-170 ms to tear a killed browser down, and the first two signals wait for that;
  the look does not.
- **A real kill.** :meth:`PlaywrightSession.kill` sends SIGKILL to the browser's
  main process (found through the profile's ``SingletonLock`` and checked against
  ``/proc/<pid>/cmdline``), so fault-injection tests exercise what a crash really
  loses: every cookie Chromium had not flushed yet.
- **An honest profile lock.** A profile held by a live browser, ours or anyone's,
  gives :class:`~session_keeper.ProfileInUse` at once instead of Chromium's habit of
  handing the launch to the other browser and leaving Playwright waiting. A lock left
  by a killed browser is recognised as stale and removed.
- **No call outlives the browser.** Every Playwright call a session makes is raced
  against the session's death: once the browser is known dead (any of the three
  signals above), a pending call raises :class:`~session_keeper.errors.BrowserGoneError` at
  once instead of waiting for an answer that, measured here, sometimes never comes
  (a ``new_page`` in flight when Chromium is SIGKILLed can wait forever).
- **Pages per conversation.** Pages opened through :meth:`PlaywrightSession.open_page`
  and every popup they (transitively) open belong to a conversation; questions about
  them are answered from local state.

Linux is the supported platform: the process watch and the kill use ``/proc`` and
``pidfd``. Elsewhere the backend still works, with liveness from Playwright's
events alone and :meth:`PlaywrightSession.kill` via ``os.kill``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from playwright._impl._errors import TargetClosedError
from playwright.async_api import BrowserContext, Frame, Page
from playwright.async_api import Error as PlaywrightError

from session_keeper._browser.backend import CloseCause
from session_keeper._browser.navigation import DEFAULT_LOAD_TIMEOUT, navigate
from session_keeper._browser.page_activity import DownloadSeen, InputSeen, PageActivity
from session_keeper._browser.playwright_cookies import from_cookie, to_cookie
from session_keeper._browser.process import pid_running
from session_keeper._browser.process_watch import ProcessWatch
from session_keeper._browser.sign_in_watch import SignInWatch
from session_keeper._browser.storage_read import (
    clear_local_storage,
    read_storage,
    write_local_storage,
)
from session_keeper._model.cookies import Cookie
from session_keeper._model.sign_in import DocumentSeen
from session_keeper._model.storage import StorageItem, normalize_origin
from session_keeper._util.redact import redact_text, redact_url, scrubbing_logger
from session_keeper.errors import (
    BrowserError,
    BrowserGoneError,
    InvalidArgument,
    NavigationError,
    SessionKeeperError,
)

__all__ = ["PlaywrightSession", "consume_abandoned", "first_line", "traceback_worth_logging"]

log = scrubbing_logger("session_keeper.playwright")

T = TypeVar("T")

#: How often a clean close looks whether the browser's processes have exited.
_EXIT_POLL_S = 0.02
#: A URL no site has: reading its cookies is a round trip that carries nothing back.
_NOBODYS_URL = "https://nobody.invalid/"


def first_line(error: BaseException) -> str:
    """The first line of an error's text (its type name when it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def traceback_worth_logging(error: BaseException) -> BaseException | None:
    """``error`` for a log record's ``exc_info``, or ``None`` when it is Playwright's error
    for a browser, page or connection that is gone (it says all there is in its text).

    Never format that one's traceback: a driver whose connection closed raises one
    instance of it for every later call, each raise adding its frames to the same
    traceback. Measured in a test process: 3,000 frames a record after a few hundred calls
    on dead sessions, 0.16 s to format each, and every frame's locals kept alive.
    """
    return None if isinstance(error, TargetClosedError) else error


def consume_abandoned(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned call's outcome, so asyncio does not report it as lost."""
    if not future.cancelled():
        future.exception()


class SessionOwner(Protocol):
    """What a session reads of the backend that launched it (its profile and close bound)."""

    @property
    def profile_dir(self) -> Path:
        """The profile the browser runs on."""
        ...

    @property
    def close_timeout(self) -> float:
        """Seconds a clean close may take before the browser is killed."""
        ...


class PlaywrightSession:
    """One running Chromium; implements :class:`~session_keeper.BrowserSession` for ``Page``.

    Created only by :meth:`PlaywrightBackend.launch`. Besides the protocol it exposes
    :attr:`pid` (the browser's main process, when known) and :attr:`context` (the
    Playwright ``BrowserContext``, for routing and other things the protocol leaves
    out).
    """

    def __init__(
        self,
        backend: SessionOwner,
        context: BrowserContext,
        pid: int | None,
        lock_fd: int,
        *,
        watch_process: bool,
        poll_interval: float | None,
        load_timeout: float | None = DEFAULT_LOAD_TIMEOUT,
        unattended: bool = False,
    ) -> None:
        self._backend = backend
        self._unattended = unattended
        self._load_timeout = load_timeout
        self._context = context
        self._pid = pid
        self._lock_fd: int | None = lock_fd
        self._cause: CloseCause | None = None
        self._closing = False
        self._loop = asyncio.get_running_loop()
        # Resolved by _die(): every pending Playwright call is raced against it.
        self._died: asyncio.Future[None] = self._loop.create_future()
        self._close_callbacks: list[Callable[[CloseCause], None]] = []
        self._page_callbacks: list[Callable[[str, Page], Awaitable[None] | None]] = []
        self._navigated_callbacks: list[Callable[[str, Page, str], None]] = []
        # Insertion-ordered: pages(conversation) is oldest first.
        self._pages: dict[Page, str] = {}
        #: Pages opened for a sign-in (and their popups): owned, but none of the
        #: conversation's pages (see SignInPages).
        self._sign_in_pages: dict[Page, None] = {}  # insertion-ordered: oldest first
        self._tasks: set[asyncio.Task[Any]] = set()
        # Document responses per conversation: what a sign-in's pages answered.
        self._sign_in = SignInWatch()
        self._activity = PageActivity(
            lambda: datetime.now(UTC), self.owner_of, self._ending, self._answers
        )
        self._process = ProcessWatch(
            pid, self._loop, self._die, watch=watch_process, poll_interval=poll_interval
        )

        context.on("close", lambda _ctx: self._die())
        if context.browser is not None:
            context.browser.on("disconnected", lambda _browser: self._die())
        # The start-up about:blank page in context.pages belongs to no conversation; it
        # stays open (closing the last window can end a headed browser) and unowned.
        if self._process.has_pidfd and self._process.exited():
            # Died between launch and now: the reader would fire, but say so at once.
            self._die()

    # -- properties beyond the protocol ----------------------------------------------
    @property
    def pid(self) -> int | None:
        """The browser's main process id, or ``None`` when it could not be determined."""
        return self._pid

    @property
    def context(self) -> BrowserContext:
        """The Playwright persistent context behind this session."""
        return self._context

    @property
    def cause(self) -> CloseCause | None:
        """Why the browser stopped, or ``None`` while it is alive."""
        return self._cause

    # -- liveness ----------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        """Whether the browser is running: state set by events, never a round trip."""
        return self._cause is None

    def on_close(self, callback: Callable[[CloseCause], None]) -> None:
        """Call ``callback(cause)`` once when the browser stops (soon, if it already has)."""
        if self._cause is None:
            self._close_callbacks.append(callback)
        else:
            self._loop.call_soon(callback, self._cause)

    def on_page(self, callback: Callable[[str, Page], Awaitable[None] | None]) -> None:
        """Call ``callback(conversation, page)`` for every owned page opened from now on."""
        self._page_callbacks.append(callback)

    def on_navigated(self, callback: Callable[[str, Page, str], None]) -> None:
        """See :class:`~session_keeper._browser.backend.NavigationObserving`."""
        self._navigated_callbacks.append(callback)

    def _on_frame_navigated(self, page: Page, frame: Frame) -> None:
        # Page.frameNavigated or navigatedWithinDocument (pushState, fragments): the URL
        # the browser committed, heard without a round trip.
        conversation = self._pages.get(page)
        if frame.parent_frame is None and self._cause is None and conversation is not None:
            for callback in list(self._navigated_callbacks):
                try:
                    callback(conversation, page, frame.url)
                except Exception:
                    log.exception("on_navigated callback %r raised", callback)

    def _die(self) -> None:
        """Record the end of the browser (first signal wins) and tell everyone once."""
        if self._cause is not None:
            return
        cause: CloseCause = "closed" if self._closing else "crashed"
        self._cause = cause
        self._process.stop()
        self._release_lock()
        self._pages.clear()
        self._sign_in_pages.clear()
        if not self._died.done():
            self._died.set_result(None)
        # Nothing started for a dead browser may keep waiting on it.
        for task in list(self._tasks):
            task.cancel()
        log.info("browser on %s stopped: %s", self._backend.profile_dir, cause)
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(cause)
            except Exception:
                # One faulty listener must not keep the others from learning the fact.
                log.exception("on_close callback %r raised", callback)

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    def _check(self) -> None:
        if self._cause is not None:
            raise BrowserGoneError(f"the browser on {self._backend.profile_dir} {self._cause}")

    def _gone(self, what: str) -> BrowserGoneError:
        return BrowserGoneError(
            f"the browser on {self._backend.profile_dir} {self._cause} during {what}"
        )

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _race(self, op: Awaitable[T], what: str) -> T:
        """Await ``op`` unless the browser dies first; then raise BrowserGoneError at once.

        Playwright does not always answer a call that was in flight when Chromium was
        killed, so waiting for its answer can mean waiting forever. The abandoned call
        is cancelled (Playwright aborts it). Cancelling the caller cancels ``op`` too.
        """
        self._check()
        task: asyncio.Future[T] = asyncio.ensure_future(op)
        try:
            await asyncio.wait((task, self._died), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                task.add_done_callback(consume_abandoned)
        if not task.done() or task.cancelled():
            raise self._gone(what)
        return task.result()

    async def _call(
        self,
        make: Callable[[], Awaitable[T]],
        what: str,
        failed: Callable[[str], SessionKeeperError] | None = None,
    ) -> T:
        """Run one Playwright call, raced against the browser's death.

        A browser that died before or under it is a BrowserGoneError; any other
        Playwright error becomes ``failed(reason)`` (a plain BrowserError by default),
        its reason redacted: no raw Playwright exception leaves a session.
        """
        self._check()
        try:
            return await self._race(make(), what)
        except PlaywrightError as exc:
            # The driver may report the broken pipe before our close signal arrives.
            if self._cause is None and self._process.exited():
                self._die()
            if self._cause is not None:
                raise self._gone(what) from None
            if isinstance(exc, TargetClosedError):
                raise BrowserGoneError(f"{what}: the page or browser was closed") from None
            reason = redact_text(first_line(exc))
            if failed is not None:
                raise failed(reason) from None
            raise BrowserError(f"{what} failed: {reason}") from None

    @property
    def unattended(self) -> bool:
        """Whether only the keeper's handles drive its pages (see
        :class:`~session_keeper._browser.capabilities.UnattendedSession`): headless, and
        no debugging port another client could attach to."""
        return self._unattended

    # -- cookies -----------------------------------------------------------------------
    async def cookies(self) -> Sequence[Cookie]:
        """Every cookie in the browser's jar (``expires`` ``None`` for session cookies)."""
        raw = await self._call(lambda: self._context.cookies(), "reading cookies")
        return [to_cookie(c) for c in raw]

    async def add_cookies(self, cookies: Sequence[Cookie]) -> None:
        """Put cookies into the jar; a domain without a leading dot makes a host-only cookie."""
        self._check()
        for c in cookies:
            if not c.domain:
                raise InvalidArgument(f"cookie {c.name!r} has no domain")
        payload = [from_cookie(c) for c in cookies]
        names = ", ".join(sorted({c.name for c in cookies}))

        def rejected(reason: str) -> InvalidArgument:
            del reason  # Playwright's message may echo the cookie; never pass a value on.
            return InvalidArgument(f"Chromium rejected the cookies named: {names}")

        await self._call(lambda: self._context.add_cookies(payload), "adding cookies", rejected)

    async def clear_cookies(self, site: str) -> None:
        """Delete every cookie sent to ``site`` (the protocol's domain match), no others."""
        for c in await self.cookies():
            if c.applies_to(site):
                await self._call(self._clear_one(c), "clearing cookies")

    def _clear_one(self, cookie: Cookie) -> Callable[[], Awaitable[None]]:
        # Playwright's string filters match exactly: only this one cookie goes.
        return lambda: self._context.clear_cookies(
            name=cookie.name, domain=cookie.domain, path=cookie.path
        )

    # -- pages ---------------------------------------------------------------------------
    async def storage(self, origin: str, conversation: str | None = None) -> Sequence[StorageItem]:
        """``origin``'s ``localStorage`` items and IndexedDB records and, with
        ``conversation``, the ``sessionStorage`` items of that conversation's pages on
        ``origin``.

        The site sees no request (see :mod:`~session_keeper._browser.storage_read`).
        Raises :class:`InvalidArgument` for an origin that is not ``http(s)://host[:port]``.
        """
        origin = normalize_origin(origin)
        self._check()
        tabs = self.pages(conversation) if conversation is not None else []
        return await self._call(
            lambda: read_storage(self._context, origin, tabs), "reading web storage"
        )

    async def set_storage(self, items: Sequence[StorageItem]) -> None:
        """Write ``localStorage`` items into their origins; the sites see no request."""
        self._check()
        by_origin: dict[str, list[StorageItem]] = {}
        for item in items:
            if item.area != "local":
                raise InvalidArgument("set_storage() writes localStorage items only")
            by_origin.setdefault(normalize_origin(item.origin), []).append(item)
        for origin, batch in sorted(by_origin.items()):
            await self._call(self._writer(origin, batch), "writing web storage")

    def _writer(self, origin: str, batch: Sequence[StorageItem]) -> Callable[[], Awaitable[None]]:
        return lambda: write_local_storage(self._context, origin, batch)

    async def clear_storage(self, origin: str) -> None:
        """Delete ``origin``'s ``localStorage`` and IndexedDB; the site sees no request."""
        origin = normalize_origin(origin)
        self._check()
        await self._call(lambda: clear_local_storage(self._context, origin), "clearing web storage")

    def _adopt(self, page: Page, conversation: str) -> None:
        self._pages[page] = conversation
        page.on("popup", lambda popup: self._on_popup(page, popup))
        page.on("close", self._forget_page)
        page.on("framenavigated", lambda frame: self._on_frame_navigated(page, frame))
        self._sign_in.attach(page, conversation)
        self._activity.attach(page)

    # -- what a restart would take besides URLs (ActivityObserving) ---------------------
    def unsubmitted_input(self, conversation: str | None = None) -> Sequence[InputSeen]:
        """The conversation's form fields with typed, unsubmitted input (names only)."""
        return self._activity.unsubmitted_input(conversation)

    def unsaved_downloads(self, conversation: str | None = None) -> Sequence[DownloadSeen]:
        """The conversation's downloads nobody saved yet (in flight or finished)."""
        return self._activity.unsaved_downloads(conversation)

    async def input_counted(self, page: object) -> None:
        """Return once ``page``'s typed input so far is counted (see PageActivity);
        raced against the browser's death like every call, and never raises."""
        if isinstance(page, Page) and page in self._pages and self._cause is None:
            with contextlib.suppress(SessionKeeperError):
                await self._call(lambda: self._activity.counted(page), "counting typed input")

    async def save_downloads(self, conversation: str, directory: Path) -> tuple[Path, ...]:
        """Save the conversation's finished downloads into ``directory`` (a free name
        each); they are no longer unsaved. Raises the session's errors once it is gone."""
        self._check()
        return await self._call(
            lambda: self._activity.save_downloads(conversation, directory), "saving downloads"
        )

    # -- sign-in observation (SignInObserving) -----------------------------------------
    async def settle(self) -> None:
        """Wait until every document response already seen is noted."""
        await self._sign_in.settle()

    def on_document(self, callback: Callable[[str, DocumentSeen], None]) -> None:
        """See :class:`~session_keeper._browser.sign_in_watch.DocumentObserving`."""
        self._sign_in.on_document(callback)

    def set_cookies_wanted(self, wanted: Callable[[str], bool]) -> None:
        """See :class:`~session_keeper._browser.sign_in_watch.DocumentObserving`."""
        self._sign_in.set_cookies_wanted(wanted)

    def documents(self, conversation: str) -> Sequence[DocumentSeen]:
        """The conversation's recent document responses, oldest first (no round trip)."""
        return self._sign_in.documents(conversation)

    def document_seq(self) -> int:
        """The ``seq`` the next document response gets (no round trip)."""
        return self._sign_in.document_seq()

    async def shows_password_form(self, conversation: str, site: str) -> bool:
        """Whether the conversation's page that last answered from ``site`` shows one."""
        return await self._sign_in.shows_password_form(conversation, site)

    async def _answers(self) -> None:
        """One round trip to the browser (a jar read for a host nobody uses)."""
        await self._call(lambda: self._context.cookies(_NOBODYS_URL), "asking the browser")

    def _ending(self) -> bool:
        # A crash may close the pages before the death is noticed: ask the process too.
        return (
            self._closing
            or self._cause is not None
            or (self._pid is not None and not pid_running(self._pid))
        )

    def _forget_page(self, page: Page) -> None:
        self._pages.pop(page, None)
        self._sign_in_pages.pop(page, None)

    def _on_popup(self, opener: Page, popup: Page) -> None:
        conversation = self._pages.get(opener)
        if conversation is None or self._cause is not None or popup in self._pages:
            return
        if opener in self._sign_in_pages:
            self._sign_in_pages[popup] = None  # an identity provider's sign-in popup
        self._adopt(popup, conversation)
        task = self._loop.create_task(self._announce(conversation, popup))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _announce(self, conversation: str, page: Page) -> None:
        for callback in list(self._page_callbacks):
            try:
                result = callback(conversation, page)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("on_page callback %r raised", callback)

    async def open_page(self, conversation: str) -> Page:
        """Open a blank page owned by ``conversation``; on_page callbacks finish first.

        Raced as a whole (the page and its callbacks) against the browser's death. A
        page whose opening was abandoned (the caller was cancelled) is closed, not
        left open for nobody.
        """
        return await self._call(lambda: self._open(conversation), "opening a page")

    def prepare(self) -> None:
        """Start installing what every owned page needs (the input watch) before the first
        :meth:`open_page` asks for it: a launch overlaps it with the caller's own work."""
        if self._cause is None:
            self._watch_installed()

    def _watch_installed(self) -> asyncio.Task[None]:
        """The input watch's install, which every page opener waits for (see PageActivity)."""
        task = self._activity.installing(self._context)
        self._track(task)
        return task

    async def open_sign_in_page(self, conversation: str) -> Page:
        """Open a blank sign-in page of ``conversation`` (see :class:`SignInPages`)."""
        return await self._call(
            lambda: self._open(conversation, sign_in=True), "opening a sign-in page"
        )

    def is_sign_in_page(self, page: object) -> bool:
        """Whether ``page`` is a sign-in page (local state)."""
        return page in self._sign_in_pages

    def sign_in_pages(self, conversation: str) -> Sequence[Page]:
        """The open sign-in pages of ``conversation`` (their popups too), oldest first
        (local state)."""
        return [
            p
            for p in self._sign_in_pages
            if self._pages.get(p) == conversation and not p.is_closed()
        ]

    async def _open(self, conversation: str, *, sign_in: bool = False) -> Page:
        # Shielded: one opener given up on does not cancel the others' install.
        await asyncio.shield(self._watch_installed())
        page = await self._new_page()
        if sign_in:
            # Before any callback sees it: it is never one of the conversation's pages.
            self._sign_in_pages[page] = None
        self._adopt(page, conversation)
        try:
            await self._announce(conversation, page)
        except BaseException:
            self._pages.pop(page, None)
            self._sign_in_pages.pop(page, None)
            if self._cause is None and not page.is_closed():
                task = self._loop.create_task(self._race(page.close(), "closing a page"))
                task.add_done_callback(consume_abandoned)
                self._track(task)
            raise
        return page

    async def _new_page(self) -> Page:
        return await self._context.new_page()  # the start-up page stays nobody's

    def owner_of(self, page: Page) -> str | None:
        """The conversation ``page`` belongs to (a popup is its opener's from its first
        event on); ``None`` for a page nobody owns (local state only)."""
        return self._pages.get(page)

    def pages(self, conversation: str) -> Sequence[Page]:
        """Open pages of ``conversation``, oldest first (local state only)."""
        return [
            p
            for p, c in self._pages.items()
            if c == conversation and not p.is_closed() and p not in self._sign_in_pages
        ]

    def page_url(self, page: Page) -> str:
        """The URL Playwright last heard for ``page`` (local state only)."""
        return page.url

    def page_is_open(self, page: Page) -> bool:
        """Whether ``page`` is an open page of this live browser (local state only)."""
        return self._cause is None and page in self._pages and not page.is_closed()

    async def goto(self, page: Page, url: str) -> str:
        """Navigate and return the URL the page ended on (after redirects).

        Raises :class:`NavigationError` for a navigation that failed while the browser
        lives (DNS, refused connection, a timeout, another navigation replacing this
        one), :class:`BrowserGoneError` for a closed page or a dead browser.
        """
        self._check()
        if not self.page_is_open(page):
            raise BrowserGoneError("the page is closed")
        shown = redact_url(url)

        def failed(reason: str) -> NavigationError:
            return NavigationError(f"navigation to {shown} failed: {reason}")

        return await navigate(
            self._call,
            page,
            url,
            load_timeout=self._load_timeout,
            failed=failed,
            browser_alive=lambda: self.alive,
        )

    async def close_page(self, page: Page) -> None:
        """Close one page (no-op for a page that is already closed)."""
        self._check()
        self._pages.pop(page, None)
        self._sign_in_pages.pop(page, None)
        self._activity.forget(page)
        if not page.is_closed():
            await self._call(lambda: self._close(page), "closing a page")

    async def _close(self, page: Page) -> None:
        """How this session closes a page of its own (:meth:`close_page`)."""
        await page.close()

    # -- lifetime ------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the browser cleanly (Chromium flushes its cookie store); idempotent.

        Returns once every process of the browser has exited, not at Playwright's close
        event: that comes while Chromium is still shutting down and has yet to write
        pending cookie changes to the profile, so a caller that then relaunched on the
        profile or stopped the driver (which SIGKILLs the browser's process group) lost
        them (measured: 2-4 of 5 cookies set just before the close). If Chromium does not
        finish within the backend's ``close_timeout``, its process group is killed; the
        cause is still ``"closed"`` (we asked for it).
        """
        if self._cause is not None:
            return
        self._closing = True
        deadline = self._loop.time() + self._backend.close_timeout
        await self._activity.install_settled(self._backend.close_timeout)
        try:
            # A browser that dies while closing has closed: stop waiting for its answer.
            closing = self._race(self._context.close(), "closing")
            await asyncio.wait_for(closing, max(0.0, deadline - self._loop.time()))
        except BrowserGoneError:
            pass
        except TimeoutError:
            if self._pid is None:
                self._signal_kill()  # raises: a process we cannot find, we cannot kill
            # Otherwise _wait_exited kills it: the deadline has passed.
        except PlaywrightError:
            pass  # It died under us; the close is what we wanted anyway.
        self._die()
        await self._wait_exited(deadline)

    async def _wait_exited(self, deadline: float) -> None:
        """Wait until the browser's processes are gone; past ``deadline``, kill them.

        Polled: their exit is no event we can wait on (the helpers are not our children).
        """
        killed = False
        while self._process.group_running():
            now = self._loop.time()
            if now >= deadline:
                if killed:
                    return  # SIGKILL cannot be ignored: the look, not the kill, is stuck
                log.warning(
                    "browser on %s did not close in %.0f s; killing it",
                    self._backend.profile_dir,
                    self._backend.close_timeout,
                )
                self._process.kill_group()
                killed, deadline = True, now + 10
            await asyncio.sleep(_EXIT_POLL_S)

    def _signal_kill(self) -> None:
        if not self._process.signal_kill():
            raise BrowserError(
                f"cannot kill the browser on {self._backend.profile_dir}: its process is unknown"
            )

    async def kill(self) -> None:
        """SIGKILL the browser's main process and wait until it is gone; idempotent.

        Cookies Chromium had not flushed yet are lost, as in a real crash. Returns
        with ``alive`` ``False`` and every ``on_close`` callback called (``"crashed"``).
        """
        if self._cause is not None:
            return
        self._signal_kill()
        try:
            await asyncio.wait_for(asyncio.shield(self._died), 10)
        except TimeoutError:
            # SIGKILL cannot be ignored; if no signal came, the watch is broken, not
            # the kill. Record the fact rather than hang.
            self._die()

    def __repr__(self) -> str:
        state = "alive" if self._cause is None else self._cause
        return f"<PlaywrightSession pid={self._pid} {state} pages={len(self._pages)}>"
