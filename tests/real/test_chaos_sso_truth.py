"""Fault rows for a login made through an identity provider (RELIABILITY.md's "logins" table):
what the keeper believes of app.example's login after a fault, against the servers' own log,
and whether anything of the sign-in chain reaches a conversation without a grant or outlives
a sweep. Real Chromium, a real OpenID Connect provider (``demos/sites/sso``).

Each trial: ``owner`` (granted app.example) signs in at app through idp.example as ada
(``begin_login`` first), ``record_login``; one fault (a SIGKILL of Chromium, a clean close,
the idle sweep, or a sign-out of every IdP session on the server followed by a clean
restart); then:

- the keeper's belief of app's login after ``ensure()``: lost, survived (re-validate) or
  confirmed;
- the truth: the account app serves the owner's next request as (its log);
- intruder requests: a conversation with no grant tries wiki.example's sign-in (which would
  ride on the IdP session) and app's ``/api/me`` from a page of its own: every answer the
  servers gave it as ada counts;
- after a sweep, whether the swept profile still signs in anywhere: app as ada, or a silent
  wiki sign-in through a live IdP session.
"""

from __future__ import annotations

import contextlib

import pytest
from playwright.async_api import Page

from demos.sites.sso import SsoSites
from session_keeper import Grant, Guard, SessionKeeper
from session_keeper.errors import NavigationBlocked

from .._chaos import BROWSER_TRIALS, record
from .._sso import sign_in_by_redirect, sso_keeper, wait_until
from ..conftest import BackendFactory, sigkill

pytestmark = [pytest.mark.chromium, pytest.mark.chaos]

APP, WIKI, NEWS = "app.example", "wiki.example", "news.example"
SHAPE = "app signed in through an OpenID Connect provider (IdP session in the chain)"
FAULTS = ("sigkill", "clean_close", "idle_sweep", "server_signout")


async def app_serves(page: Page, sites: SsoSites) -> str | None:
    """The account app serves ``page``'s next request as (the server's own word)."""
    mark = sites.mark()
    with contextlib.suppress(Exception):
        await page.goto(sites.url(APP, "/api/me"))
    served = [e for e in sites.served("app", since=mark) if e.path == "/api/me"]
    return served[-1].account if served else None


async def signs_in_silently(page: Page, sites: SsoSites) -> bool:
    """Whether wiki's sign-in completes with no form: a live IdP session in the profile."""
    mark = sites.mark()
    with contextlib.suppress(Exception):
        await page.goto(sites.url(WIKI, "/login"))
    await wait_until(
        lambda: any(e.event in ("sign-in", "login-form") for e in sites.served(since=mark)),
        within=10,
    )
    return any(e.event == "sign-in" and e.account for e in sites.served("wiki", since=mark))


async def intruder_tries(keeper: SessionKeeper[Page], sites: SsoSites) -> int:
    """A conversation with no grant tries wiki's sign-in and app's API: answers served as
    an account to it (both servers' logs)."""
    await keeper.ensure("intruder")
    mark = sites.mark()
    with contextlib.suppress(NavigationBlocked):
        await keeper.tab("intruder", sites.url(WIKI, "/login"))
    with contextlib.suppress(NavigationBlocked):
        tab = await keeper.tab("intruder", sites.url(NEWS, "/"))
        await tab.evaluate(
            "u => fetch(u, {credentials: 'include'}).then(r => r.text()).catch(() => null)",
            sites.url(APP, "/api/me"),
        )
    await wait_until(lambda: False, within=0.3)  # let a redirect chain land in the log
    return sum(
        1
        for e in sites.served(since=mark)
        if e.account is not None
        and (e.server == "wiki" or (e.server == "app" and e.path == "/api/me"))
    )


# Each trial is a browser, an SSO sign-in, a fault and a relaunch: ~8 s here.
@pytest.mark.timeout(120 + 40 * BROWSER_TRIALS)
@pytest.mark.parametrize("fault", FAULTS)
async def test_sso_login_beliefs_after_a_fault_match_the_servers_word(
    fault: str, sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """Never told lost while app serves ada, never confirmed while it does not, no answer as
    ada to a conversation without a grant, and nothing of the chain left in a swept profile."""
    false_beliefs: list[str] = []
    for trial in range(BROWSER_TRIALS):
        backend = sso_backend()
        keeper = sso_keeper(backend, Grant("owner", APP))
        Guard(keeper)
        async with keeper:
            await keeper.ensure("owner")
            await keeper.begin_login("owner", APP)
            page = await keeper.unguarded_page("owner")
            await sign_in_by_redirect(page, sso_sites, APP, "ada")
            await keeper.record_login("owner", APP, account="ada")
            session = backend.current
            assert session is not None
            if fault == "sigkill":
                await sigkill(session)
            elif fault == "clean_close":
                await session.close()
            elif fault == "idle_sweep":
                assert (await keeper.sweep(close_browser=True)).closed_browser is not None
            else:
                sso_sites.sign_out_everywhere("ada")
                await session.close()
            turn = await keeper.ensure("owner")
            if APP in {x.name for x in turn.lost_logins}:
                belief = "lost"
            elif APP in turn.revalidate:
                belief = "survived"
            elif any(r.site == APP for r in keeper.logins()):
                belief = "confirmed"
            else:
                belief = "unknown"
            intruded = await intruder_tries(keeper, sso_sites)
            owner_page = await keeper.unguarded_page("owner")
            served = await app_serves(owner_page, sso_sites)
            left = fault == "idle_sweep" and (
                served == "ada" or await signs_in_silently(owner_page, sso_sites)
            )
            signed_in = served == "ada"
            false_lost = belief == "lost" and signed_in
            false_signed_in = belief in ("confirmed", "unknown") and not signed_in
            record(
                "logins",
                shape=SHAPE,
                site=APP,
                fault=fault,
                trial=trial,
                belief=belief,
                site_signed_in=signed_in,
                false_lost=false_lost,
                false_signed_in=false_signed_in,
                unverified_signed_out=belief == "survived" and not signed_in,
                credential_left=left,
                intruder_requests=intruded,
            )
            if false_lost or false_signed_in or left or intruded:
                false_beliefs.append(
                    f"trial {trial}: believed {belief}, app serves {served}, "
                    f"left after sweep {left}, intruder answers {intruded}"
                )
    assert false_beliefs == []
