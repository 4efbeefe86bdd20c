"""PlaywrightBackend: the real :class:`~session_keeper.BrowserBackend`, on a persistent profile.

One backend owns one profile directory and starts at most one Chromium on it at a
time, through Playwright's ``launch_persistent_context``; the live browser is a
:class:`~session_keeper._browser.playwright_session.PlaywrightSession` (liveness, the real
kill, pages per conversation: see that module). The launch holds our own ``flock`` on
the profile, refuses a profile a live browser holds (its process and profile lock) and
gives up at once on a Chromium that dies while it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from playwright._impl._errors import TargetClosedError
from playwright.async_api import BrowserContext, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from session_keeper._browser.chromium import CHROMIUM_ARGS, find_chromium
from session_keeper._browser.navigation import DEFAULT_LOAD_TIMEOUT, check_load_timeout
from session_keeper._browser.playwright_session import (
    PlaywrightSession,
    consume_abandoned,
    first_line,
)
from session_keeper._browser.process import (
    check_profile_free,
    find_browser_pid,
    pid_running,
    read_singleton_lock,
)
from session_keeper._browser.selectors import (
    apply_test_id_attribute,
    check_playwright,
    check_test_id_attribute,
)
from session_keeper._util.redact import redact_text, scrubbing_logger
from session_keeper.errors import (
    BrowserLaunchError,
    ChromiumNotFound,
    InvalidArgument,
    ProfileInUse,
)

# PlaywrightSession is re-exported: it has been importable from here since the start.
__all__ = ["KEEPER_LOCK_NAME", "PlaywrightBackend", "PlaywrightSession"]

log = scrubbing_logger("session_keeper.playwright")

#: The file in the profile directory we hold an exclusive ``flock`` on while one of
#: our sessions lives. Chromium's own ``SingletonLock`` is only created some way into
#: its start-up; this closes the window in which two of our launches could race.
KEEPER_LOCK_NAME = ".session-keeper.lock"

#: How long a launch whose browser died waits for Playwright to say why (seconds).
LAST_WORDS_S = 1.0


#: Chromium's stderr lines as Playwright quotes them: ``[pid=123][err] text``.
_STDERR_LINE = re.compile(r"\[pid=\d+\]\[err\] ?(.*)")
#: Chromium's own log prefix (``[123:123:1206/232529.523242:ERROR:file.cc:257] ``).
_CHROMIUM_LOG_PREFIX = re.compile(r"^\[\d+:\d+:[\d/.]+:([A-Z]+):[^\]]*\] ")
#: Lines Chromium prints on every start in a container, whatever went wrong (no D-Bus;
#: Debian's wrapper script): left out so the tail holds the cause.
_NOISE = re.compile(r"Failed to connect to the bus|: unexpected operator$")
#: How many of the browser's last stderr lines a launch error quotes.
STDERR_TAIL = 4

#: What Chromium says when it cannot start, and what to do about it.
LAUNCH_FIXES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Missing X server|\$DISPLAY|cannot open display|without having a XServer"),
        "no display for a headed browser: run headless (headless=True; drop --headed), "
        "let a person sign in through the console (--console), or start under xvfb-run",
    ),
    (
        re.compile(r"Running as root without --no-sandbox|No usable sandbox"),
        "Chromium's sandbox cannot run here: run as a user other than root, or let "
        "Playwright add --no-sandbox (its default: chromium_sandbox off)",
    ),
    (
        re.compile(r"error while loading shared libraries|cannot open shared object file"),
        "a library Chromium needs is missing: install the distribution's chromium package "
        "(apt-get install chromium) or run: python -m playwright install-deps chromium",
    ),
)


def browser_stderr(error: BaseException) -> list[str]:
    """The browser's own stderr lines in a Playwright launch error, in order, each once,
    without Chromium's log prefix."""
    seen: dict[str, None] = {}
    for line in str(error).splitlines():
        m = _STDERR_LINE.search(line)
        if m is None:
            continue
        text = _CHROMIUM_LOG_PREFIX.sub(r"\1: ", m.group(1).strip())
        if text and not _NOISE.search(text):
            seen.setdefault(text, None)
    return list(seen)


def launch_fix(said: Sequence[str]) -> str | None:
    """The fix for a launch failure the browser's stderr (or Playwright's note) names."""
    text = "\n".join(said)
    for pattern, fix in LAUNCH_FIXES:
        if pattern.search(text):
            return fix
    return None


def _launch_failure(error: BaseException) -> str:
    """Playwright's launch error cut down to what helps: the reason, the browser's own
    last stderr lines, its exit status and the fix when the cause is a known one (not
    the 60-flag command line, twice). Redacted: a URL's query, a known secret."""
    lines = str(error).strip().splitlines()
    head = lines[0] if lines else type(error).__name__
    stderr = browser_stderr(error)
    exits = [ln.split("<", 1)[1].rstrip(">") for ln in lines if "<process did exit" in ln]
    parts = [head]
    if stderr:
        parts.append("browser said: " + " | ".join(x[:200] for x in stderr[-STDERR_TAIL:]))
    if exits:
        parts.append(exits[-1])
    fix = launch_fix([*stderr, str(error)])
    if fix is not None:
        parts.append(f"fix: {fix}")
    return redact_text("; ".join(parts), limit=2000)


#: What Playwright's client raises when an answer from its driver names an object it
#: no longer knows. The client raises that from the next call on the driver, whichever
#: call it is (see PageActivity.install_settled), before sending it.
_STALE_DRIVER_ERRORS = (
    "was not bound in the connection",
    "Cannot find object to",
    "Cannot find parent object",
)


def _stale_driver_error(error: BaseException) -> bool:
    """Whether ``error`` is an earlier answer's mismatch raised by this call, not its own."""
    return not isinstance(error, TargetClosedError) and any(
        text in str(error) for text in _STALE_DRIVER_ERRORS
    )


#: The profile preferences set before every launch, and why (``(path, value)``).
PRIVATE_PREFS: tuple[tuple[tuple[str, ...], object], ...] = (
    # Speculation rules are fetched by the browser process itself, not by a page, so the
    # Guard's watch never sees them (measured on Chromium 156: a prefetch and a prerender
    # of a keeper surface arrived). No switch stops them; "never predict" does (0 of 3).
    (("net", "network_prediction_options"), 2),
    # A person signing in must not leave the password in the shared profile (any
    # conversation's page of that site could be offered it), nor have Chromium send a
    # hash of it to a leak-check service.
    (("credentials_enable_service",), False),
    (("profile", "password_manager_enabled"), False),
    (("profile", "password_manager_leak_detection"), False),
    # Addresses and cards typed into forms are not kept for other conversations, and the
    # sites' form structure is not sent to the autofill service (measured: the queries to
    # content-autofill.googleapis.com after a sign-in stopped).
    (("autofill", "profile_enabled"), False),
    (("autofill", "credit_card_enabled"), False),
)


def private_profile_prefs(profile_dir: Path) -> None:
    """Set :data:`PRIVATE_PREFS` in the profile before a launch (see each one's reason).

    Written while we hold the profile, before Chromium reads it; the profile's other
    preferences are kept, and a preferences file we cannot read is left as it is
    (Chromium resets such a file itself).
    """
    prefs = profile_dir / "Default" / "Preferences"
    data: dict[str, Any] = {}
    if prefs.exists():
        try:
            loaded = json.loads(prefs.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("profile preferences unreadable; private preferences not set")
            return
        if not isinstance(loaded, dict):
            return
        data = loaded
    changed = False
    for path, value in PRIVATE_PREFS:
        node = data
        for key in path[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                break  # a shape we do not know: left as it is
            node = child
        else:
            if node.get(path[-1]) != value:
                node[path[-1]] = value
                changed = True
    if not changed:
        return
    prefs.parent.mkdir(parents=True, exist_ok=True)
    partial = prefs.with_name("Preferences.session-keeper")
    partial.write_text(json.dumps(data), encoding="utf-8")
    os.replace(partial, prefs)


class PlaywrightBackend:
    """Starts Chromium on one persistent profile: a :class:`~session_keeper.BrowserBackend`.

    ``profile_dir`` is created if missing. ``executable_path`` defaults to
    :func:`~session_keeper.find_chromium`. ``args`` are added after
    :data:`~session_keeper._browser.chromium.CHROMIUM_ARGS`; ``host_resolver_rules`` becomes
    ``--host-resolver-rules=...`` (tests map ``*.example`` to a local server).
    ``launch_timeout`` bounds one start; ``close_timeout`` bounds a clean close before
    it turns into a kill. ``viewport`` is every page's size, ``(width, height)`` in CSS
    pixels (Playwright's default, 1280x720, when ``None``); ``device_scale_factor`` is
    their device pixels per CSS pixel (1 when ``None``; 2 draws as a high-density
    screen does, and ``screenshot(scale="device")`` shows it). A navigation returns once its
    document is parsed and then waits at most ``load_timeout`` seconds for the page's
    ``load`` (a page one slow image or tracker never lets finish is usable by then);
    ``None`` waits for ``load`` itself, as Playwright's ``goto`` does.
    ``test_id_attribute`` is the attribute ``get_by_test_id`` reads and generated
    locators use (Playwright's default, ``data-testid``, when ``None``).

    Liveness comes from Playwright's ``close``/``disconnected`` events and, with
    ``watch_process`` (the default, Linux), from the browser's process: a pidfd
    (exit) and a look at ``/proc`` every ``process_poll_interval`` seconds (a queued
    SIGKILL or an exit in progress; ``None`` turns the look off). The look is what
    keeps crash detection under 100 ms: the kernel needs 40-170 ms on a 2-core machine
    to tear a SIGKILLed Chromium down before the pidfd or the event can fire
    (``benchmarks/crash_detection.py`` measures all three).

    ``playwright`` is an already-started Playwright driver to launch on (what
    ``async with async_playwright() as playwright`` gives), owned by the caller: the
    backend never stops it (:meth:`aclose` closes only its browser), so it must outlive
    the backend and run on the same event loop. Several backends may share one; each
    start of a driver of its own is a Node process (about 0.5 s of CPU). A
    ``test_id_attribute`` is then set on that driver, so for every backend on it. With
    ``None`` (the default) the backend starts its own driver on the first :meth:`launch`
    and stops it in :meth:`aclose`.

    Contract: see :class:`~session_keeper.BrowserBackend`.
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
        viewport: tuple[int, int] | None = None,
        device_scale_factor: float | None = None,
        load_timeout: float | None = DEFAULT_LOAD_TIMEOUT,
        test_id_attribute: str | None = None,
        playwright: Playwright | None = None,
    ) -> None:
        self.load_timeout = check_load_timeout(load_timeout)
        self.test_id_attribute = check_test_id_attribute(test_id_attribute)
        shared = check_playwright(playwright)
        if viewport is not None and not all(
            isinstance(side, int) and not isinstance(side, bool) and 1 <= side <= 10_000
            for side in viewport
        ):
            raise InvalidArgument("viewport is (width, height), each 1 to 10000 pixels")
        self.viewport = viewport
        if device_scale_factor is not None and (
            isinstance(device_scale_factor, bool)
            or not isinstance(device_scale_factor, int | float)
            or not 0 < device_scale_factor <= 10
        ):
            raise InvalidArgument("device_scale_factor is a number above 0, at most 10")
        self.device_scale_factor = device_scale_factor
        self.profile_dir = Path(profile_dir).expanduser().resolve()
        self.executable_path = None if executable_path is None else str(executable_path)
        self.headless = headless
        self.args = tuple(args)
        self.host_resolver_rules = host_resolver_rules
        self.launch_timeout = launch_timeout
        self.close_timeout = close_timeout
        self.watch_process = watch_process
        self.process_poll_interval = process_poll_interval
        # The caller's driver is never stopped here; ours (started on a launch) is.
        self._shared_driver = shared
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

    def _context_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.viewport is not None:
            width, height = self.viewport
            options["viewport"] = {"width": width, "height": height}
        if self.device_scale_factor is not None:
            options["device_scale_factor"] = self.device_scale_factor
        return options

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
                private_profile_prefs(self.profile_dir)
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
                self._playwright = (
                    self._shared_driver
                    if self._shared_driver is not None
                    else await async_playwright().start()
                )
                apply_test_id_attribute(self._playwright, self.test_id_attribute)
            except Exception as exc:
                raise BrowserLaunchError(
                    f"the Playwright driver failed to start: {first_line(exc)}"
                ) from None
        try:
            try:
                context = await self._race_start(self._launching_context(executable))
            except PlaywrightError as exc:
                if not _stale_driver_error(exc):
                    raise
                # Never sent: the driver raised an earlier answer it could not match.
                log.warning("retrying the launch on %s: %s", self.profile_dir, first_line(exc))
                context = await self._race_start(self._launching_context(executable))
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
        except AttributeError:
            # Seen in CI: a browser killed at the very end of its start-up makes
            # Playwright's own close handler fail on a context it had not finished
            # building. The start failed underneath us; the driver may be broken too.
            await self._stop_driver()
            check_profile_free(self.profile_dir)
            raise BrowserLaunchError(
                f"Chromium on profile {self.profile_dir} died while starting"
            ) from None
        pid = find_browser_pid(self.profile_dir)
        if pid is None:
            log.warning(
                "could not find the browser process for %s; liveness from events only",
                self.profile_dir,
            )
        log.info("browser started on %s (pid %s)", self.profile_dir, pid)
        session = PlaywrightSession(
            self,
            context,
            pid,
            lock_fd,
            watch_process=self.watch_process,
            poll_interval=self.process_poll_interval,
            load_timeout=self.load_timeout,
            # A window or a debugging port lets someone other than the keeper's handles
            # act on the pages.
            unattended=self.headless
            and not any(a.startswith("--remote-debugging") for a in self._launch_args()),
        )
        # While the keeper measures the new browser and saves what it found, the pages'
        # input watch is being installed: the first tab need not wait for all of it.
        session.prepare()
        return session

    def _launching_context(self, executable: str) -> asyncio.Future[BrowserContext]:
        assert self._playwright is not None
        return asyncio.ensure_future(
            self._playwright.chromium.launch_persistent_context(
                str(self.profile_dir),
                executable_path=executable,
                headless=self.headless,
                args=self._launch_args(),
                service_workers="block",
                timeout=self.launch_timeout * 1000,
                **self._context_options(),
            )
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
            said = None if launching.done() else await self._last_words(launching)
        except BaseException:
            if not launching.done():
                launching.cancel()
                launching.add_done_callback(consume_abandoned)
            raise
        finally:
            watching.cancel()
        if said is not None:
            raise BrowserLaunchError(
                f"Chromium on profile {self.profile_dir} died while starting{said}"
            )
        return launching.result()

    async def _last_words(self, launching: asyncio.Future[BrowserContext]) -> str:
        """What a browser that died while starting said: Playwright's launch error (its
        stderr, its exit) if that arrives within :data:`LAST_WORDS_S`, else nothing.

        A browser that exits by itself (no display, a missing library) is reported by
        Playwright within a second; one killed late in its start-up may leave the launch
        hanging (its children hold the pipe), so it is abandoned after the wait.
        """
        done, _ = await asyncio.wait((launching,), timeout=LAST_WORDS_S)
        if not done:
            launching.cancel()
            launching.add_done_callback(consume_abandoned)
            return ""
        exc = launching.exception()
        if exc is None:
            # It started after all, as the browser died: close what was built.
            with contextlib.suppress(Exception):
                await launching.result().close()
            return ""
        if isinstance(exc, TargetClosedError):
            await self._stop_driver()
        return f": {_launch_failure(exc)}" if isinstance(exc, PlaywrightError) else ""

    async def _watch_start(self, interval: float) -> None:
        """Return once the browser being started has died (its lock names a dead pid)."""
        pid: int | None = None
        while pid is None or pid_running(pid):
            await asyncio.sleep(interval)
            if pid is None:
                lock = read_singleton_lock(self.profile_dir)
                if lock is not None and lock[1] > 0 and lock[0] == socket.gethostname():
                    pid = lock[1]

    async def aclose(self) -> None:
        """Close the live browser cleanly (if any) and stop the Playwright driver (unless it
        is the caller's); idempotent."""
        if self._current is not None:
            await self._current.close()
            self._current = None
        await self._stop_driver()

    async def _stop_driver(self) -> None:
        pw, self._playwright = self._playwright, None
        if pw is not None and pw is not self._shared_driver:
            with contextlib.suppress(Exception):
                await pw.stop()

    def __repr__(self) -> str:
        return f"<PlaywrightBackend {self.profile_dir} launches={self.launches}>"
