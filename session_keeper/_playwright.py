"""PlaywrightBackend: the real :class:`~session_keeper.BrowserBackend`, on a persistent profile.

One backend owns one profile directory and starts at most one Chromium on it at a
time, through Playwright's ``launch_persistent_context``. What it adds to Playwright:

- **Liveness without round trips.** ``alive`` turns ``False`` on the first of three
  signals: the context's ``close`` event (and the browser's ``disconnected``); the
  kernel telling us the browser's main process exited (a ``pidfd`` watched by the
  event loop); a look at ``/proc/<pid>`` every 20 ms finding the process condemned
  (SIGKILL queued, or exiting). Measured on Debian Chromium 156 on 2 cores
  (``benchmarks/crash_detection.py``): the kernel takes 40-170 ms to tear a killed
  browser down, and the first two signals wait for that; the look does not.
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
  signals above), a pending call raises :class:`~session_keeper.BrowserGoneError` at
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
import fcntl
import inspect
import os
import select
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from playwright._impl._errors import TargetClosedError
from playwright.async_api import BrowserContext, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from session_keeper._backend import CloseCause, Cookie
from session_keeper._chromium import CHROMIUM_ARGS, find_chromium
from session_keeper._errors import (
    BrowserError,
    BrowserGoneError,
    BrowserLaunchError,
    ChromiumNotFound,
    InvalidArgument,
    NavigationError,
    ProfileInUse,
    SessionKeeperError,
)
from session_keeper._redact import redact_text, redact_url, scrubbing_logger

__all__ = ["PlaywrightBackend", "PlaywrightSession"]

log = scrubbing_logger("session_keeper.playwright")

T = TypeVar("T")

#: The file in the profile directory we hold an exclusive ``flock`` on while one of
#: our sessions lives. Chromium's own ``SingletonLock`` is only created some way into
#: its start-up; this closes the window in which two of our launches could race.
KEEPER_LOCK_NAME = ".session-keeper.lock"

#: Files Chromium uses to keep one browser per profile (Linux, macOS).
SINGLETON_FILES = ("SingletonLock", "SingletonSocket", "SingletonCookie")

# Names a browser's main process goes by (``comm`` or argv[0]); used to tell a live
# browser holding a lock from an unrelated process that reused a dead browser's pid.
_BROWSER_NAMES = ("chrom", "headless_shell", "msedge", "brave")


#: Linux task flag: the process is exiting (include/linux/sched.h).
_PF_EXITING = 0x00000004

# -- process helpers (Linux /proc; degrade gracefully elsewhere) -----------------------


def _proc_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _sigkill_pending(pid: int) -> bool:
    """Whether a SIGKILL is queued for ``pid`` (thread or group), per /proc/<pid>/status."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd"):
            with contextlib.suppress(ValueError):
                if int(value.strip(), 16) & (1 << (signal.SIGKILL - 1)):
                    return True
    return False


def _pid_running(pid: int) -> bool:
    """Whether ``pid`` is a process that runs and will run again.

    ``False`` for a missing or zombie process, and for one already condemned: a
    SIGKILL queued for it (the kernel queues it in the ``kill()`` call itself) or
    the kernel tearing it down (``PF_EXITING``). Such a process never executes
    another instruction of its own, but tearing down a big browser takes the kernel
    40-170 ms here before the process exit is visible any other way. Assumes the
    main thread lives as long as the process, as a browser's UI thread does.
    """
    stat = Path(f"/proc/{pid}/stat")
    try:
        text = stat.read_text()
    except FileNotFoundError:
        return False
    except OSError:
        text = ""
    if text:
        # Format: "pid (comm) state ppid pgrp session tty tpgid flags ..."; comm may
        # contain spaces and parentheses, so split after the last ")".
        fields = text.rpartition(")")[2].split()
        if fields[:1] in (["Z"], ["X"]):
            return False
        # A SIGKILLed browser tears down its memory before it becomes a zombie; its
        # pipe can close (and Playwright report the close) first. PF_EXITING is set
        # from the start of that teardown: the process will never run again.
        if len(fields) > 6 and fields[6].isdigit() and int(fields[6]) & _PF_EXITING:
            return False
        return not _sigkill_pending(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _looks_like_browser(pid: int) -> bool:
    """Whether the live process ``pid`` is plausibly a Chromium-family browser."""
    cmdline = _proc_cmdline(pid)
    if cmdline is None:
        # No /proc (not Linux) or not readable: we cannot tell, so be safe.
        return True
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip().lower()
    except OSError:
        comm = ""
    argv0 = os.path.basename(cmdline[0]).lower() if cmdline else ""
    if any(n in comm or n in argv0 for n in _BROWSER_NAMES):
        return True
    return any(a.startswith("--user-data-dir") for a in cmdline)


def _is_main_browser_of(pid: int, profile: Path) -> bool:
    """Whether ``pid`` is the browser (not a renderer/zygote) started on ``profile``."""
    cmdline = _proc_cmdline(pid)
    if cmdline is None or not _pid_running(pid):
        return False
    if any(a.startswith("--type=") for a in cmdline):
        return False
    return f"--user-data-dir={profile}" in cmdline


def _read_singleton_lock(profile: Path) -> tuple[str, int] | None:
    """``(hostname, pid)`` from the profile's ``SingletonLock`` symlink, if any."""
    try:
        target = os.readlink(profile / "SingletonLock")
    except FileNotFoundError:
        return None
    except OSError:
        # Exists but is not a symlink: not a format we know; let the caller decide.
        return ("", -1)
    host, _, pid_text = target.rpartition("-")
    if not pid_text.isdigit():
        return ("", -1)
    return (host, int(pid_text))


def _find_browser_pid(profile: Path) -> int | None:
    """The pid of the browser main process running on ``profile``, verified via /proc."""
    lock = _read_singleton_lock(profile)
    if lock is not None and lock[1] > 0 and _is_main_browser_of(lock[1], profile):
        return lock[1]
    # The lock can be missing or odd (another Chromium build); scan /proc instead.
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    for entry in proc.iterdir():
        if entry.name.isdigit() and _is_main_browser_of(int(entry.name), profile):
            return int(entry.name)
    return None


def check_profile_free(profile: Path) -> None:
    """Raise :class:`ProfileInUse` if a live browser holds ``profile``; clear a stale lock.

    Chromium marks a profile in use with a ``SingletonLock`` symlink to
    ``<hostname>-<pid>``. The lock is *live* when it names this host and a running
    browser process; a lock naming another host cannot be checked and counts as live
    (the message says how to remove it). A lock whose process is gone (a SIGKILLed
    browser leaves one) or is now some unrelated process is stale: it and its
    companions (``SingletonSocket``, ``SingletonCookie``) are deleted.
    """
    lock = _read_singleton_lock(profile)
    if lock is None:
        return
    host, pid = lock
    lock_path = profile / "SingletonLock"
    if pid <= 0:
        raise ProfileInUse(
            f"profile directory {profile} has a SingletonLock in an unknown format; "
            f"if no browser uses this profile, delete {lock_path}"
        )
    if host != socket.gethostname():
        raise ProfileInUse(
            f"profile directory {profile} is locked by a browser on host {host!r} (pid {pid}); "
            f"if no browser uses this profile, delete {lock_path}"
        )
    if _pid_running(pid) and _looks_like_browser(pid):
        raise ProfileInUse(f"profile directory {profile} is in use by a live browser (pid {pid})")
    for name in SINGLETON_FILES:
        with contextlib.suppress(FileNotFoundError):
            (profile / name).unlink()
    log.info("removed a stale browser lock from %s (pid %d is gone)", profile, pid)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _launch_failure(error: BaseException) -> str:
    """Playwright's launch error cut down to what helps: the reason, the browser's own
    last stderr lines and its exit status (not the 60-flag command line, twice)."""
    lines = str(error).strip().splitlines()
    head = lines[0] if lines else type(error).__name__
    stderr = [
        ln.split("[err]", 1)[1].strip() for ln in lines if "][err]" in ln and "  - " not in ln
    ]
    exits = [ln.split("<", 1)[1].rstrip(">") for ln in lines if "<process did exit" in ln]
    parts = [head]
    if stderr:
        parts.append("browser said: " + " | ".join(x[:200] for x in stderr[-5:]))
    if exits:
        parts.append(exits[-1])
    return "; ".join(parts)


def _to_cookie(raw: Any) -> Cookie:
    expires = float(raw.get("expires", -1))
    return Cookie(
        name=raw["name"],
        value=raw["value"],
        domain=raw["domain"],
        path=raw.get("path", "/"),
        # Playwright reports a session cookie as expires == -1.
        expires=None if expires < 0 else expires,
        http_only=bool(raw.get("httpOnly", False)),
        secure=bool(raw.get("secure", False)),
        partition_key=raw.get("partitionKey") or None,
    )


def _from_cookie(cookie: Cookie) -> Any:
    raw: dict[str, Any] = {
        "name": cookie.name,
        "value": cookie.value,
        "domain": cookie.domain,
        "path": cookie.path,
        "expires": -1 if cookie.expires is None else cookie.expires,
        "httpOnly": cookie.http_only,
        "secure": cookie.secure,
    }
    if cookie.partition_key is not None:
        raw["partitionKey"] = cookie.partition_key
    return raw


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned call's outcome, so asyncio does not report it as lost."""
    if not future.cancelled():
        future.exception()


class PlaywrightSession:
    """One running Chromium; implements :class:`~session_keeper.BrowserSession` for ``Page``.

    Created only by :meth:`PlaywrightBackend.launch`. Besides the protocol it exposes
    :attr:`pid` (the browser's main process, when known) and :attr:`context` (the
    Playwright ``BrowserContext``, for routing and other things the protocol leaves
    out).
    """

    def __init__(
        self,
        backend: PlaywrightBackend,
        context: BrowserContext,
        pid: int | None,
        lock_fd: int,
        *,
        watch_process: bool,
        poll_interval: float | None,
    ) -> None:
        self._backend = backend
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
        # Insertion-ordered: pages(conversation) is oldest first.
        self._pages: dict[Page, str] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

        self._pidfd: int | None = None
        if pid is not None and watch_process and hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(pid)
                self._loop.add_reader(self._pidfd, self._on_process_exit)
            except (OSError, NotImplementedError):
                # Old kernel, or a loop without add_reader: fall back to events alone.
                self._close_pidfd()

        # The pidfd only fires once the kernel finished tearing the process down; a
        # cheap look at /proc (two small reads) sees a SIGKILL or an exit start at once.
        self._poll_interval = poll_interval if watch_process else None
        self._poll_handle: asyncio.TimerHandle | None = None
        if pid is not None and self._poll_interval and Path(f"/proc/{pid}").is_dir():
            self._poll_handle = self._loop.call_later(self._poll_interval, self._poll)

        context.on("close", lambda _ctx: self._die())
        if context.browser is not None:
            context.browser.on("disconnected", lambda _browser: self._die())
        # The start-up about:blank page in context.pages belongs to no conversation; it
        # stays open (closing the last window can end a headed browser) and unowned.
        if self._pidfd is not None and self._process_exited():
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

    def _process_exited(self) -> bool:
        if self._pidfd is None:
            return self._pid is not None and not _pid_running(self._pid)
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(readable)

    def _on_process_exit(self) -> None:
        self._die()

    def _poll(self) -> None:
        self._poll_handle = None
        if self._cause is not None or self._pid is None or self._poll_interval is None:
            return
        if not _pid_running(self._pid):
            self._die()
            return
        self._poll_handle = self._loop.call_later(self._poll_interval, self._poll)

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(fd)
            os.close(fd)

    def _die(self) -> None:
        """Record the end of the browser (first signal wins) and tell everyone once."""
        if self._cause is not None:
            return
        cause: CloseCause = "closed" if self._closing else "crashed"
        self._cause = cause
        if self._poll_handle is not None:
            self._poll_handle.cancel()
            self._poll_handle = None
        self._close_pidfd()
        self._release_lock()
        self._pages.clear()
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
                task.add_done_callback(_consume)
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
            if self._cause is None and self._process_exited():
                self._die()
            if self._cause is not None:
                raise self._gone(what) from None
            if isinstance(exc, TargetClosedError):
                raise BrowserGoneError(f"{what}: the page or browser was closed") from None
            reason = redact_text(_first_line(exc))
            if failed is not None:
                raise failed(reason) from None
            raise BrowserError(f"{what} failed: {reason}") from None

    # -- cookies -----------------------------------------------------------------------
    async def cookies(self) -> Sequence[Cookie]:
        """Every cookie in the browser's jar (``expires`` ``None`` for session cookies)."""
        raw = await self._call(lambda: self._context.cookies(), "reading cookies")
        return [_to_cookie(c) for c in raw]

    async def add_cookies(self, cookies: Sequence[Cookie]) -> None:
        """Put cookies into the jar; a domain without a leading dot makes a host-only cookie."""
        self._check()
        for c in cookies:
            if not c.domain:
                raise InvalidArgument(f"cookie {c.name!r} has no domain")
        payload = [_from_cookie(c) for c in cookies]
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
    def _adopt(self, page: Page, conversation: str) -> None:
        self._pages[page] = conversation
        page.on("popup", lambda popup: self._on_popup(page, popup))
        page.on("close", self._forget_page)

    def _forget_page(self, page: Page) -> None:
        self._pages.pop(page, None)

    def _on_popup(self, opener: Page, popup: Page) -> None:
        conversation = self._pages.get(opener)
        if conversation is None or self._cause is not None or popup in self._pages:
            return
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

    async def _open(self, conversation: str) -> Page:
        page = await self._context.new_page()
        self._adopt(page, conversation)
        try:
            await self._announce(conversation, page)
        except BaseException:
            self._pages.pop(page, None)
            if self._cause is None and not page.is_closed():
                task = self._loop.create_task(self._race(page.close(), "closing a page"))
                task.add_done_callback(_consume)
                self._track(task)
            raise
        return page

    def pages(self, conversation: str) -> Sequence[Page]:
        """Open pages of ``conversation``, oldest first (local state only)."""
        return [p for p, c in self._pages.items() if c == conversation and not p.is_closed()]

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

        await self._call(lambda: page.goto(url), "navigation", failed)
        return page.url

    async def close_page(self, page: Page) -> None:
        """Close one page (no-op for a page that is already closed)."""
        self._check()
        self._pages.pop(page, None)
        if not page.is_closed():
            await self._call(lambda: page.close(), "closing a page")

    # -- lifetime ------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the browser cleanly (Chromium flushes its cookie store); idempotent.

        If Chromium does not finish closing within the backend's ``close_timeout``,
        it is killed; the cause is still ``"closed"`` (we asked for it).
        """
        if self._cause is not None:
            return
        self._closing = True
        try:
            # A browser that dies while closing has closed: stop waiting for its answer.
            closing = self._race(self._context.close(), "closing")
            await asyncio.wait_for(closing, self._backend.close_timeout)
        except BrowserGoneError:
            pass
        except TimeoutError:
            log.warning(
                "browser on %s did not close in %.0f s; killing it",
                self._backend.profile_dir,
                self._backend.close_timeout,
            )
            self._signal_kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._died), 10)
        except PlaywrightError:
            pass  # It died under us; the close is what we wanted anyway.
        self._die()

    def _signal_kill(self) -> None:
        if self._pidfd is not None:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        elif self._pid is not None and _pid_running(self._pid):
            os.kill(self._pid, signal.SIGKILL)
        else:
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


class PlaywrightBackend:
    """Starts Chromium on one persistent profile: a :class:`~session_keeper.BrowserBackend`.

    ``profile_dir`` is created if missing. ``executable_path`` defaults to
    :func:`~session_keeper.find_chromium`. ``args`` are added after
    :data:`~session_keeper._chromium.CHROMIUM_ARGS`; ``host_resolver_rules`` becomes
    ``--host-resolver-rules=...`` (tests map ``*.example`` to a local server).
    ``launch_timeout`` bounds one start; ``close_timeout`` bounds a clean close before
    it turns into a kill.

    Liveness comes from Playwright's ``close``/``disconnected`` events and, with
    ``watch_process`` (the default, Linux), from the browser's process: a pidfd
    (exit) and a look at ``/proc`` every ``process_poll_interval`` seconds (a queued
    SIGKILL or an exit in progress; ``None`` turns the look off). The look is what
    keeps crash detection under 100 ms: the kernel needs 40-170 ms on a 2-core machine
    to tear a SIGKILLed Chromium down before the pidfd or the event can fire
    (``benchmarks/crash_detection.py`` measures all three).

    Contract: see :class:`~session_keeper.BrowserBackend`. The Playwright driver is
    started on the first :meth:`launch` and kept until :meth:`aclose`.
    """

    def __init__(
        self,
        profile_dir: str | os.PathLike[str],
        *,
        executable_path: str | os.PathLike[str] | None = None,
        headless: bool = True,
        args: Sequence[str] = (),
        host_resolver_rules: str | None = None,
        launch_timeout: float = 30.0,
        close_timeout: float = 15.0,
        watch_process: bool = True,
        process_poll_interval: float | None = 0.02,
    ) -> None:
        self.profile_dir = Path(profile_dir).expanduser().resolve()
        self.executable_path = None if executable_path is None else str(executable_path)
        self.headless = headless
        self.args = tuple(args)
        self.host_resolver_rules = host_resolver_rules
        self.launch_timeout = launch_timeout
        self.close_timeout = close_timeout
        self.watch_process = watch_process
        self.process_poll_interval = process_poll_interval
        self._playwright: Playwright | None = None
        self._current: PlaywrightSession | None = None
        self._launching = False
        self.launches = 0

    @property
    def current(self) -> PlaywrightSession | None:
        """The live session, if any."""
        if self._current is not None and self._current.alive:
            return self._current
        return None

    def _executable(self) -> str:
        if self.executable_path is None:
            return find_chromium()
        path = Path(self.executable_path)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ChromiumNotFound(
                f"executable_path {self.executable_path!r} is not an executable file; "
                "leave it unset to let session_keeper find Chromium"
            )
        return str(path)

    def _take_keeper_lock(self) -> int:
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.profile_dir / KEEPER_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ProfileInUse(
                f"profile directory {self.profile_dir} is in use by another "
                "session_keeper browser (in this or another process)"
            ) from None
        return fd

    def _launch_args(self) -> list[str]:
        args = list(CHROMIUM_ARGS)
        # Shared workers belong to no page: no page's (or frame's) interception sees
        # their requests, so a Guard could not stop one carrying a login out. Like
        # service workers (blocked in the context), they are not offered at all.
        args.append("--disable-shared-workers")
        if self.host_resolver_rules:
            args.append(f"--host-resolver-rules={self.host_resolver_rules}")
        args.extend(self.args)
        return args

    async def launch(self) -> PlaywrightSession:
        """Start Chromium on the profile and return the live session.

        Raises :class:`ChromiumNotFound` (no executable), :class:`ProfileInUse` (a live
        browser, ours or not, holds the profile; raised before anything starts) or
        :class:`BrowserLaunchError` (Chromium or the driver failed to start).
        """
        if self.current is not None or self._launching:
            raise ProfileInUse(
                f"profile directory {self.profile_dir} is in use by this backend's live browser"
            )
        self._launching = True
        try:
            executable = self._executable()
            try:
                lock_fd = self._take_keeper_lock()
            except OSError as exc:
                raise BrowserLaunchError(
                    f"cannot use profile directory {self.profile_dir}: {exc.strerror}"
                ) from None
            try:
                check_profile_free(self.profile_dir)
                session = await self._start(executable, lock_fd)
            except BaseException:
                os.close(lock_fd)
                raise
            self._current = session
            self.launches += 1
            return session
        finally:
            self._launching = False

    async def _start(self, executable: str, lock_fd: int) -> PlaywrightSession:
        if self._playwright is None:
            try:
                self._playwright = await async_playwright().start()
            except Exception as exc:
                raise BrowserLaunchError(
                    f"the Playwright driver failed to start: {_first_line(exc)}"
                ) from None
        launching = asyncio.ensure_future(
            self._playwright.chromium.launch_persistent_context(
                str(self.profile_dir),
                executable_path=executable,
                headless=self.headless,
                args=self._launch_args(),
                service_workers="block",
                timeout=self.launch_timeout * 1000,
            )
        )
        try:
            context = await self._race_start(launching)
        except PlaywrightError as exc:
            if isinstance(exc, TargetClosedError):
                # The driver itself may be what broke; start a fresh one next time.
                await self._stop_driver()
            # Chromium that finds a live lock hands over to that browser and exits;
            # if someone took the profile meanwhile, say that rather than "crashed".
            check_profile_free(self.profile_dir)
            raise BrowserLaunchError(
                f"Chromium at {executable} failed to start on profile {self.profile_dir}: "
                f"{_launch_failure(exc)}"
            ) from None
        pid = _find_browser_pid(self.profile_dir)
        if pid is None:
            log.warning(
                "could not find the browser process for %s; liveness from events only",
                self.profile_dir,
            )
        log.info("browser started on %s (pid %s)", self.profile_dir, pid)
        return PlaywrightSession(
            self,
            context,
            pid,
            lock_fd,
            watch_process=self.watch_process,
            poll_interval=self.process_poll_interval,
        )

    async def _race_start(self, launching: asyncio.Future[BrowserContext]) -> BrowserContext:
        """The launched context, unless the browser is seen dead while it starts.

        Measured here: a Chromium SIGKILLed late in its start-up leaves Playwright
        waiting for the whole ``launch_timeout`` (its children keep the pipe open).
        The browser names its pid in the profile's ``SingletonLock`` early on; once
        that process is condemned the launch is abandoned at once.
        """
        interval = self.process_poll_interval if self.watch_process else None
        if not interval:
            return await launching
        watching = asyncio.ensure_future(self._watch_start(interval))
        try:
            await asyncio.wait((launching, watching), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watching.cancel()
            abandoned = not launching.done()
            if abandoned:
                launching.cancel()
                launching.add_done_callback(_consume)
        if abandoned:
            raise BrowserLaunchError(f"Chromium on profile {self.profile_dir} died while starting")
        return launching.result()

    async def _watch_start(self, interval: float) -> None:
        """Return once the browser being started has died (its lock names a dead pid)."""
        pid: int | None = None
        while pid is None or _pid_running(pid):
            await asyncio.sleep(interval)
            if pid is None:
                lock = _read_singleton_lock(self.profile_dir)
                if lock is not None and lock[1] > 0 and lock[0] == socket.gethostname():
                    pid = lock[1]

    async def aclose(self) -> None:
        """Close the live browser cleanly (if any) and stop the Playwright driver; idempotent."""
        if self._current is not None:
            await self._current.close()
            self._current = None
        await self._stop_driver()

    async def _stop_driver(self) -> None:
        pw, self._playwright = self._playwright, None
        if pw is not None:
            with contextlib.suppress(Exception):
                await pw.stop()

    def __repr__(self) -> str:
        return f"<PlaywrightBackend {self.profile_dir} launches={self.launches}>"
