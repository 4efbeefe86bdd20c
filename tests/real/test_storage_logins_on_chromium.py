"""Logins kept in web storage on real Chromium: what a read sees, what a restart keeps.

Measured here (Debian Chromium 156, 2 loaded cores; the site's own log as the truth): a
``localStorage`` token survived 8 of 8 clean closes and 1 of 8 SIGKILLs soon after the
sign-in (Chromium writes it to the profile later); a ``sessionStorage`` token survived 0 of
8 restarts of either kind. Only the deterministic outcomes are asserted below.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from session_keeper._browser.playwright_session import PlaywrightSession
from session_keeper._model.fingerprint import Fingerprinter
from session_keeper._model.storage import normalize_origin
from session_keeper.errors import InvalidArgument
from session_keeper.testing import LocalSites
from session_keeper.testing._login_sites import SHAPE_PASSWORD, SPA_TOKEN_KEY

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

SPA = "spa.example"
SPA_SESSION = "spa-session.example"
FP = Fingerprinter(bytes(range(32)))


async def spa_sign_in(session: PlaywrightSession, sites: LocalSites, host: str) -> Page:
    """Sign in through the SPA's script; the page shows the account its API answered."""
    page = await session.open_page("spa")
    await page.goto(sites.url(host, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", SHAPE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    assert await app_account(page) == "alice"  # the premise: signed in
    return page


async def app_account(page: Page) -> str | None:
    """What the SPA's /app page shows once its API call was answered."""
    await page.wait_for_function("document.getElementById('account').textContent !== '...'")
    return await page.text_content("#account")


def whoami_served(sites: LocalSites, host: str, mark: int) -> list[str | None]:
    """The accounts the site served /api/whoami as since ``mark`` (the site's own word)."""
    return [account for path, account in sites.served(host)[mark:] if path == "/api/whoami"]


async def test_a_storage_read_sees_the_token_key_and_sends_nothing_to_the_site(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """After an SPA sign-in the read finds spa_token in localStorage; the site gets no
    request from the read, and neither the item's nor its fingerprint's repr shows the value."""
    session = await playwright_backend().launch()
    await spa_sign_in(session, sites, SPA)
    origin = normalize_origin(sites.url(SPA))
    mark = len(sites.requests(SPA))
    items = await session.storage(origin)
    assert len(sites.requests(SPA)) == mark
    assert [(i.area, i.key) for i in items] == [("local", SPA_TOKEN_KEY)]
    token = items[0].value
    assert len(token) > 20  # the canary: the real token the site issued
    assert token not in repr(items[0]) and token not in repr(FP.storage_fingerprint(items[0]))
    with pytest.raises(InvalidArgument):
        await session.storage("file:///etc")


async def test_a_localstorage_login_survives_a_clean_close(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Closed cleanly right after the sign-in, the relaunched browser holds the same token
    (same fingerprint) and the site serves its API as alice again."""
    backend = playwright_backend()
    session = await backend.launch()
    await spa_sign_in(session, sites, SPA)
    origin = normalize_origin(sites.url(SPA))
    before = [FP.storage_fingerprint(i) for i in await session.storage(origin)]
    await session.close()
    session = await backend.launch()
    assert [FP.storage_fingerprint(i) for i in await session.storage(origin)] == before
    page = await session.open_page("spa")
    mark = len(sites.served(SPA))
    await page.goto(sites.url(SPA, "/app"))
    assert await app_account(page) == "alice"
    assert whoami_served(sites, SPA, mark) == ["alice"]


async def test_a_sessionstorage_login_is_gone_after_a_clean_restart(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """spa-session.example's token lives in the tab: the read finds it there, and after a
    clean close and relaunch it is nowhere and the site serves the API signed out."""
    backend = playwright_backend()
    session = await backend.launch()
    await spa_sign_in(session, sites, SPA_SESSION)
    origin = normalize_origin(sites.url(SPA_SESSION))
    items = await session.storage(origin, "spa")
    assert [(i.area, i.key) for i in items] == [("session", SPA_TOKEN_KEY)]
    await session.close()
    session = await backend.launch()
    page = await session.open_page("spa")
    mark = len(sites.served(SPA_SESSION))
    await page.goto(sites.url(SPA_SESSION, "/app"))
    assert await app_account(page) == "signed out"
    assert whoami_served(sites, SPA_SESSION, mark) == [None]
    assert list(await session.storage(origin, "spa")) == []
