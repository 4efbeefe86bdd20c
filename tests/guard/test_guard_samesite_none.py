"""The Guard on a site whose login cookie is ``SameSite=None; Secure`` (sent cross-site).

Such cookies (SSO, embedded apps, payment and support widgets) go with requests a
``Lax`` cookie stays away from, so every request path must be watched: workers, and the
very first request of a cross-site frame.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from urllib.parse import quote

import pytest
from playwright.async_api import Page

from session_keeper import Guard, PlaywrightBackend
from session_keeper.testing import LocalSites

from ..conftest import shared_driver_backend
from .conftest import billing_keeper, sign_in_billing

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

LOGIN = "billing_session"


def with_login(sites: LocalSites, mark: int) -> list[str]:
    """Queries of the requests to billing.example since ``mark`` that carried the login."""
    return [
        r.query
        for r in sites.requests("billing.example")[mark:]
        if r.cookie(LOGIN) is not None and r.path != "/favicon.ico"
    ]


async def load_frame_attack(page: Page, sites: LocalSites) -> None:
    """docs.example embeds todo.example, whose first request redirects into billing."""
    await page.goto(sites.url("docs.example", "/attack/frame"))
    image = page.frame_locator("#frame").locator("#img")
    await image.wait_for(state="attached")
    await image.evaluate(
        "(img) => img.complete || new Promise(ok => { img.onload = img.onerror = ok; })"
    )
    await asyncio.sleep(0.3)


async def test_without_a_guard_the_samesite_none_login_goes_cross_site(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """Control: the test site's login does ride on cross-site requests (a frame's first one)."""
    keeper = billing_keeper(secure_backend())
    async with keeper:
        await sign_in_billing(keeper, secure_sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", secure_sites.url("docs.example", "/"))
        mark = len(secure_sites.requests("billing.example"))
        await load_frame_attack(page, secure_sites)
        assert with_login(secure_sites, mark) == ["frameimg=1"]


async def test_a_cross_site_frames_first_request_cannot_redirect_the_login_out(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """The first request of a frame in its own renderer is watched: its redirect hop is refused."""
    keeper = billing_keeper(secure_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, secure_sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", secure_sites.url("docs.example", "/"))
        mark = len(secure_sites.requests("billing.example"))
        await load_frame_attack(page, secure_sites)
        assert with_login(secure_sites, mark) == []
        assert secure_sites.requests("billing.example")[mark:] == []
    hop = [b for b in guard.blocks if b.conversation == "research" and b.redirect]
    assert [(b.origin, b.path) for b in hop] == [("https://billing.example", "/invoices")]


@pytest.mark.parametrize("kind", ["image", "fetch"])
async def test_a_login_recorded_while_a_page_is_open_guards_that_pages_redirect_hops(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites, kind: str
) -> None:
    """A page opened before the sign-in pauses the new login's hosts once record_login returns:
    a harmless request it makes then, redirected into billing, is refused at the hop."""
    keeper = billing_keeper(secure_backend())
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        # Open and watched while nothing is signed in: it pauses no billing request yet.
        page = await keeper.unguarded_page("research", secure_sites.url("docs.example", "/"))
        await sign_in_billing(keeper, secure_sites)
        mark = len(secure_sites.requests("billing.example"))
        # The redirect's own URL does not name billing.example: only its hop goes there.
        target = quote(secure_sites.url("billing.example", "/invoices"), safe="")
        hidden = secure_sites.url("docs.example", "/redirect") + "?to=" + target.replace(".", "%2E")
        script = {
            "image": "(u) => new Promise(ok => { const i = new Image();"
            " i.onload = i.onerror = ok; i.src = u; })",
            "fetch": "(u) => fetch(u, {mode: 'no-cors', credentials: 'include'}).catch(() => 0)",
        }[kind]
        await page.evaluate(script, hidden)
        await asyncio.sleep(0.3)
        assert with_login(secure_sites, mark) == []
        assert secure_sites.requests("billing.example")[mark:] == []
    hop = [b for b in guard.blocks if b.conversation == "research" and b.redirect]
    assert [(b.origin, b.path) for b in hop] == [("https://billing.example", "/invoices")]


async def test_a_dedicated_workers_redirect_into_a_signed_in_site_is_refused(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """A worker's fetch of an open redirect into billing: the hop is refused, nothing arrives."""
    keeper = billing_keeper(secure_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, secure_sites)
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", secure_sites.url("docs.example", "/"))
        mark = len(secure_sites.requests("billing.example"))
        hop = secure_sites.url("docs.example", "/redirect?to=") + secure_sites.url(
            "billing.example", "/invoices"
        )
        await page.evaluate(
            "(u) => new Promise(done => { const w = new Worker(URL.createObjectURL(new Blob(["
            "`fetch('${u}', {credentials: 'include', mode: 'no-cors'})"
            ".then(() => postMessage(1), () => postMessage(0))`]))); w.onmessage = done; })",
            hop,
        )
        await asyncio.sleep(0.3)
        assert secure_sites.requests("billing.example")[mark:] == []
    assert any(b.redirect and b.origin == "https://billing.example" for b in guard.blocks)


async def test_shared_workers_are_not_offered_to_pages(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """No page's interception sees a shared worker's requests: the browser offers none."""
    keeper = billing_keeper(secure_backend())
    Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", secure_sites.url("docs.example", "/"))
        assert await page.evaluate("typeof SharedWorker") == "undefined"
