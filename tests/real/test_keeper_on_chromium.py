"""The keeper on real Chromium: losses are measured on the real cookie jar."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import attrs
import pytest
from playwright.async_api import Page

from session_keeper import Grant, LoginSettings, RenewalPolicy, SessionKeeper
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))


def keeper_on(
    backend: Any, clock: FakeClock, *, login_settings: LoginSettings | None = None, **kw: Any
) -> SessionKeeper[Page]:
    """A keeper with the billing and sso grants, a fake clock and a stable key (added to
    the caller's login settings)."""
    kw.setdefault("grants", [Grant("billing", "billing.example"), Grant("billing", "sso.example")])
    keyed = attrs.evolve(login_settings or LoginSettings(), fingerprint_key=KEY)
    return SessionKeeper(backend, clock=clock, login_settings=keyed, **kw)


async def billing_sign_in(keeper: SessionKeeper[Page], sites: LocalSites) -> None:
    """The human signs in to billing.example through its form (a session cookie)."""
    page = await keeper.unguarded_page("billing", sites.url("billing.example", "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", "correct horse")
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("billing", "billing.example", account="alice")


async def sso_sign_in(keeper: SessionKeeper[Page], sites: LocalSites, account: str) -> None:
    """The human signs in to sso.example (a persistent cookie)."""
    page = await keeper.unguarded_page("billing", sites.url("sso.example", "/login"))
    await page.fill("input[name=account]", account)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("billing", "sso.example", account=account)


async def test_sigkill_losses_are_what_the_new_jar_says(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """After a real SIGKILL the session login and the tab are lost; the persistent one is measured.

    Chromium flushes its cookie store lazily: a persistent cookie usually dies with a
    SIGKILL but sometimes was already on disk. The keeper must report whichever is true.
    """
    clock = FakeClock()
    backend = playwright_backend()
    async with keeper_on(backend, clock) as keeper:
        await keeper.ensure("billing")
        await billing_sign_in(keeper, sites)
        await sso_sign_in(keeper, sites, "alice")
        await keeper.unguarded_page("billing", sites.url("billing.example", "/invoices"))
        assert backend.current is not None
        await backend.current.kill()
        turn = await keeper.ensure("billing")
        assert turn.restarted and turn.browser_id == "browser-2"
        assert backend.current is not None
        jar = {c.name for c in await backend.current.cookies()}
        assert "billing_session" not in jar  # a session cookie never reaches the disk
        lost = sorted(str(x) for x in turn.lost)
        if "sso_session" in jar:
            assert lost == ["login:billing.example", "tab:billing"]
            assert turn.revalidate == ("sso.example",)
        else:
            assert lost == ["login:billing.example", "login:sso.example", "tab:billing"]
            assert turn.revalidate == ()
        assert turn.lost_tab is not None
        assert turn.lost_tab.last_url == sites.url("billing.example", "/invoices")


async def test_clean_close_keeps_the_persistent_login_and_drops_the_session_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Idle close with logins kept: the sso cookie survives (re-validate), billing's dies."""
    clock = FakeClock()
    backend = playwright_backend()
    async with keeper_on(
        backend, clock, login_settings=LoginSettings(keep_on_idle_close=True)
    ) as keeper:
        await keeper.ensure("billing")
        await billing_sign_in(keeper, sites)
        await sso_sign_in(keeper, sites, "alice")
        clock.advance(timedelta(minutes=11))
        report = await keeper.sweep()
        assert report.closed_browser is not None and backend.current is None
        turn = await keeper.ensure("billing")
        assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:billing"]
        assert turn.revalidate == ("sso.example",)
        page = await keeper.unguarded_page("billing", sites.url("sso.example", "/whoami"))
        assert json.loads(await page.inner_text("body")) == {"account": "alice"}


async def test_account_switched_between_browsers_is_reported_replaced(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Someone signed in to another sso account (a form post) without recording it: after
    restart, 'replaced'."""
    clock = FakeClock()
    backend = playwright_backend()
    async with keeper_on(
        backend, clock, login_settings=LoginSettings(keep_on_idle_close=True)
    ) as keeper:
        await keeper.ensure("billing")
        await sso_sign_in(keeper, sites, "alice")
        page = await keeper.unguarded_page("billing", sites.url("sso.example", "/login"))
        await page.fill("input[name=account]", "mallory")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        clock.advance(timedelta(minutes=11))
        await keeper.sweep()
        turn = await keeper.ensure("billing")
        login = turn.lost_logins[0]
        assert (str(login), login.cause) == ("login:sso.example", "replaced")
        decision = keeper.decide("billing", "sso.example", "write", assumes_login=True)
        assert decision.outcome == "stop"


async def test_account_switched_by_a_page_view_is_never_told_confirmed(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """An account chooser's link (a GET in the owner's page) sets a new value the way a
    re-issue does: the keeper cannot tell them apart, so the login is survived and to be
    re-validated, never confirmed, and a write waits for that."""
    clock = FakeClock()
    backend = playwright_backend()
    async with keeper_on(
        backend, clock, login_settings=LoginSettings(keep_on_idle_close=True)
    ) as keeper:
        await keeper.ensure("billing")
        await sso_sign_in(keeper, sites, "alice")
        await keeper.unguarded_page("billing", sites.url("sso.example", "/switch?account=mallory"))
        clock.advance(timedelta(minutes=11))
        await keeper.sweep()
        turn = await keeper.ensure("billing")
        assert turn.lost_logins == () and turn.revalidate == ("sso.example",)
        decision = keeper.decide("billing", "sso.example", "write", assumes_login=True)
        assert decision.outcome == "act" and decision.needs_revalidation


async def test_default_idle_close_leaves_no_credential_in_the_profile(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """By default the sweep deletes the ledger's login cookies before closing the browser."""
    clock = FakeClock()
    backend = playwright_backend()
    async with keeper_on(backend, clock) as keeper:
        await keeper.ensure("billing")
        await sso_sign_in(keeper, sites, "alice")
        clock.advance(timedelta(minutes=11))
        await keeper.sweep()
    relaunched = playwright_backend(backend.profile_dir)
    session = await relaunched.launch()
    assert [c for c in await session.cookies() if c.applies_to("sso.example")] == []


def whoami_probe(sites: LocalSites) -> Callable[[Page], Any]:
    """A LoginProbe asking sso.example who is signed in."""

    async def probe(page: Page) -> str | None:
        response = await page.goto(sites.url("sso.example", "/whoami"))
        assert response is not None
        account = json.loads(await response.text())["account"]
        return str(account) if account else None

    return probe


async def test_login_probe_confirms_a_surviving_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """With a probe that sees the same account, a surviving login needs no re-validation."""
    clock = FakeClock()
    backend = playwright_backend()
    probes = {"sso.example": whoami_probe(sites)}
    async with keeper_on(
        backend,
        clock,
        login_settings=LoginSettings(keep_on_idle_close=True, probes=probes),
    ) as keeper:
        await keeper.ensure("billing")
        await sso_sign_in(keeper, sites, "alice")
        clock.advance(timedelta(minutes=11))
        await keeper.sweep()
        turn = await keeper.ensure("billing")
        assert turn.restarted and turn.revalidate == ()
        assert [str(x) for x in turn.lost] == ["tab:billing"]
        d = keeper.decide("billing", "sso.example", "write")
        assert d.outcome == "act" and not d.needs_revalidation


async def test_login_probe_catches_a_server_side_expiry(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The cookie survived but the server forgot the session: the probe says 'signed_out'."""
    clock = FakeClock()
    backend = playwright_backend()
    probes = {"sso.example": whoami_probe(sites)}
    async with keeper_on(
        backend,
        clock,
        login_settings=LoginSettings(keep_on_idle_close=True, probes=probes),
    ) as keeper:
        await keeper.ensure("billing")
        await sso_sign_in(keeper, sites, "alice")
        clock.advance(timedelta(minutes=11))
        await keeper.sweep()
        sites.expire_sessions("sso.example")
        turn = await keeper.ensure("billing")
        login = turn.lost_logins[0]
        assert (str(login), login.cause) == ("login:sso.example", "signed_out")


async def test_a_probe_without_a_recipe_checks_the_login_on_schedule_and_tells_its_loss(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """``health_every`` with a probe and no recipe or credentials: after a server-side
    sign-out the scheduled sweep's probe (one /whoami, sent the cookie, in the site's
    log) marks the login lost, and the owner's and the grantee's next turns say so."""
    clock = FakeClock()
    settings = LoginSettings(
        probes={"sso.example": whoami_probe(sites)},
        renewal=RenewalPolicy(health_every=timedelta(minutes=2)),
    )
    grants = [Grant("billing", "sso.example"), Grant("support", "sso.example", actions={"read"})]
    async with keeper_on(
        playwright_backend(), clock, login_settings=settings, grants=grants
    ) as keeper:
        await keeper.ensure("billing")
        await keeper.ensure("support")
        await sso_sign_in(keeper, sites, "alice")
        await keeper.ensure("billing")
        await keeper.ensure("support")
        assert await keeper.check_logins() == ()  # first seen: due one interval on
        mark = len(sites.requests("sso.example"))
        clock.advance(timedelta(minutes=2, seconds=1))
        await keeper.sweep()  # due, and the site still serves alice: nothing to tell
        assert [r.path for r in sites.requests("sso.example")[mark:]] == ["/whoami"]
        assert (await keeper.ensure("billing")).lost == ()

        sites.expire_sessions("sso.example")  # the site signs alice out on its side
        mark = len(sites.requests("sso.example"))
        clock.advance(timedelta(minutes=2, seconds=1))
        await keeper.sweep()
        (checked,) = sites.requests("sso.example")[mark:]
        assert checked.path == "/whoami" and checked.cookie("sso_session") is not None
        for conversation in ("billing", "support"):
            turn = await keeper.ensure(conversation)
            (login,) = turn.lost_logins
            assert (str(login), login.cause, login.owner) == (
                "login:sso.example",
                "signed_out",
                "billing",
            )
            assert turn.to_prompt().splitlines()[1:] == [
                "- Lost login to sso.example (owner billing): signed out by the site. "
                "Do not act there until a human signs in again."
            ]
        assert keeper.decide("billing", "sso.example", "write").outcome == "need_login"
        clock.advance(timedelta(minutes=2, seconds=1))
        mark = len(sites.requests("sso.example"))
        await keeper.sweep()  # a lost login is not checked again
        assert sites.requests("sso.example")[mark:] == []
