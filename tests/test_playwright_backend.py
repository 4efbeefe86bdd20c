"""PlaywrightBackend on real Chromium: profile locks, real kills, crash detection, real sites."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from session_keeper import CdpBackend, PlaywrightBackend, SessionKeeper
from session_keeper._browser.backend import DEATH_BOUND_S
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper._browser.playwright_session import PlaywrightSession
from session_keeper._browser.process import pid_running, proc_cmdline
from session_keeper.errors import (
    BrowserLaunchError,
    ChromiumNotFound,
    InvalidArgument,
    InvalidArgumentType,
    ProfileInUse,
)
from session_keeper.seams import CloseCause, Cookie
from session_keeper.testing import LocalSites

from .conftest import BackendFactory, StallingSite

pytestmark = pytest.mark.chromium


async def eventually(condition: Callable[[], bool], what: str, limit: float = 15) -> None:
    """Wait (bounded, against a hang; not a latency check) until ``condition()`` holds."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.02)


def lock_pid(profile: Path) -> int:
    """The pid named by the profile's SingletonLock."""
    return int(os.readlink(profile / "SingletonLock").rpartition("-")[2])


async def pid_named_while_launching(
    profile: Path, launching: asyncio.Future[PlaywrightSession], *, not_pid: int | None
) -> int | None:
    """The pid a starting browser writes into the profile's SingletonLock, or None if the
    launch ends first. ``not_pid`` is the browser killed last trial, whose lock the
    launch clears as stale."""
    while not launching.done():
        if (profile / "SingletonLock").is_symlink():
            try:
                pid = lock_pid(profile)
            except (OSError, ValueError):  # replaced between the check and the read
                pid = None
            if pid is not None and pid != not_pid:
                return pid
        await asyncio.sleep(0.005)
    return None


@pytest.fixture
def other_chromium(chromium_path: str, tmp_path: Path) -> Iterator[Callable[[Path], int]]:
    """Start Chromium processes we do not drive (as another program would); reaped at the end."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(profile: Path) -> int:
        proc = subprocess.Popen(
            [
                chromium_path,
                "--headless=new",
                "--no-sandbox",
                f"--user-data-dir={profile}",
                *CHROMIUM_ARGS,
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        deadline = time.monotonic() + 20
        while not (profile / "SingletonLock").is_symlink():
            assert proc.poll() is None, "the other Chromium exited at start-up"
            assert time.monotonic() < deadline, "the other Chromium never locked its profile"
            time.sleep(0.05)
        return proc.pid

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=20)


async def test_profile_held_by_another_chromium_process(
    playwright_backend: BackendFactory, other_chromium: Callable[[Path], int], tmp_path: Path
) -> None:
    """A profile locked by a live Chromium we did not start gives ProfileInUse, starting nothing."""
    profile = tmp_path / "shared"
    pid = other_chromium(profile)
    backend = playwright_backend(profile)
    with pytest.raises(ProfileInUse) as info:
        await asyncio.wait_for(backend.launch(), 20)  # bound: a hang is the bug
    assert str(profile) in str(info.value)
    assert str(pid) in str(info.value)
    assert backend.current is None
    assert lock_pid(profile) == pid  # the other browser's lock is untouched
    assert pid_running(pid)


async def test_stale_lock_of_a_killed_chromium_is_cleared(
    playwright_backend: BackendFactory, other_chromium: Callable[[Path], int], tmp_path: Path
) -> None:
    """After the lock holder is SIGKILLed its stale SingletonLock does not block a launch."""
    profile = tmp_path / "shared"
    pid = other_chromium(profile)
    os.kill(pid, signal.SIGKILL)
    await eventually(lambda: not pid_running(pid), "the other Chromium dies")
    assert lock_pid(profile) == pid  # Chromium leaves its lock behind on SIGKILL
    session = await playwright_backend(profile).launch()
    assert session.alive
    assert session.pid is not None
    assert lock_pid(profile) == session.pid


async def test_lock_naming_an_unrelated_live_process_is_stale(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """A lock whose pid now belongs to a non-browser process (pid reuse) is cleared."""
    profile = tmp_path / "reused"
    profile.mkdir()
    (profile / "SingletonLock").symlink_to(f"{socket.gethostname()}-{os.getpid()}")
    session = await playwright_backend(profile).launch()
    assert session.alive
    assert lock_pid(profile) == session.pid


async def test_lock_from_another_host_is_in_use(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """A lock naming another host cannot be checked: ProfileInUse says which host."""
    profile = tmp_path / "remote"
    profile.mkdir()
    (profile / "SingletonLock").symlink_to("some-other-host-4242")
    with pytest.raises(ProfileInUse, match="some-other-host"):
        await playwright_backend(profile).launch()


async def test_two_backends_on_one_profile(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """A second backend on a profile our live browser holds gets ProfileInUse; later it may."""
    profile = tmp_path / "one"
    first = await playwright_backend(profile).launch()
    second = playwright_backend(profile)
    with pytest.raises(ProfileInUse, match="session_keeper"):
        await second.launch()
    await first.close()
    assert (await second.launch()).alive


async def test_missing_executable_is_chromium_not_found(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """An executable_path that is not there gives ChromiumNotFound and leaves no lock."""
    backend = playwright_backend(executable_path=tmp_path / "no-such-chrome")
    with pytest.raises(ChromiumNotFound, match="no-such-chrome"):
        await backend.launch()
    assert backend.current is None
    assert not (backend.profile_dir / "SingletonLock").exists()


async def test_chromium_that_fails_to_start_is_a_launch_error(
    playwright_backend: BackendFactory, tmp_path: Path
) -> None:
    """A program that exits at once instead of speaking the protocol is a BrowserLaunchError."""
    broken = tmp_path / "broken-chrome"
    broken.write_text("#!/bin/sh\necho 'no display here' >&2\nexit 3\n")
    broken.chmod(0o755)
    backend = playwright_backend(executable_path=broken, launch_timeout=20)
    with pytest.raises(BrowserLaunchError, match="failed to start") as info:
        await backend.launch()
    assert not isinstance(info.value, ProfileInUse | ChromiumNotFound)
    assert "no display here" in str(info.value)  # the browser's own words
    assert "exitCode=3" in str(info.value)
    # Nothing is held: a good launch on the same profile works.
    backend.executable_path = None
    assert (await backend.launch()).alive


async def test_external_sigkill_is_detected(playwright_backend: BackendFactory) -> None:
    """A SIGKILL from outside turns alive False and calls on_close once with "crashed"."""
    backend = playwright_backend()
    session = await backend.launch()
    pid = session.pid
    assert pid is not None
    cmdline = proc_cmdline(pid) or []
    assert f"--user-data-dir={backend.profile_dir}" in cmdline
    assert not any(a.startswith("--type=") for a in cmdline)  # the browser, not a child
    causes: list[CloseCause] = []
    session.on_close(causes.append)
    os.kill(pid, signal.SIGKILL)
    await eventually(lambda: bool(causes), "on_close after SIGKILL")
    assert causes == ["crashed"]
    assert not session.alive
    await asyncio.sleep(0.1)
    assert causes == ["crashed"]


async def test_a_browser_killed_while_starting_fails_the_launch_at_once(
    playwright_backend: BackendFactory,
) -> None:
    """Chromium SIGKILLed during launch(): BrowserLaunchError (or a live session) without
    waiting out the launch timeout; the next launch on the profile works."""
    seed = int(os.environ.get("SESSION_KEEPER_KILL_SEED") or random.randrange(2**32))
    rnd = random.Random(seed)
    backend = playwright_backend(launch_timeout=60.0)
    killed_while_starting = 0
    killed: int | None = None
    for trial in range(8):
        where = f"seed={seed} trial={trial}"
        launching = asyncio.ensure_future(backend.launch())
        # The kill is timed from the moment the browser names itself in its lock, not
        # from the call: a fixed 0.05-0.3 s sleep missed all 8 starts on a loaded CI
        # machine (seed=37354103), where a start takes longer than that.
        pid = await pid_named_while_launching(backend.profile_dir, launching, not_pid=killed)
        await asyncio.sleep(rnd.uniform(0.0, 0.25))
        if pid is not None and not launching.done():
            os.kill(pid, signal.SIGKILL)
            killed, killed_while_starting = pid, killed_while_starting + 1
        # A hang check, not a latency check: the launch timeout is 60 s.
        await asyncio.wait([launching], timeout=DEATH_BOUND_S + 4)
        assert launching.done(), f"launch() still waits after the browser died ({where})"
        if launching.exception() is None:
            await launching.result().close()
        else:
            assert isinstance(launching.exception(), BrowserLaunchError), where
    assert killed_while_starting > 0, f"no kill landed during a launch (seed={seed})"
    session = await backend.launch()
    assert session.alive


async def test_kill_is_a_real_sigkill(playwright_backend: BackendFactory) -> None:
    """kill() ends the browser's main process, not just our connection to it."""
    backend = playwright_backend()
    session = await backend.launch()
    pid = session.pid
    assert pid is not None
    assert f"--user-data-dir={backend.profile_dir}" in (proc_cmdline(pid) or [])
    await session.kill()
    assert not session.alive
    await eventually(lambda: not pid_running(pid), "the browser process is gone")
    assert (backend.profile_dir / "SingletonLock").is_symlink()  # a crash leaves its lock


async def test_close_stops_the_browser_process(playwright_backend: BackendFactory) -> None:
    """A clean close ends the process and removes Chromium's lock."""
    backend = playwright_backend()
    session = await backend.launch()
    pid = session.pid
    assert pid is not None
    await session.close()
    await eventually(lambda: not pid_running(pid), "the browser process exits")
    assert not (backend.profile_dir / "SingletonLock").exists()


async def test_site_cookies_across_restart_and_crash(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Site logins: persistent survive a restart, session ones do not; a crash undoes a switch."""
    backend = playwright_backend()
    session = await backend.launch()
    page = await session.open_page("c")
    await session.goto(page, sites.url("billing.example", "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", "correct horse")
    await page.click("button[type=submit]")
    await page.wait_for_url("**/invoices")
    await session.goto(page, sites.url("sso.example", "/login"))
    await page.fill("input[name=account]", "ann")
    await page.click("button[type=submit]")
    await page.wait_for_load_state()
    jar = {c.name: c for c in await session.cookies()}
    assert jar["billing_session"].is_session
    assert jar["billing_session"].http_only
    assert not jar["sso_session"].is_session

    await session.close()
    session = await backend.launch()
    assert {c.name for c in await session.cookies()} == {"sso_session"}
    page = await session.open_page("c")
    await session.goto(page, sites.url("sso.example", "/whoami"))
    assert "ann" in await page.inner_text("body")
    await session.goto(page, sites.url("billing.example", "/invoices"))
    invoices = [r for r in sites.requests("billing.example") if r.path == "/invoices"]
    assert invoices[-1].cookie("billing_session") is None

    (ann,) = [c.value for c in await session.cookies()]
    await session.goto(page, sites.url("sso.example", "/switch?account=bob"))
    (bob,) = [c.value for c in await session.cookies()]
    assert bob != ann
    await session.kill()
    session = await backend.launch()
    page = await session.open_page("c")
    sites.clear_requests()
    await session.goto(page, sites.url("sso.example", "/whoami"))
    # Usually the switch died with the browser: the jar went back to ann's cookie,
    # which the site retired at the switch. Same cookie name, no login: why logins get
    # re-checked. Chromium flushes lazily, so now and then bob's cookie was already on
    # disk; then bob is still signed in. Either way the jar and the site agree.
    # Only /whoami: Chromium may also ask for /favicon.ico at any moment.
    (whoami,) = [r for r in sites.requests("sso.example") if r.path == "/whoami"]
    body = await page.inner_text("body")
    if whoami.cookies == (("sso_session", ann),):
        assert '"account": null' in body
    else:
        assert whoami.cookies == (("sso_session", bob),)
        assert '"account": "bob"' in body


async def test_cookie_values_stay_out_of_logs_and_errors(
    playwright_backend: BackendFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Cookie values never reach a log record or an exception message, even on rejection."""
    secret = "s3cr3t-value-never-logged"
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    session = await playwright_backend().launch()
    await session.add_cookies([Cookie(name="tok", value=secret, domain="billing.example")])
    assert [c.value for c in await session.cookies()] == [secret]
    with pytest.raises(InvalidArgument) as info:
        await session.add_cookies(
            [Cookie(name="bad", value=secret, domain="billing.example", path="no-slash")]
        )
    assert secret not in str(info.value)
    assert secret not in repr(info.value.__cause__) + repr(info.value.__context__)
    await session.kill()
    assert secret not in caplog.text
    assert secret not in repr(session)


async def test_a_navigation_returns_once_the_page_is_usable_not_when_a_stalled_image_loads(
    playwright_backend: BackendFactory, stalling_site: StallingSite
) -> None:
    """goto() on a page whose image never answers returns with the page parsed and usable
    (after at most the backend's load_timeout) while the image is still held, rather than
    failing at the navigation timeout: the path every face's navigation takes."""
    keeper = SessionKeeper(playwright_backend(load_timeout=0.5))
    async with keeper:
        await keeper.ensure("c")
        tab = await keeper.tab("c")
        ended = await tab.goto(f"{stalling_site.url}/page-a")
        assert ended == f"{stalling_site.url}/page-a"
        assert await tab.title() == "Page A"
        assert stalling_site.hanging == 1  # asked for, still unanswered
        assert keeper.last_verified_url("c") == ended
        # A page that does load is waited for in full: its load has fired on return.
        await tab.goto(f"{stalling_site.url}/page-b")
        assert await tab.evaluate("document.readyState") == "complete"


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_a_bad_load_timeout_is_refused_by_both_backends(tmp_path: Path, bad: float) -> None:
    """load_timeout is seconds (0 or more, finite) or None; anything else is a typed error
    at construction."""
    with pytest.raises(InvalidArgument, match="load_timeout"):
        PlaywrightBackend(tmp_path / "p", load_timeout=bad)
    with pytest.raises(InvalidArgument, match="load_timeout"):
        CdpBackend("ws://127.0.0.1:9222/devtools/browser/x", load_timeout=bad)
    with pytest.raises(InvalidArgumentType, match="load_timeout"):
        PlaywrightBackend(tmp_path / "p", load_timeout="5")  # type: ignore[arg-type]


async def test_the_test_id_attribute_names_elements_in_the_code_playwright_writes(
    playwright_backend: BackendFactory,
) -> None:
    """With test_id_attribute="data-tid", the locator Playwright writes for an element that
    carries one is getByTestId (what --test-id-attribute asks of Playwright MCP); without,
    the same element is named by its role."""
    page = "<button data-tid='submit'>Submit</button>"
    for attribute, code in (
        ("data-tid", "getByTestId('submit')"),
        (None, "getByRole('button', { name: 'Submit' })"),
    ):
        keeper = SessionKeeper(playwright_backend(test_id_attribute=attribute))
        async with keeper:
            await keeper.ensure("c")
            tab = await keeper.tab("c")
            await tab.evaluate("html => { document.body.innerHTML = html; }", page)
            assert await tab.locator("button").code("javascript") == code


@pytest.mark.parametrize("bad", ["", "data tid", "x'y", "a" * 101])
def test_a_bad_test_id_attribute_is_refused_by_both_backends(tmp_path: Path, bad: str) -> None:
    """test_id_attribute is an HTML attribute name or None; anything else is a typed error
    at construction."""
    with pytest.raises(InvalidArgument, match="test_id_attribute"):
        PlaywrightBackend(tmp_path / "p", test_id_attribute=bad)
    with pytest.raises(InvalidArgument, match="test_id_attribute"):
        CdpBackend("ws://127.0.0.1:9222/devtools/browser/x", test_id_attribute=bad)
    with pytest.raises(InvalidArgumentType, match="test_id_attribute"):
        PlaywrightBackend(tmp_path / "p", test_id_attribute=5)  # type: ignore[arg-type]


def _drivers_started_here() -> int:
    """How many Node processes (Playwright drivers, or a Node site) this process runs (Node
    names its main thread ``node-MainThread``)."""
    me, count = os.getpid(), 0
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue  # ended meanwhile
        if stat:
            name, after = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
            count += name.startswith("node") and int(after.split()[1]) == me
    return count


async def test_backends_given_the_callers_driver_launch_on_it_and_leave_it_running(
    playwright_backend: BackendFactory,
) -> None:
    """Two backends given one started driver launch their browsers through it (no Node
    process of their own starts); closing one and aclose() of the other leave it running."""
    async with async_playwright() as driver:
        nodes = _drivers_started_here()
        first, second = playwright_backend(playwright=driver), playwright_backend(playwright=driver)
        session = await first.launch()
        await second.launch()
        assert _drivers_started_here() == nodes
        await session.close()
        await second.aclose()
        again = await first.launch()  # the driver still launches browsers
        assert again.alive
        await first.aclose()
        api = await driver.request.new_context()  # and still answers once none is left
        await api.dispose()


async def test_a_bad_playwright_is_refused_by_both_backends(tmp_path: Path) -> None:
    """playwright is a started driver or None: an unstarted async_playwright() or anything
    else is a typed error at construction."""
    unstarted = async_playwright()
    for bad in (unstarted, "chromium"):
        with pytest.raises(InvalidArgumentType, match="playwright"):
            PlaywrightBackend(tmp_path / "p", playwright=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentType, match="playwright"):
            CdpBackend("ws://127.0.0.1:9222/devtools/browser/x", playwright=bad)  # type: ignore[arg-type]
