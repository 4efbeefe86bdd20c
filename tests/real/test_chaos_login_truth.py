"""Fault rows for logins: what the keeper believes of each kind of site's login after a fault,
against the site's own word, on real Chromium (RELIABILITY.md's "logins" table).

Seven site shapes (``session_keeper.testing``'s login sites and ``sso.example``), each signed
in in one conversation (``totp.example`` by its recipe: password and a TOTP code), then one
fault: a SIGKILL of Chromium, a clean close, the idle sweep (default: it deletes the logins
first), a server-side sign-out followed by a clean restart, or the same with totp.example
answering the sign-in with a "new device" page no recipe knows. Each trial measures, per
site:

- the keeper's belief after ``ensure()``: lost, survived (flagged for re-validation) or
  confirmed (its probe saw the account); for a site with a recipe, lost is then renewed
  (``renew_login``): "renewed", or a human ask when the renewal needs a person;
- the truth: which account the site serves the owner's next request as;
- whether a conversation without a grant got a request with the login to the site;
- after a sweep, whether the profile still signs in (a credential left behind).

A false belief is "lost" while the site serves the account, or "confirmed"/"renewed" while
it does not. "Survived" is the keeper's own uncertainty (re-validate before acting); it is
counted, not failed: without a probe a server-side sign-out cannot be seen from the browser.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from playwright.async_api import Page

from session_keeper import (
    Grant,
    Guard,
    LoginSettings,
    RenewalPolicy,
    SessionKeeper,
)
from session_keeper.errors import NavigationBlocked
from session_keeper.testing import LocalSites
from session_keeper.testing._login_sites import SHAPE_PASSWORD, totp_credentials, totp_recipe

from .._chaos import BROWSER_TRIALS, record
from ..conftest import BackendFactory, shared_driver_backend, sigkill

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [pytest.mark.chromium, pytest.mark.chaos]

KEY = bytes(range(32))
OWNER = "owner"
INTRUDER = "intruder"
#: Site -> its shape, as RELIABILITY.md names it.
SHAPES = {
    "php.example": "session cookie set by the login page, kept at sign-in (probe)",
    "reissue.example": "remember-me cookie re-issued each browser session (probe)",
    "sso.example": "persistent session cookie (no probe)",
    "spa.example": "SPA token in localStorage (no probe)",
    "spa-session.example": "SPA token in sessionStorage (no probe)",
    "spa-idb.example": "SPA token in IndexedDB (no probe)",
    "totp.example": "password + TOTP second factor, renewed by its recipe (probe)",
}
TOTP = "totp.example"
#: totp.example's sign-in as the keeper renews it: password, then a TOTP code.
RECIPE = totp_recipe()
CREDENTIALS = totp_credentials()
FAULTS = ("sigkill", "clean_close", "idle_sweep", "server_signout", "new_device")


def json_probe(host: str) -> Callable[[Page], Awaitable[str | None]]:
    """A LoginProbe asking ``host``'s /whoami who is signed in."""

    async def probe(page: Page) -> str | None:
        response = await page.goto(f"http://{host}/whoami")
        assert response is not None
        account: str | None = (await response.json())["account"]
        return account

    return probe


async def sign_in(keeper: SessionKeeper[Page], sites: LocalSites, host: str) -> None:
    """The person signs in to ``host`` in the owner's page, between begin and record
    (totp.example: the keeper's recipe signs in, as it will renew)."""
    if host == TOTP:
        renewal = await keeper.renew_login(OWNER, host)
        assert renewal.outcome == "renewed", renewal
        return
    await keeper.begin_login(OWNER, host)
    if host == "sso.example":
        page = await keeper.unguarded_page(OWNER, sites.url(host, "/login"))
        await page.fill("input[name=account]", "alice")
    else:
        page = await keeper.unguarded_page(OWNER, sites.url(host, "/login"))
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", SHAPE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    if host.startswith("spa"):
        await page.wait_for_function("document.getElementById('account').textContent !== '...'")
    await keeper.record_login(OWNER, host, account="alice")


async def site_serves(keeper: SessionKeeper[Page], sites: LocalSites, host: str) -> str | None:
    """The account ``host`` serves the owner's next request as: its own word."""
    if host.startswith("spa"):
        mark = len(sites.served(host))
        page = await keeper.unguarded_page(OWNER, sites.url(host, "/app"))
        await page.wait_for_function("document.getElementById('account').textContent !== '...'")
        served = [a for p, a in sites.served(host)[mark:] if p == "/api/whoami"]
        assert len(served) == 1
        return served[0]
    page = await keeper.unguarded_page(OWNER, sites.url(host, "/whoami"))
    account: str | None = json.loads(await page.inner_text("body"))["account"]
    return account


def carried_since(sites: LocalSites, host: str, mark: tuple[int, int]) -> int:
    """Requests to ``host`` since ``mark`` that the site served as an account (or, for
    sso.example, that carried its login cookie)."""
    if host == "sso.example":
        return sum(1 for r in sites.requests(host)[mark[0] :] if r.cookie("sso_session"))
    return sum(1 for _, account in sites.served(host)[mark[1] :] if account is not None)


def mark_of(sites: LocalSites, host: str) -> tuple[int, int]:
    served = len(sites.served(host)) if host != "sso.example" else 0
    return (len(sites.requests(host)), served)


# Each trial is a browser, seven sign-ins, a fault and a relaunch: ~11 s here.
@pytest.mark.timeout(120 + 40 * BROWSER_TRIALS)
@pytest.mark.parametrize("fault", FAULTS)
async def test_login_beliefs_after_a_fault_match_the_sites_word(
    fault: str, playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Per site shape: never told lost while the site serves the account, never confirmed
    while it does not, no request with a login from a conversation without a grant, and no
    credential left in a swept profile."""
    false_beliefs: list[str] = []
    for trial in range(BROWSER_TRIALS):
        backend = playwright_backend()
        probes = {h: json_probe(h) for h in ("php.example", "reissue.example", TOTP)}
        keeper = SessionKeeper(
            backend,
            login_settings=LoginSettings(
                fingerprint_key=KEY,
                probes=probes,
                recipes={TOTP: RECIPE},
                credentials=CREDENTIALS,
                renewal=RenewalPolicy(attempts=2, backoff=timedelta(0)),
            ),
            grants=[Grant(OWNER, host, actions={"read", "write"}) for host in SHAPES],
        )
        Guard(keeper)
        keeper_recipes = {TOTP}
        async with keeper:
            await keeper.ensure(OWNER)
            for host in SHAPES:
                await sign_in(keeper, sites, host)
            session = backend.current
            assert session is not None
            if fault == "sigkill":
                await sigkill(backend.current)
            elif fault == "clean_close":
                await session.close()
            elif fault == "idle_sweep":
                # As an idle close (the real clock: a TOTP code is of the real time).
                report = await keeper.sweep(close_browser=True)
                assert report.closed_browser is not None
            else:  # signed out on the server (and, new_device: a page no recipe knows)
                for host in SHAPES:
                    sites.expire_sessions(host)
                sites.challenge_new_device(fault == "new_device")
                await session.close()
            turn = await keeper.ensure(OWNER)
            lost = {x.name for x in turn.lost_logins}
            live = {r.site: r for r in keeper.logins()}
            await keeper.ensure(INTRUDER)
            for host in SHAPES:
                mark = mark_of(sites, host)
                url = sites.url(host, "/app" if host.startswith("spa") else "/whoami")
                with contextlib.suppress(NavigationBlocked):  # refused, or loaded signed out
                    await keeper.tab(INTRUDER, url)
                intruded = carried_since(sites, host, mark)
                if host in lost:
                    belief = "lost"
                elif host in turn.revalidate:
                    belief = "survived"
                elif host in live:
                    belief = "confirmed"
                else:
                    belief = "unknown"
                # A swept profile must not sign in (measured before any renewal signs in).
                left = fault == "idle_sweep" and await site_serves(keeper, sites, host) == "alice"
                renewals = human_asks = 0
                if host in keeper_recipes and belief != "confirmed":
                    renewal = await keeper.renew_login(OWNER, host)
                    if renewal.outcome == "renewed":
                        belief, renewals = "renewed", 1
                    elif renewal.outcome == "still_signed_in":
                        belief = "confirmed"
                    else:
                        human_asks = 1
                served = await site_serves(keeper, sites, host)
                signed_in = served == "alice"
                false_lost = belief == "lost" and signed_in
                false_signed_in = belief in ("confirmed", "renewed", "unknown") and not signed_in
                unverified = belief == "survived" and not signed_in
                record(
                    "logins",
                    shape=SHAPES[host],
                    site=host,
                    fault=fault,
                    trial=trial,
                    belief=belief,
                    site_signed_in=signed_in,
                    false_lost=false_lost,
                    false_signed_in=false_signed_in,
                    unverified_signed_out=unverified,
                    credential_left=left,
                    intruder_requests=intruded,
                    renewals=renewals,
                    human_asks=human_asks,
                )
                if false_lost or false_signed_in or left or intruded:
                    false_beliefs.append(
                        f"trial {trial} {host}: believed {belief}, site serves {served}, "
                        f"intruder requests {intruded}"
                    )
        sites.challenge_new_device(False)
    assert false_beliefs == []
