"""A credential has an owner from the instant it exists: what a sign-in sets (on the site
and on every host its pages reach, such as an identity provider) is guarded for the
conversation signing in before ``record_login``, recorded with the login, cleared with it,
and discarded when the sign-in ends without one. Counted on the sites' own request logs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from playwright.async_api import Page

from session_keeper import Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import NavigationBlocked
from session_keeper.seams import BrowserBackend
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import KEY

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

BILLING = "billing.example"
IDP = "sso.example"  # stands for an identity provider: a persistent session cookie


def keeper_for(backend: BrowserBackend[Page]) -> SessionKeeper[Page]:
    """billing owns billing.example; research holds no grant at all."""
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        grants=[Grant("billing", BILLING)],
        login_settings=LoginSettings(fingerprint_key=KEY),
    )


async def person_signs_in_to_billing(page: Page) -> None:
    """What the person types on billing's sign-in form (the test types it for them)."""
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", "correct horse")
    async with page.expect_navigation():
        await page.click("button[type=submit]")


def carried(sites: LocalSites, host: str, cookie: str, mark: int) -> list[str]:
    """Paths of requests to ``host`` since ``mark`` that carried ``cookie`` (no favicons)."""
    return [
        r.path
        for r in sites.requests(host)[mark:]
        if r.cookie(cookie) is not None and r.path != "/favicon.ico"
    ]


async def test_a_cookie_set_during_a_sign_in_is_guarded_before_record_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Between the person's sign-in and ``record_login``, a conversation with no grant that
    navigates to the site carries nothing: the credential was the signer's from its first
    instant, not from when the keeper was told."""
    keeper = keeper_for(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
        await keeper.begin_login("billing", BILLING)
        assert [w.site for w in keeper.sign_ins()] == [BILLING]
        page = await keeper.unguarded_page("billing")
        await person_signs_in_to_billing(page)
        mark = len(sites.requests(BILLING))
        await keeper.ensure("research")
        with pytest.raises(NavigationBlocked):
            await keeper.tab("research", sites.url(BILLING, "/invoices"))
        assert carried(sites, BILLING, "billing_session", mark) == []
        assert {b.rule for b in guard.blocks if b.conversation == "research"} == {"sign_in"}
        await keeper.record_login("billing", BILLING, account="alice")
        assert keeper.sign_ins() == ()
        await tab.goto(sites.url(BILLING, "/invoices"))
        assert carried(sites, BILLING, "billing_session", mark) == ["/invoices"]
        with pytest.raises(NavigationBlocked):
            await keeper.tab("research", sites.url(BILLING, "/invoices"))
        assert carried(sites, BILLING, "billing_session", mark) == ["/invoices"]


async def test_a_page_of_another_conversation_is_taken_off_the_origin_a_sign_in_begins_on(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A page of a conversation with no grant that sits on the site before the sign-in is
    moved off it (to the block page) before ``begin_login`` returns: its script can read
    no storage or cookie the sign-in sets there."""
    keeper = keeper_for(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("research")
        other = await keeper.unguarded_page("research", sites.url(BILLING, "/login"))
        assert other.url.startswith(sites.url(BILLING, "/"))
        await keeper.ensure("billing")
        await keeper.tab("billing", sites.url(BILLING, "/login"))
        await keeper.begin_login("billing", BILLING)
        assert not other.url.startswith(sites.url(BILLING, "/"))
        assert "Blocked by session_keeper" in await other.content()
        assert any(b.conversation == "research" and b.rule == "sign_in" for b in guard.blocks)


async def test_a_cancelled_sign_in_leaves_no_credential_in_the_jar(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """``cancel_login`` deletes what the sign-in set (names returned, never values); the
    site's own log then sees the owner's next request signed out."""
    backend = playwright_backend()
    keeper = keeper_for(backend)
    Guard(keeper)
    async with keeper:
        await keeper.ensure("billing")
        await keeper.tab("billing", sites.url(BILLING, "/login"))
        await keeper.begin_login("billing", BILLING)
        await person_signs_in_to_billing(await keeper.unguarded_page("billing"))
        assert backend.current is not None
        assert "billing_session" in {c.name for c in await backend.current.cookies()}
        assert await keeper.cancel_login("billing", BILLING) == ("billing_session",)
        assert keeper.sign_ins() == ()
        assert "billing_session" not in {c.name for c in await backend.current.cookies()}
        assert await keeper.cancel_login("billing", BILLING) == ()


async def test_a_sign_in_nobody_finishes_is_discarded_by_the_sweep(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A sign-in in progress past ``LoginSettings.sign_in_timeout`` is ended by the sweep:
    its cookie leaves the jar and nothing is recorded."""
    backend = playwright_backend()
    clock = FakeClock()
    keeper = SessionKeeper(
        backend,
        clock=clock,
        grants=[Grant("billing", BILLING)],
        login_settings=LoginSettings(fingerprint_key=KEY, sign_in_timeout=timedelta(minutes=5)),
    )
    Guard(keeper)
    async with keeper:
        await keeper.ensure("billing")
        await keeper.tab("billing", sites.url(BILLING, "/login"))
        await keeper.begin_login("billing", BILLING)
        await person_signs_in_to_billing(await keeper.unguarded_page("billing"))
        clock.advance(timedelta(minutes=4))
        await keeper.sweep()
        assert [w.site for w in keeper.sign_ins()] == [BILLING]
        clock.advance(timedelta(minutes=2))
        await keeper.sweep()
        assert keeper.sign_ins() == () and keeper.logins() == ()
        assert backend.current is not None
        assert "billing_session" not in {c.name for c in await backend.current.cookies()}


async def sign_in_through_the_provider(keeper: SessionKeeper[Page], sites: LocalSites) -> None:
    """billing's sign-in passes through sso.example (its session cookie) and ends on
    billing's own form, as a sign-in through an identity provider does."""
    await keeper.ensure("billing")
    tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
    await keeper.begin_login("billing", BILLING)
    await tab.goto(sites.url(IDP, "/login"))
    page = await keeper.unguarded_page("billing")
    await page.fill("input[name=account]", "alice")
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await tab.goto(sites.url(BILLING, "/login"))
    await person_signs_in_to_billing(page)


async def test_an_identity_providers_session_set_during_a_sign_in_is_part_of_the_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The provider's cookie set during billing's sign-in is recorded with billing's login:
    a conversation with no grant reaches the provider with nothing (its log), the owner
    still does."""
    keeper = keeper_for(playwright_backend())
    Guard(keeper)
    async with keeper:
        await sign_in_through_the_provider(keeper, sites)
        record = await keeper.record_login("billing", BILLING, account="alice")
        assert {c.name for c in record.cookies} == {"billing_session", "sso_session"}
        mark = len(sites.requests(IDP))
        await keeper.ensure("research")
        with pytest.raises(NavigationBlocked):
            await keeper.tab("research", sites.url(IDP, "/whoami"))
        assert carried(sites, IDP, "sso_session", mark) == []
        tab = await keeper.tab("billing", sites.url(IDP, "/whoami"))
        assert "alice" in await tab.content()
        assert carried(sites, IDP, "sso_session", mark) == ["/whoami"]


async def test_the_sweep_clears_the_whole_sign_in_chain(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """A swept profile holds no live credential of a login's chain: the next browser is not
    signed in at the identity provider either (the provider's own log)."""
    profile = tmp_path / "profile"
    backend = playwright_backend(profile)
    keeper = keeper_for(backend)
    Guard(keeper)
    async with keeper:
        await sign_in_through_the_provider(keeper, sites)
        await keeper.record_login("billing", BILLING, account="alice")
        await keeper.sweep(close_browser=True)
        turn = await keeper.ensure("billing")
        assert turn.restarted
        assert backend.current is not None
        jar = {c.name for c in await backend.current.cookies()}
        assert not jar & {"sso_session", "billing_session"}


async def test_a_protected_site_lets_its_grant_holders_sign_in(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """``Guard(protect=[site])`` keeps everyone but the site's grant holders off it; a grant
    holder reaches its sign-in page before any login exists."""
    keeper = keeper_for(playwright_backend())
    Guard(keeper, protect=[BILLING])
    async with keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url(BILLING, "/login"))
        assert "password" in await tab.content()
        await keeper.ensure("research")
        with pytest.raises(NavigationBlocked):
            await keeper.tab("research", sites.url(BILLING, "/login"))
