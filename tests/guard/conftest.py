"""Helpers shared by the Guard tests: the billing-owns keeper, its sign-in, login counts, and
the SameSite=None (HTTPS) sites with browsers wired to them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.async_api import Page

from demos.sites import DemoSites
from session_keeper import Grant, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper.seams import BrowserBackend
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory

KEY = bytes(range(32))


@contextlib.contextmanager
def counting_server(
    handler: type[BaseHTTPRequestHandler],
) -> Iterator[tuple[int, list[str]]]:
    """A loopback HTTP server answering with ``handler`` (a stand-in for a console or an
    MCP server): its port, and the list its handler appends each arrival to (the
    handler's ``arrivals``)."""
    arrivals: list[str] = []
    counting = type("Counting", (handler,), {"arrivals": arrivals})
    server = ThreadingHTTPServer(("127.0.0.1", 0), counting)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield int(server.server_address[1]), arrivals
    finally:
        server.shutdown()
        server.server_close()


async def sign_in_billing(keeper: SessionKeeper[Page], sites: LocalSites) -> None:
    """The human signs the billing conversation in to billing.example."""
    await keeper.ensure("billing")
    page = await keeper.unguarded_page("billing", sites.url("billing.example", "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", "correct horse")
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("billing", "billing.example", account="alice")


def billing_keeper(
    backend: BrowserBackend[Page], *grants: Grant, **kwargs: Any
) -> SessionKeeper[Page]:
    """A keeper where billing owns billing.example, plus any other ``grants``."""
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        grants=[Grant("billing", "billing.example"), *grants],
        login_settings=LoginSettings(fingerprint_key=KEY),
        **kwargs,
    )


def research_reads_billing(backend: BrowserBackend[Page], **kwargs: Any) -> SessionKeeper[Page]:
    """A keeper where billing owns billing.example and research may only read it."""
    return billing_keeper(backend, Grant("research", "billing.example", actions={"read"}), **kwargs)


def with_login(sites: LocalSites, mark: int) -> int:
    """Requests to billing.example since ``mark`` that carried the login cookie.

    Favicon fetches are left out: Chromium asks for the granted billing tab's icon
    whenever it likes (with the login, rightly), which made this count flaky.
    """
    return sum(
        1
        for r in sites.requests("billing.example")[mark:]
        if r.cookie("billing_session") is not None and r.path != "/favicon.ico"
    )


@pytest.fixture(scope="session")
def secure_sites() -> Iterator[DemoSites]:
    """The local sites over HTTPS, billing signing in with a ``SameSite=None; Secure`` cookie."""
    with DemoSites(samesite="None") as running:
        yield running


@pytest.fixture
def secure_backend(
    playwright_backend: BackendFactory, secure_sites: LocalSites
) -> Callable[..., PlaywrightBackend]:
    """A factory of test browsers that reach :func:`secure_sites` (and send 3rd-party cookies)."""

    def make(**kwargs: Any) -> PlaywrightBackend:
        kwargs.setdefault("host_resolver_rules", secure_sites.host_resolver_rules)
        return playwright_backend(**kwargs)

    return make
