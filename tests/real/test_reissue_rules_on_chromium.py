"""Which new values of a login cookie are a re-issue of the same login, on real Chromium.

``reissue.example`` gives its ``remember`` cookie a new value, same account, on the first
request of each browser session. A value the keeper saw set in a page view of a conversation
the login serves, with no sign-in open, is the same login; one set while a sign-in to the
site is open, or in the page of a conversation the login does not serve, may be another
account's: the relaunch after it says ``replaced``, as it always did.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Page

from session_keeper import Grant, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper.testing import FakeClock, LocalSites
from session_keeper.testing._login_sites import SHAPE_PASSWORD

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))
SITE = "reissue.example"


async def signed_in_and_relaunched(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> tuple[SessionKeeper[Page], PlaywrightBackend]:
    """A keeper (no probe) where "owner" signed in to reissue.example and "reader" holds a
    read grant, after one clean relaunch: the site's next request re-issues the cookie."""
    backend = playwright_backend(tmp_path / "profile")
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY, session_cookies={SITE: ["remember"]}),
        grants=[Grant("owner", SITE, actions={"read", "write"}), Grant("reader", SITE)],
    )
    await keeper.__aenter__()
    await keeper.ensure("owner")
    await keeper.begin_login("owner", SITE)
    page = await keeper.unguarded_page("owner", sites.url(SITE, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", SHAPE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("owner", SITE, account="alice")
    assert backend.current is not None
    await backend.current.close()
    turn = await keeper.ensure("owner")
    assert turn.revalidate == (SITE,)
    return keeper, backend


async def relaunched_cause(
    keeper: SessionKeeper[Page], backend: PlaywrightBackend, who: str
) -> str | None:
    """Close the browser cleanly; the cause ``who`` is told for the login (None: not lost)."""
    assert backend.current is not None
    await backend.current.close()
    turn = await keeper.ensure(who)
    return next((x.cause for x in turn.lost_logins if x.name == SITE), None)


@pytest.mark.parametrize("who", ["owner", "reader"])
async def test_a_reissue_in_a_page_view_of_the_owner_or_a_grant_holder_is_the_same_login(
    who: str, playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """The owner's or a grant holder's page view re-issues the cookie: the relaunch after it
    says survived, and the site serves alice."""
    keeper, backend = await signed_in_and_relaunched(playwright_backend, sites, tmp_path)
    try:
        await keeper.ensure(who)
        mark = len(sites.served(SITE))
        await keeper.unguarded_page(who, sites.url(SITE, "/account"))
        assert sites.served(SITE)[mark:] == [("/account", "alice")]
        assert await relaunched_cause(keeper, backend, "owner") is None
        page = await keeper.unguarded_page("owner", sites.url(SITE, "/whoami"))
        assert "alice" in await page.inner_text("body")
    finally:
        await keeper.aclose()


async def test_a_new_value_set_while_a_sign_in_is_open_is_another_sign_in(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """With begin_login() open for the site, a new value may be another account's: replaced."""
    keeper, backend = await signed_in_and_relaunched(playwright_backend, sites, tmp_path)
    try:
        await keeper.begin_login("owner", SITE)
        await keeper.unguarded_page("owner", sites.url(SITE, "/account"))
        assert await relaunched_cause(keeper, backend, "owner") == "replaced"
    finally:
        await keeper.aclose()


async def test_a_new_value_set_in_a_page_the_login_does_not_serve_is_another_sign_in(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """No Guard here: a conversation without a grant reaches the site, which re-issues the
    cookie in its page; that value is not the owner's login for sure: replaced."""
    keeper, backend = await signed_in_and_relaunched(playwright_backend, sites, tmp_path)
    try:
        await keeper.ensure("stranger")
        await keeper.unguarded_page("stranger", sites.url(SITE, "/account"))
        assert await relaunched_cause(keeper, backend, "owner") == "replaced"
    finally:
        await keeper.aclose()
