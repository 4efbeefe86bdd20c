"""Renewal and health checks through a real single sign-on setup (``demos/sites/sso``: an
OpenID Connect provider and its relying parties), on real Chromium, checked against the
servers' own log of which account each request was served as.

- The app's session ends on its side while the identity provider's lives on: a renewal
  finds the app signed in again by redirects alone (no form ever shows) and records it at
  once, typing nothing.
- The account is signed out at the provider and the app: a scheduled probe with
  ``health_every`` and no recipe finds it, and the next turn is told the login is lost.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from playwright.async_api import Page

from demos.sites.sso import ACCOUNTS, SsoSites
from session_keeper import (
    FormField,
    FormRecipe,
    FormStep,
    Grant,
    LoginSettings,
    PageSign,
    RenewalPolicy,
    SessionKeeper,
)
from session_keeper.security import EnvCredentials
from session_keeper.testing import FakeClock

from .._sso import KEY, sign_in_by_redirect, signed_in
from ..conftest import BackendFactory

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(240)]

SITE = "app.example"
OWNER = "owner"
#: Long enough that a renewal waiting for a form that never comes is plainly seen waiting.
FORM_TIMEOUT = timedelta(seconds=60)

#: The app's sign-in as a recipe: the identity provider's form, then the app's home page.
RECIPE = FormRecipe(
    url="https://app.example/login",
    steps=[
        FormStep(
            fields=[
                FormField(credential="username", selector="input[name=username]"),
                FormField(credential="password", selector="input[name=password]"),
            ],
            submit="#sign-in",
        )
    ],
    success=PageSign(text="Signed in as"),
    timeout=FORM_TIMEOUT,
)
CREDENTIALS = EnvCredentials(
    environ={
        "SESSION_KEEPER_CRED_APP_EXAMPLE_USERNAME": "ada",
        "SESSION_KEEPER_CRED_APP_EXAMPLE_PASSWORD": ACCOUNTS["ada"],
    }
)


def me_probe(sites: SsoSites) -> Callable[[Page], Any]:
    """A LoginProbe asking app.example who it serves (its ``/api/me``)."""

    async def probe(page: Page) -> str | None:
        answer = await page.goto(sites.url(SITE, "/api/me"))
        assert answer is not None
        account: str | None = json.loads(await answer.text())["account"]
        return account

    return probe


async def person_signs_in(keeper: SessionKeeper[Page], sites: SsoSites) -> None:
    """ada signs the owner in to app.example at the identity provider's form."""
    await keeper.ensure(OWNER)
    page = await keeper.unguarded_page(OWNER)
    await keeper.begin_login(OWNER, SITE)
    await sign_in_by_redirect(page, sites, SITE, "ada")
    await keeper.record_login(OWNER, SITE, account="ada")


@pytest.mark.parametrize("probe", [True, False], ids=["with-probe", "recipe-signs-only"])
async def test_a_renewal_through_a_live_identity_provider_session_is_a_silent_success(
    sso_backend: BackendFactory, sso_sites: SsoSites, probe: bool
) -> None:
    """The app ends ada's session on its side; the provider's lives on. The renewal opens
    the app's sign-in, the app signs ada in again through redirects, and the renewal sees
    it before any form (the site's probe, or the recipe's success sign without one):
    renewed as ada in well under the form's timeout, nothing typed (the provider showed no
    form and got no password), the ledger holds the new login and the app serves ada."""
    sites = sso_sites
    keeper: SessionKeeper[Page] = SessionKeeper(
        sso_backend(),
        clock=FakeClock(),
        grants=[Grant(OWNER, SITE)],
        login_settings=LoginSettings(
            fingerprint_key=KEY,
            probes={SITE: me_probe(sites)} if probe else {},
            recipes={SITE: RECIPE},
            credentials=CREDENTIALS,
            renewal=RenewalPolicy(attempts=1),
        ),
    )
    async with keeper:
        await person_signs_in(keeper, sites)
        (before,) = keeper.logins()
        assert sites.end_app_sessions(SITE, "ada") >= 1
        mark = sites.mark()
        started = time.monotonic()
        result = await keeper.renew_login(OWNER, SITE)
        took = time.monotonic() - started
        assert (result.outcome, result.account, result.attempts) == ("renewed", "ada", 1)
        assert took < FORM_TIMEOUT.total_seconds() / 2, f"the renewal took {took:.1f} s"
        served = sites.served(since=mark)
        assert signed_in(sites, "app", "ada", mark)  # the app's own word: ada again
        events = [e.event for e in served if e.server == "idp"]
        assert "login-form" not in events and "login" not in events, events
        (after,) = keeper.logins()
        assert (after.site, after.owner, after.account) == (SITE, OWNER, "ada")
        assert after.generation == before.generation and after != before
        assert keeper.current_url(OWNER) == sites.url(SITE, "/")  # moved to the signed-in page
        turn = await keeper.ensure(OWNER)
        # With a probe the renewal first found the login signed out (told, then renewed).
        assert [str(x) for x in turn.lost_logins] == ([f"login:{SITE}"] if probe else [])
        assert turn.renewed == (SITE,)
        assert turn.to_prompt().splitlines()[1:] == [
            f"- Login to {SITE} renewed: the keeper signed in again (a fresh sign-in, not the "
            "old session). Reload its pages and look again before acting."
        ], turn.to_prompt()


async def test_a_sign_out_at_the_provider_and_app_is_found_by_a_scheduled_probe_without_a_recipe(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """``health_every`` with a probe and no recipe: while ada is signed in, the scheduled
    sweep's probe sees her (the app served /api/me as ada) and nothing is told; after a
    server-side sign-out at the provider and the app, the next scheduled probe (served as
    nobody) marks the login lost, and the owner's and the grantee's next turns say so in
    their facts and their text."""
    sites = sso_sites
    clock = FakeClock()
    keeper: SessionKeeper[Page] = SessionKeeper(
        sso_backend(),
        clock=clock,
        grants=[Grant(OWNER, SITE), Grant("reader", SITE, actions={"read"})],
        login_settings=LoginSettings(
            fingerprint_key=KEY,
            probes={SITE: me_probe(sites)},
            renewal=RenewalPolicy(health_every=timedelta(minutes=2)),
        ),
    )
    async with keeper:
        await keeper.ensure("reader")
        await person_signs_in(keeper, sites)
        await keeper.ensure(OWNER)
        await keeper.ensure("reader")
        assert await keeper.check_logins() == ()  # first seen: due one interval on
        mark = sites.mark()
        clock.advance(timedelta(minutes=2, seconds=1))
        await keeper.sweep()  # due, and the app still serves ada: nothing to tell
        checks = [e for e in sites.served("app", since=mark) if e.path == "/api/me"]
        assert [e.account for e in checks] == ["ada"]
        assert (await keeper.ensure(OWNER)).lost == ()

        assert sites.sign_out_everywhere("ada") >= 1  # the provider ends ada's session
        assert sites.end_app_sessions(SITE, "ada") >= 1  # and the app its own
        mark = sites.mark()
        clock.advance(timedelta(minutes=2, seconds=1))
        await keeper.sweep()
        checks = [e for e in sites.served("app", since=mark) if e.path == "/api/me"]
        assert [e.account for e in checks] == [None]  # the probe ran, and was served nobody
        for conversation in (OWNER, "reader"):
            turn = await keeper.ensure(conversation)
            (login,) = turn.lost_logins
            assert (str(login), login.cause, login.owner) == (f"login:{SITE}", "signed_out", OWNER)
            assert turn.to_prompt().splitlines()[1:] == [
                f"- Lost login to {SITE} (owner {OWNER}): signed out by the site. "
                "Do not act there until a human signs in again."
            ], turn.to_prompt()
        assert keeper.decide(OWNER, SITE, "write").outcome == "need_login"
        assert keeper.logins() == ()
        clock.advance(timedelta(minutes=2, seconds=1))
        mark = sites.mark()
        await keeper.sweep()  # a lost login is not checked again
        assert [e for e in sites.served("app", since=mark) if e.path == "/api/me"] == []
