"""A document response's Set-Cookie names are read only where a login or a sign-in can use
them (issue 49): elsewhere no round trip to the driver is made for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from session_keeper import Grant, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

BILLING = "billing.example"


def set_cookies(backend: PlaywrightBackend, conversation: str) -> list[frozenset[str]]:
    """The cookie names noted for each of the conversation's document responses."""
    assert backend.current is not None
    return [d.set_cookies for d in backend.current.documents(conversation)]


async def test_set_cookie_names_are_read_only_in_a_sign_in_or_on_a_signed_in_site(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """No sign-in open and no login on the site: its CSRF cookie's name is not read; in a
    sign-in window the session cookie's is, and on the signed-in site a sign-out's is."""
    backend = playwright_backend(tmp_path / "profile")
    async with SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
        grants=[Grant("billing", BILLING, actions={"read", "write"})],
    ) as keeper:
        await keeper.ensure("billing")
        await keeper.unguarded_page("billing", sites.url(BILLING, "/csrf/login"))
        assert backend.current is not None
        await backend.current.settle()
        assert set_cookies(backend, "billing") == [frozenset()]  # it did set billing_csrf

        await keeper.begin_login("billing", BILLING)
        page = await keeper.unguarded_page("billing", sites.url(BILLING, "/login"))
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", "correct horse")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        await keeper.record_login("billing", BILLING, account="alice")
        assert frozenset({"billing_session"}) in set_cookies(backend, "billing")

        await keeper.unguarded_page("billing", sites.url(BILLING, "/logout"))
        await backend.current.settle()
        assert set_cookies(backend, "billing").count(frozenset({"billing_session"})) == 2
