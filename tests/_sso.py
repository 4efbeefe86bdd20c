"""Helpers shared by the single sign-on tests: a keeper on an SSO browser, a person signing in
at the identity provider, and waiting for what the servers' log or a page shows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from playwright.async_api import Page

from demos.sites.sso import ACCOUNTS, ServerName, SsoSites
from session_keeper import Grant, LoginSettings, SessionKeeper
from session_keeper.seams import BrowserBackend
from session_keeper.testing import FakeClock

KEY = bytes(range(32))


def sso_keeper(
    backend: BrowserBackend[Page], *grants: Grant, clock: FakeClock | None = None, **kwargs: Any
) -> SessionKeeper[Page]:
    """A keeper on ``backend`` with ``grants``, on a fake clock."""
    return SessionKeeper(
        backend,
        clock=clock if clock is not None else FakeClock(),
        grants=list(grants),
        login_settings=LoginSettings(fingerprint_key=KEY),
        **kwargs,
    )


async def type_credentials(page: Page, account: str) -> None:
    """A person types ``account``'s password into the identity provider's form and submits."""
    await page.wait_for_selector("#sign-in")
    assert page.url.startswith("https://idp.example/interaction/"), page.url
    await page.fill("input[name=username]", account)
    await page.fill("input[name=password]", ACCOUNTS[account])
    await page.click("#sign-in")


async def sign_in_by_redirect(page: Page, sites: SsoSites, host: str, account: str) -> None:
    """A person signs ``page`` in to ``host`` through the identity provider's form."""
    await page.goto(sites.url(host, "/login"))
    await type_credentials(page, account)
    await page.wait_for_url(sites.url(host, "/"))


async def cancel_at_idp(page: Page, sites: SsoSites, host: str) -> None:
    """A person starts a sign-in to ``host`` and presses Cancel at the identity provider."""
    await page.goto(sites.url(host, "/login"))
    await page.wait_for_selector("#cancel")
    await page.click("#cancel")
    await page.wait_for_url(sites.url(host, "/callback") + "*")


async def status(page: Page) -> str:
    """The page's ``#status`` line ('Signed in as ada', 'Not signed in', ...)."""
    return (await page.text_content("#status") or "").strip()


async def wait_until(check: Callable[[], bool], within: float = 10.0) -> bool:
    """Poll ``check`` until true or ``within`` seconds pass; return its last answer."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def signed_in(sites: SsoSites, server: ServerName, account: str, since: int) -> bool:
    """Whether ``server`` completed a sign-in of ``account`` after ``since``."""
    return any(
        e.event == "sign-in" and e.account == account for e in sites.served(server, since=since)
    )
