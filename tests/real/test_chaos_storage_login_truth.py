"""Fault rows for an SPA's login kept in localStorage beside the app's own state, with no probe
(RELIABILITY.md's "logins" table), on real Chromium.

``spa-app.example`` keeps its bearer token in ``localStorage`` as ``spa.example`` does, and
writes on every page, as apps built on sign-in libraries do, a transaction id into
``sessionStorage`` and a ``last_seen`` time into ``localStorage``. Each trial signs in (the
sign-in window sees all three appear), the owner views the app once more, and the browser
goes: a clean close, or a SIGKILL. The keeper's belief after ``ensure()`` is compared with
the account the site serves the owner's next request as (its own log).

Before the rule below, every clean relaunch said the login was lost (its ``sessionStorage``
item cannot outlive the tab, its ``last_seen`` had moved on) while the site still served
the account with the token that survived.
"""

from __future__ import annotations

import contextlib

import pytest
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from session_keeper import Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import NavigationBlocked
from session_keeper.testing import LocalSites
from session_keeper.testing._login_sites import SHAPE_PASSWORD

from .._chaos import BROWSER_TRIALS, record
from ..conftest import BackendFactory, shared_driver_backend, sigkill

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [pytest.mark.chromium, pytest.mark.chaos]

KEY = bytes(range(32))
OWNER = "owner"
INTRUDER = "intruder"
SITE = "spa-app.example"
#: The app page has asked the site who is signed in and shows the answer.
SHOWN = "(document.getElementById('account')?.textContent ?? '...') !== '...'"
#: The app has shown its answer, or the Guard answered the page itself (no app runs there).
ANSWERED = f"({SHOWN}) || document.getElementById('session-keeper-blocked') !== null"
SHAPE = "SPA token in localStorage beside app state in both storages (no probe)"


async def app_serves(keeper: SessionKeeper[Page], sites: LocalSites, who: str) -> str | None:
    """The account the site served ``who``'s view of /app as (its /api/whoami): its word."""
    mark = len(sites.served(SITE))
    try:
        page = await keeper.unguarded_page(who, sites.url(SITE, "/app"))
    except NavigationBlocked:
        return None  # refused before it left the browser
    with contextlib.suppress(PlaywrightError):
        await page.wait_for_function(ANSWERED, timeout=5000)
    served = [a for p, a in sites.served(SITE)[mark:] if p == "/api/whoami"]
    assert len(served) <= 1
    return served[0] if served else None


# Each trial is a browser, a sign-in and a relaunch: ~5 s here.
@pytest.mark.timeout(120 + 20 * BROWSER_TRIALS)
@pytest.mark.parametrize("fault", ["sigkill", "clean_close"])
async def test_a_storage_login_that_survived_a_relaunch_is_told_survived(
    fault: str, playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """After a clean close or a SIGKILL, a token that survived in localStorage is survived
    (re-validate) while the site serves the account, and lost only when it does not."""
    false_beliefs: list[str] = []
    for trial in range(BROWSER_TRIALS):
        backend = playwright_backend()
        keeper = SessionKeeper(
            backend,
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=[Grant(OWNER, SITE, actions={"read", "write"})],
        )
        Guard(keeper)
        async with keeper:
            await keeper.ensure(OWNER)
            await keeper.begin_login(OWNER, SITE)
            page = await keeper.unguarded_page(OWNER, sites.url(SITE, "/login"))
            await page.fill("input[name=username]", "alice")
            await page.fill("input[name=password]", SHAPE_PASSWORD)
            async with page.expect_navigation():
                await page.click("button[type=submit]")
            await page.wait_for_function(SHOWN)
            record_ = await keeper.record_login(OWNER, SITE, account="alice")
            assert {i.area for i in record_.storage} == {"local", "session"}
            assert await app_serves(keeper, sites, OWNER) == "alice"  # the app moves on
            if fault == "sigkill":
                await sigkill(backend.current)
            else:
                assert backend.current is not None
                await backend.current.close()
            turn = await keeper.ensure(OWNER)
            lost = {x.name: x.cause for x in turn.lost_logins}
            belief = "lost" if SITE in lost else "survived" if SITE in turn.revalidate else "?"
            await keeper.ensure(INTRUDER)
            intruded = 1 if await app_serves(keeper, sites, INTRUDER) is not None else 0
            signed_in = await app_serves(keeper, sites, OWNER) == "alice"
            false_lost = belief == "lost" and signed_in
            record(
                "logins",
                shape=SHAPE,
                site=SITE,
                fault=fault,
                trial=trial,
                belief=belief,
                site_signed_in=signed_in,
                false_lost=false_lost,
                false_signed_in=belief == "?" and not signed_in,
                unverified_signed_out=belief == "survived" and not signed_in,
                credential_left=False,
                intruder_requests=intruded,
                renewals=0,
                human_asks=0,
            )
            if false_lost or belief == "?" or intruded:
                false_beliefs.append(
                    f"trial {trial}: believed {belief} ({lost.get(SITE)}), site signed in: "
                    f"{signed_in}, intruder requests {intruded}"
                )
    assert false_beliefs == []
