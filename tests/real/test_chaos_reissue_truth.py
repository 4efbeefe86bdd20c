"""Fault rows for logins whose cookie the site re-issues, with no probe: never told lost while
the site serves the account (RELIABILITY.md's "logins" table), on real Chromium.

``reissue.example`` gives a signed-in browser a new value of its ``remember`` cookie, for the
same account, on its first request of each browser session. Each trial signs in, then three
times: the owner views a page of the site (the re-issue, after a relaunch), and the browser
goes — cleanly twice, then by the row's fault (a SIGKILL, or a third clean close). After each
relaunch the keeper's belief is compared with the account the site serves the owner's next
request as (its own log), and a conversation without a grant tries the site.

Before the re-issue was watched, the second clean relaunch said ``replaced`` (lost) every
time, and a SIGKILL after a flushed re-issue did too.
"""

from __future__ import annotations

import contextlib

import pytest
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
SITE = "reissue.example"
SHAPE = "remember-me cookie re-issued in the owner's pages (no probe)"


async def sign_in(keeper: SessionKeeper[Page], sites: LocalSites) -> None:
    """The person signs in to reissue.example in the owner's page, between begin and record."""
    await keeper.begin_login(OWNER, SITE)
    page = await keeper.unguarded_page(OWNER, sites.url(SITE, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", SHAPE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login(OWNER, SITE, account="alice")


async def served_as(keeper: SessionKeeper[Page], sites: LocalSites, path: str) -> str | None:
    """The account the site served the owner's view of ``path`` as: its own word."""
    mark = len(sites.served(SITE))
    await keeper.unguarded_page(OWNER, sites.url(SITE, path))
    served = [a for p, a in sites.served(SITE)[mark:] if p == path]
    assert len(served) == 1
    return served[0]


# Each trial is a browser, a sign-in and three relaunches: ~8 s here.
@pytest.mark.timeout(120 + 30 * BROWSER_TRIALS)
@pytest.mark.parametrize("fault", ["sigkill", "clean_close"])
async def test_a_reissued_login_cookie_is_never_told_lost_while_the_site_serves_the_account(
    fault: str, playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """After every relaunch, clean or by SIGKILL, a login whose cookie the site re-issued in
    the owner's pages is survived (re-validate) while the site serves the account, and lost
    only when it does not; no request with the login from a conversation without a grant."""
    false_beliefs: list[str] = []
    for trial in range(BROWSER_TRIALS):
        backend = playwright_backend()
        keeper = SessionKeeper(
            backend,
            login_settings=LoginSettings(fingerprint_key=KEY, session_cookies={SITE: ["remember"]}),
            grants=[Grant(OWNER, SITE, actions={"read", "write"})],
        )
        Guard(keeper)
        async with keeper:
            await keeper.ensure(OWNER)
            await sign_in(keeper, sites)
            for step, how in enumerate(("clean_close", "clean_close", fault)):
                # A page view of the owner's: in a new browser session, the re-issue.
                assert await served_as(keeper, sites, "/account") in ("alice", None)
                if how == "sigkill":
                    await sigkill(backend.current)
                else:
                    assert backend.current is not None
                    await backend.current.close()
                turn = await keeper.ensure(OWNER)
                lost = {x.name: x.cause for x in turn.lost_logins}
                if SITE in lost:
                    belief = "lost"
                elif SITE in turn.revalidate:
                    belief = "survived"
                else:
                    belief = "confirmed" if SITE in {r.site for r in keeper.logins()} else "unknown"
                await keeper.ensure(INTRUDER)
                mark = len(sites.served(SITE))
                with contextlib.suppress(NavigationBlocked):
                    await keeper.tab(INTRUDER, sites.url(SITE, "/whoami"))
                intruded = sum(1 for _, a in sites.served(SITE)[mark:] if a is not None)
                signed_in = await served_as(keeper, sites, "/whoami") == "alice"
                false_lost = belief == "lost" and signed_in
                false_signed_in = belief in ("confirmed", "unknown") and not signed_in
                record(
                    "logins",
                    shape=SHAPE,
                    site=SITE,
                    fault=how if step == 2 else "clean_close",
                    trial=trial,
                    step=step,
                    belief=belief,
                    site_signed_in=signed_in,
                    false_lost=false_lost,
                    false_signed_in=false_signed_in,
                    unverified_signed_out=belief == "survived" and not signed_in,
                    credential_left=False,
                    intruder_requests=intruded,
                    renewals=0,
                    human_asks=0,
                )
                if false_lost or false_signed_in or intruded:
                    false_beliefs.append(
                        f"trial {trial} step {step} ({how}): believed {belief} "
                        f"({lost.get(SITE)}), site signed in: {signed_in}, "
                        f"intruder requests {intruded}"
                    )
                if belief == "lost":
                    break  # nothing left to re-issue
    assert false_beliefs == []
