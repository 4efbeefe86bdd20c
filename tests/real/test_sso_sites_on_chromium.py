"""The single sign-on test site works on real Chromium through the keeper (no Guard): a sign-in
by redirect, the second relying party signed in silently by redirect, popup and hidden
iframe, a cancelled sign-in, RP-initiated logout and a server-side sign-out — each counted
in the servers' own log of the account they served."""

from __future__ import annotations

import pytest
from playwright.async_api import Page

from demos.sites.sso import SsoSites
from session_keeper import SessionKeeper

from .._sso import cancel_at_idp, sign_in_by_redirect, signed_in, sso_keeper, status, wait_until
from ..conftest import BackendFactory

pytestmark = pytest.mark.chromium


async def app_signed_in(keeper: SessionKeeper[Page], sso_sites: SsoSites) -> Page:
    """ada signs the ``person`` conversation in to app.example by redirect; its page."""
    await keeper.ensure("person")
    page = await keeper.unguarded_page("person")
    await sign_in_by_redirect(page, sso_sites, "app.example", "ada")
    return page


async def test_a_redirect_sign_in_through_the_idp_serves_the_app_as_the_account(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """ada's password at the IdP signs app in: the IdP logs the login and a code for app, app
    logs the sign-in, then serves / and /api/me as ada; nobody else signed in."""
    mark = sso_sites.mark()
    async with sso_keeper(sso_backend()) as keeper:
        page = await app_signed_in(keeper, sso_sites)
        assert await status(page) == "Signed in as ada"
        assert await page.evaluate("localStorage.getItem('token') !== null")
        me = await page.evaluate("fetch('/api/me').then(r => r.json())")
    assert me == {"account": "ada"}
    idp = [(e.event, e.account, e.client) for e in sso_sites.served("idp", since=mark) if e.event]
    assert ("login-form", None, "app") in idp and ("login", "ada", None) in idp
    assert ("code", "ada", "app") in idp  # the resumed authorization, as ada
    app = sso_sites.served("app", since=mark)
    assert [(e.path, e.account) for e in app if e.event == "sign-in"] == [("/callback", "ada")]
    assert [e.account for e in app if e.path == "/api/me"] == ["ada"]
    assert sso_sites.accounts_served("app", since=mark) == {"ada"}
    assert sso_sites.accounts_served("wiki", since=mark) == set()


@pytest.mark.parametrize("way", ["redirect", "popup", "iframe"])
async def test_the_idp_session_signs_wiki_in_without_credentials(
    sso_backend: BackendFactory, sso_sites: SsoSites, way: str
) -> None:
    """After app's sign-in, wiki signs ada in with no password asked (no login form at the
    IdP), by redirect, by a popup that posts back, and by a hidden prompt=none iframe."""
    async with sso_keeper(sso_backend()) as keeper:
        await app_signed_in(keeper, sso_sites)
        mark = sso_sites.mark()
        page = await keeper.unguarded_page("person")
        if way == "redirect":
            await page.goto(sso_sites.url("wiki.example", "/login"))
            await page.wait_for_url(sso_sites.url("wiki.example", "/"))
        elif way == "popup":
            await page.goto(sso_sites.url("wiki.example", "/popup"))
            async with page.expect_popup():
                await page.click("#popup-sign-in")
        else:
            await page.goto(sso_sites.url("wiki.example", "/silent"))
        assert await wait_until(lambda: signed_in(sso_sites, "wiki", "ada", mark))
        await page.wait_for_selector("#status:has-text('Signed in as ada')")
    wiki = sso_sites.served("wiki", since=mark)
    expected = {"redirect": "login-redirect", "popup": "login-popup", "iframe": "login-frame"}
    assert [e.event for e in wiki if e.path == "/login"] == [expected[way]]
    idp = sso_sites.served("idp", since=mark)
    assert [e.event for e in idp if e.event in ("login-form", "login")] == []
    authorize = [(e.client, e.account, e.prompt, e.event) for e in idp if e.path == "/auth"]
    prompt = "none" if way == "iframe" else None
    assert authorize == [("wiki", "ada", prompt, "code")]


async def test_a_silent_iframe_without_an_idp_session_reports_login_required(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """prompt=none with nobody signed in at the IdP: the iframe's callback tells the parent
    login_required, wiki signs nobody in and nothing is served as anyone."""
    mark = sso_sites.mark()
    async with sso_keeper(sso_backend()) as keeper:
        await keeper.ensure("person")
        page = await keeper.unguarded_page("person", sso_sites.url("wiki.example", "/silent"))
        await page.wait_for_selector("#result:has-text('login_required')")
        assert await status(page) == "Not signed in"
    idp = sso_sites.served("idp", since=mark)
    assert [e.event for e in idp if e.path == "/auth"] == ["error:login_required"]
    assert [e.event for e in sso_sites.served("wiki", since=mark) if e.event] == [
        "login-frame",
        "sign-in-failed",
    ]
    assert {e.account for e in sso_sites.served(since=mark)} == {None}


async def test_a_sign_in_cancelled_at_the_idp_ends_on_sign_in_failed_with_no_session(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """Cancel at the IdP: app's callback answers 200 "Sign-in failed" (access_denied), app
    keeps serving nobody, and the IdP has no session for anyone."""
    mark = sso_sites.mark()
    async with sso_keeper(sso_backend()) as keeper:
        await keeper.ensure("person")
        page = await keeper.unguarded_page("person")
        await cancel_at_idp(page, sso_sites, "app.example")
        assert await page.title() == "Sign-in failed"
        assert "access_denied" in await status(page)
        me = await page.evaluate("fetch('/api/me').then(r => r.json())")
        assert me == {"account": None}
    callback = [e for e in sso_sites.served("app", since=mark) if e.path == "/callback"]
    assert [(e.status, e.event, e.account) for e in callback] == [(200, "sign-in-failed", None)]
    assert [e.event for e in sso_sites.served("idp", since=mark) if e.event == "cancel"] == [
        "cancel"
    ]
    assert {e.account for e in sso_sites.served(since=mark)} == {None}


async def test_after_a_server_side_sign_out_a_wiki_sign_in_asks_for_credentials(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """sign_out_everywhere ends ada's IdP session: the browser still holds the cookie, but
    wiki's sign-in now shows the IdP's login form and no code is issued as ada."""
    async with sso_keeper(sso_backend()) as keeper:
        await app_signed_in(keeper, sso_sites)
        assert sso_sites.sign_out_everywhere("ada") >= 1
        mark = sso_sites.mark()
        page = await keeper.unguarded_page("person", sso_sites.url("wiki.example", "/login"))
        await page.wait_for_selector("#sign-in")
        assert page.url.startswith("https://idp.example/interaction/")
    idp = sso_sites.served("idp", since=mark)
    assert [(e.event, e.client) for e in idp if e.event == "login-form"] == [("login-form", "wiki")]
    assert sso_sites.accounts_served("idp", since=mark) == set()
    assert sso_sites.accounts_served("wiki", since=mark) == set()


async def test_rp_initiated_logout_ends_the_idp_session_too(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """app's /logout signs app out and ends the IdP session (RP-initiated logout): back on
    app, "Not signed in", and a wiki sign-in asks for credentials."""
    async with sso_keeper(sso_backend()) as keeper:
        page = await app_signed_in(keeper, sso_sites)
        mark = sso_sites.mark()
        await page.click("#sign-out")
        await page.wait_for_url(sso_sites.url("app.example", "/"))
        assert await status(page) == "Not signed in"
        await page.goto(sso_sites.url("wiki.example", "/login"))
        await page.wait_for_selector("#sign-in")
    idp = sso_sites.served("idp", since=mark)
    assert any(e.path.startswith("/session/end") for e in idp)
    assert [e.client for e in idp if e.event == "login-form"] == ["wiki"]
    assert sso_sites.accounts_served("wiki", since=mark) == set()
