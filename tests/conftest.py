"""Shared fixtures: one DemoSites server per test session, and real-Chromium backends.

DemoSites is LocalSites plus the demos' pages (catalogue, attack pages, TodoMVC).

The single sign-on sites (``sso_sites``) need Node and their modules (``npm ci``, done by
``scripts/ensure-system-deps.sh``): without them their tests skip, and fail under CI.

Chromium tests need an executable (``find_chromium``). Without one they skip, except
under CI (``CI`` set), where a missing browser is a failure with the finder's message.
"""

from __future__ import annotations

import asyncio
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


@pytest.fixture
async def playwright_backend(
    tmp_path: Path, sites: DemoSites, chromium_path: str
) -> AsyncIterator[BackendFactory]:
    """A factory of PlaywrightBackends on fresh tmp profiles, wired to ``sites``.

    ``make()`` gives a new profile each call; ``make(profile_dir)`` reuses one. Every
    backend made is closed (browser and driver) when the test ends.
    """
    made: list[PlaywrightBackend] = []

    def make(profile_dir: Path | None = None, **kwargs: Any) -> PlaywrightBackend:
        profile = profile_dir if profile_dir is not None else tmp_path / f"profile-{len(made)}"
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


#: The files that take longest, longest first (CI's ``--durations``, December 2026). Under
#: ``make test`` pytest-xdist hands out whole files (``--dist loadfile``) in collection
#: order (``--no-loadscope-reorder``): these start first, so the run ends on short files
#: rather than one worker finishing a two-minute file alone while the other waits. Its own
#: ordering, by test count, would put most of them last (they hold 1 to 16 tests each).
SLOWEST_FILES = (
    "tests/mcp/test_mcp_auth.py",
    "tests/real/test_otp_renewal_on_chromium.py",
    "tests/docs/test_wheel.py",
    "tests/integrations/test_temporal_faults.py",
    "tests/integrations/test_dbos_faults.py",
    "tests/real/test_chaos_login_truth.py",
    "tests/guard/test_guard_chromium.py",
    "tests/console/test_live_view.py",
    "tests/real/test_renewal_on_chromium.py",
    "tests/jobs/test_pool_workers.py",
    "tests/integrations/test_temporal_agent.py",
    "tests/integrations/test_temporal_failover.py",
    "tests/keeper/test_state_machine.py",
    "tests/real/test_clean_close_on_chromium.py",
    "tests/real/test_catalogue_audit.py",
    "tests/pool/test_pool_processes.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order whole files: :data:`SLOWEST_FILES` first, then the rest by test count, most
    first (xdist's own order); within a file the tests keep their order."""
    counts = Counter(item.nodeid.split("::")[0] for item in items)
    rank = {path: i for i, path in enumerate(SLOWEST_FILES)}

    def key(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        return rank.get(path, len(rank)), -counts[path]

    items.sort(key=key)
