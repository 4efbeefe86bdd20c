"""A login the keeper does not know is protected: a jar at launch with a granted site's
cookies that no record explains is blocked for every conversation until attributed."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Page

from session_keeper import Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import InvalidArgument, NavigationBlocked
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import KEY

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

SSO = "sso.example"


async def sign_in_sso(keeper: SessionKeeper[Page], sites: LocalSites) -> None:
    """A human signs in to sso.example (a persistent cookie) in an earlier process."""
    await keeper.ensure("mail")
    page = await keeper.unguarded_page("mail", sites.url(SSO, "/login"))
    await page.fill("input[name=account]", "alice")
    async with page.expect_navigation():
        await page.click("button[type=submit]")


def carried(sites: LocalSites, mark: int) -> list[str]:
    """Paths of requests to sso.example since ``mark`` that carried its login cookie."""
    return [
        r.path
        for r in sites.requests(SSO)[mark:]
        if r.cookie("sso_session") is not None and r.path != "/favicon.ico"
    ]


async def test_a_login_left_in_the_profile_by_an_earlier_process_is_blocked_for_everyone(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """A new keeper without a store finds sso.example's login in the jar: no conversation's
    request carries it (grant or none) until a person attributes it; then only the grant's."""
    profile = tmp_path / "profile"
    grants = [Grant("mail", SSO)]
    earlier = SessionKeeper(
        playwright_backend(profile),
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=grants,
    )
    async with earlier:
        await sign_in_sso(earlier, sites)
    backend = playwright_backend(profile)
    keeper = SessionKeeper(
        backend, clock=FakeClock(), login_settings=LoginSettings(fingerprint_key=KEY), grants=grants
    )
    guard = Guard(keeper)
    async with keeper:
        await keeper.ensure("mail")
        assert backend.current is not None
        jar = await backend.current.cookies()
        assert [c.name for c in jar if c.applies_to(SSO)] == ["sso_session"]  # the premise
        assert list(keeper.unexplained_logins()) == [SSO]
        assert keeper.logins() == () and keeper.lost_logins() == ()
        mark = len(sites.requests(SSO))
        for conversation in ("mail", "research"):
            await keeper.ensure(conversation)
            with pytest.raises(NavigationBlocked):
                await keeper.tab(conversation, sites.url(SSO, "/whoami"))
        assert carried(sites, mark) == []
        assert {b.rule for b in guard.blocks} == {"unexplained"}
        with pytest.raises(InvalidArgument):
            await keeper.attribute_login("docs.example", owner="mail", by="ann")

        record = await keeper.attribute_login(SSO, owner="mail", by="ann", account="alice")
        assert [c.name for c in record.cookies] == ["sso_session"]
        assert keeper.unexplained_logins() == {}
        tab = await keeper.tab("mail", sites.url(SSO, "/whoami"))
        assert "alice" in await tab.content()
        with pytest.raises(NavigationBlocked):
            await keeper.tab("research", sites.url(SSO, "/whoami"))
        assert carried(sites, mark) == ["/whoami"]
