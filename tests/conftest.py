"""Shared fixtures: one DemoSites server per test session, and real-Chromium backends.

DemoSites is LocalSites plus the demos' pages (catalogue, attack pages, TodoMVC).

The single sign-on sites (``sso_sites``) need Node and their modules (``npm ci``, done by
``scripts/ensure-system-deps.sh``): without them their tests skip, and fail under CI.

Chromium tests need an executable (``find_chromium``). Without one they skip, except
under CI (``CI`` set), where a missing browser is a failure with the finder's message.

One Playwright driver per file: each backend starting a driver of its own costs a Node
process (about 0.5 s of CPU, 0.5-1.5 s of a test's wall time on a 2-core machine). A file
whose tests never stop or kill the driver opts in with one line::

    playwright_backend = shared_driver_backend  # (imported from tests/conftest.py)

Its async tests then run on one event loop per file (the driver is bound to the loop it
started on; :func:`pytest_collection_modifyitems` marks them) and ``playwright_backend``
hands every backend the file's :func:`playwright_driver`. An async fixture in such a
file says ``@pytest_asyncio.fixture(loop_scope="module")`` (a fixture on another loop
fails the tests that use it, loudly).

:data:`SLOWEST_FILES` is printed by ``python scripts/slowest_files.py JUNIT_XML`` from a
full run's junit report.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Playwright, async_playwright

from demos.sites import DemoSites
from demos.sites.sso import SsoSites, SsoSitesError
from session_keeper import PlaywrightBackend, find_chromium
from session_keeper.errors import ChromiumNotFound
from session_keeper.testing import (
    CHROMIUM_TEST_ARGS,
    TemporaryPostgres,
    TemporaryPostgresError,
    allow_third_party_cookies,
)

BackendFactory = Callable[..., PlaywrightBackend]


async def sigkill(session: Any) -> None:
    """SIGKILL ``session``'s Chromium main process; return once the session knows it is
    dead (a kill never noticed in 15 s fails the test)."""
    assert session is not None and session.pid is not None
    os.kill(session.pid, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while session.alive:
        assert time.monotonic() < deadline, "the kill was never noticed"
        await asyncio.sleep(0.01)


@pytest.fixture(scope="session")
def sites() -> Iterator[DemoSites]:
    """The local fixture sites, shared by the whole test session."""
    with DemoSites() as running:
        yield running


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium to drive; skip (fail under CI) when there is none."""
    try:
        return find_chromium()
    except ChromiumNotFound as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


async def _backends(
    tmp_path: Path, sites: DemoSites, chromium_path: str, driver: Playwright | None
) -> AsyncIterator[BackendFactory]:
    """The factory :func:`playwright_backend` yields; backends launch on ``driver`` when
    one is given (unless a test sets its own ``test_id_attribute``, which would change the
    shared driver), else each on a driver of its own."""
    made: list[PlaywrightBackend] = []

    def make(profile_dir: Path | None = None, **kwargs: Any) -> PlaywrightBackend:
        profile = profile_dir if profile_dir is not None else tmp_path / f"profile-{len(made)}"
        if driver is not None and "test_id_attribute" not in kwargs:
            kwargs.setdefault("playwright", driver)
        kwargs.setdefault("executable_path", chromium_path)
        kwargs.setdefault("host_resolver_rules", sites.host_resolver_rules)
        # Trusts LocalSites' throwaway certificate (HTTPS sites); test browsers only.
        kwargs.setdefault("args", CHROMIUM_TEST_ARGS)
        # Cross-site cookies flow as in a user's Chrome: the Guard's hardest case.
        allow_third_party_cookies(profile)
        backend = PlaywrightBackend(profile, **kwargs)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.aclose()


@pytest.fixture
async def playwright_backend(
    tmp_path: Path, sites: DemoSites, chromium_path: str
) -> AsyncIterator[BackendFactory]:
    """A factory of PlaywrightBackends on fresh tmp profiles, wired to ``sites``.

    ``make()`` gives a new profile each call; ``make(profile_dir)`` reuses one. Every
    backend made is closed (browser and driver) when the test ends.
    """
    async for make in _backends(tmp_path, sites, chromium_path, None):
        yield make


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def playwright_driver() -> AsyncIterator[Playwright]:
    """One started Playwright driver for a file's tests, on the file's event loop (only for
    files whose tests run on it: ``pytest.mark.asyncio(loop_scope="module")``)."""
    async with async_playwright() as driver:
        yield driver


@pytest_asyncio.fixture(loop_scope="module")
async def shared_driver_backend(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sites: DemoSites,
    chromium_path: str,
    playwright_driver: Playwright,
) -> AsyncIterator[BackendFactory]:
    """:func:`playwright_backend` whose backends share the file's :func:`playwright_driver`
    (closed browsers, the driver kept): a file imports it as ``playwright_backend``."""
    marker = request.node.get_closest_marker("asyncio")
    on_its_loop = marker is not None and marker.kwargs.get("loop_scope") == "module"
    if inspect.iscoroutinefunction(getattr(request.node, "obj", None)) and not on_its_loop:
        pytest.fail(
            f"{request.node.nodeid}: a shared driver needs the test on the file's loop "
            "(tests/conftest.py puts there the async tests of files that opt in)",
            pytrace=False,
        )
    async for make in _backends(tmp_path, sites, chromium_path, playwright_driver):
        yield make


@pytest.fixture(scope="session")
def sso_sites() -> Iterator[SsoSites]:
    """The single sign-on sites (identity provider, app, wiki) in one Node process, shared by
    the test session; skip (fail under CI) without Node or its modules."""
    sites = SsoSites()
    try:
        sites.start()
    except SsoSitesError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the SSO sites could not be started: {exc}", pytrace=False)
        pytest.skip(f"the SSO sites could not be started: {exc}")
    try:
        yield sites
    finally:
        sites.stop()


@pytest.fixture
def sso_backend(playwright_backend: BackendFactory, sso_sites: SsoSites) -> BackendFactory:
    """A factory of test browsers that reach :func:`sso_sites` (fresh profile each call unless
    given one; third-party cookies sent, the throwaway certificate trusted)."""

    def make(profile_dir: Path | None = None, **kwargs: Any) -> PlaywrightBackend:
        kwargs.setdefault("host_resolver_rules", sso_sites.host_resolver_rules)
        return playwright_backend(profile_dir, **kwargs)

    return make


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TemporaryPostgres]:
    """One throwaway PostgreSQL cluster for the session; skip (fail under CI) without one."""
    server = TemporaryPostgres()
    try:
        server.start()
    except TemporaryPostgresError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL could not be started: {exc}", pytrace=False)
        pytest.skip(f"PostgreSQL could not be started: {exc}")
    try:
        yield server
    finally:
        server.stop()


class StallingSite:
    """A local site whose /page-a never fires ``load``: its image (``/hang``) is held
    unanswered until the test ends. ``hanging`` counts image requests being held."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.hanging = 0


@pytest.fixture
def stalling_site() -> Iterator[StallingSite]:
    """A :class:`StallingSite` on 127.0.0.1, shut down (its held requests let go) after."""
    released = threading.Event()
    site = StallingSite("")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/hang":
                site.hanging += 1
                released.wait(60)  # holds the image request until the test ends
                return
            title = "Page A" if self.path == "/page-a" else "Page B"
            image = "<img src='/hang'>" if self.path == "/page-a" else ""
            body = f"<title>{title}</title><body>{title}{image}</body>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        released.set()
        server.shutdown()
        server.server_close()


#: The files that take longest, longest first: ``python scripts/slowest_files.py junit.xml``
#: over a full run's junit report (this one: CI's of December 7, 2026, before the Chromium
#: files shared one driver each). Under ``make test`` pytest-xdist hands out whole files
#: (``--dist loadfile``) in collection order (``--no-loadscope-reorder``): these start
#: first, so the run ends on short files rather than one worker finishing a two-minute file
#: alone while the other waits. Its own ordering, by test count, would put most of them last.
SLOWEST_FILES = (
    "tests/integrations/test_temporal_faults.py",  # 186 s
    "tests/integrations/test_dbos_faults.py",  # about 150 s (new since that run)
    "tests/docs/test_wheel.py",  # 148 s
    "tests/guard/test_boundary_redteam.py",  # 146 s
    "tests/real/test_otp_renewal_on_chromium.py",  # 94 s
    "tests/integrations/test_dbos_recovery.py",  # 88 s
    "tests/real/test_chaos_login_truth.py",  # 85 s
    "tests/mcp/test_mcp_auth.py",  # 84 s
    "tests/real/test_renewal_on_chromium.py",  # 81 s
    "tests/guard/test_worker_websockets.py",  # 73 s
    "tests/guard/test_agent_boundary.py",  # 69 s
    "tests/cdp/test_cdp_backend.py",  # 63 s
    "tests/contract/test_backend_contract.py",  # 60 s
    "tests/guard/test_guard_chromium.py",  # 51 s
    "tests/docs/test_guides.py",  # 50 s
    "tests/test_cli_first_hour.py",  # 47 s
    "tests/mcp/test_mcp_tools.py",  # 42 s
    "tests/console/test_live_view.py",  # 40 s
    "tests/real/test_tab_url_truth.py",  # 39 s
    "tests/real/test_storage_login_evidence_on_chromium.py",  # 39 s
    "tests/cdp/test_rebind.py",  # 38 s
    "tests/integrations/test_dbos.py",  # 36 s
    "tests/real/test_tabs_on_chromium.py",  # 36 s
    "tests/real/test_chaos_browser_kill.py",  # 35 s
    "tests/real/test_keeper_on_chromium.py",  # 35 s
    "tests/guard/test_sso_credentials.py",  # 34 s
    "tests/test_playwright_backend.py",  # 34 s
    "tests/integrations/test_temporal_agent.py",  # 34 s
    "tests/mcp/test_mcp_turns.py",  # 33 s
    "tests/integrations/test_dbos_agent.py",  # 30 s
    "tests/jobs/test_pool_workers.py",  # 28 s
    "tests/mcp/test_mcp_console_log.py",  # 28 s
    "tests/real/test_login_truth_on_chromium.py",  # 28 s
    "tests/mcp/test_mcp_network_files.py",  # 26 s
    "tests/real/test_sso_sites_on_chromium.py",  # 25 s
    "tests/pool/test_pool_processes.py",  # 25 s
    "tests/guard/test_conversation_tab.py",  # 24 s
    "tests/console/test_replay.py",  # 24 s
    "tests/mcp/test_mcp_page_events.py",  # 23 s
    "tests/keeper/test_state_machine.py",  # 23 s
    "tests/real/test_storage_state_on_chromium.py",  # 23 s
    "tests/store/test_retention.py",  # 23 s
    "tests/real/test_reissue_rules_on_chromium.py",  # 23 s
    "tests/real/test_chaos_sso_truth.py",  # 22 s
    "tests/real/test_clean_close_on_chromium.py",  # 22 s
    "tests/mcp/test_mcp_snapshot_files.py",  # 21 s
    "tests/guard/test_sign_in_window.py",  # 21 s
)


#: The loop an async test of a file sharing one driver runs on (see the module docstring).
ON_THE_FILES_LOOP = pytest.mark.asyncio(loop_scope="module")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the async tests of files that share one driver on the file's event loop; order
    whole files: :data:`SLOWEST_FILES` first, then the rest by test count, most first
    (xdist's own order); within a file the tests keep their order."""
    for item in items:
        module = getattr(item, "module", None)
        shares = getattr(module, "playwright_backend", None) is shared_driver_backend
        if shares and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            # First, so it is the closest marker (auto mode's plain one has no loop scope).
            item.add_marker(ON_THE_FILES_LOOP, append=False)
    counts = Counter(item.nodeid.split("::")[0] for item in items)
    rank = {path: i for i, path in enumerate(SLOWEST_FILES)}

    def key(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        return rank.get(path, len(rank)), -counts[path]

    items.sort(key=key)
