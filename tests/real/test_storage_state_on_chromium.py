"""Logins in and out as a sealed Playwright storageState, on real Chromium: a new profile
signs in from it, nothing is readable without the keyring, and good state is never
overwritten by signed-out state."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from playwright.async_api import Page

from demos.sites.sso import SsoSites
from session_keeper import Durability, Grant, Guard, LoginSettings, SessionKeeper
from session_keeper.errors import (
    InvalidArgument,
    LoginNotYours,
    SealBroken,
    UnknownKey,
    UsageError,
)
from session_keeper.security import Keyring, open_storage_state
from session_keeper.testing import FakeClock, LocalSites
from session_keeper.testing._login_sites import SHAPE_PASSWORD, SPA_TOKEN_KEY

from .._sso import sign_in_by_redirect, sso_keeper
from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))
SSO = "sso.example"
SPA = "spa.example"
KEYRING = Keyring({"k1": bytes(32)})


async def sso_whoami(page: Page) -> str | None:
    """sso.example's own word on who is signed in (a LoginProbe)."""
    answer = await page.goto(f"http://{SSO}/whoami")
    assert answer is not None
    account: str | None = (await answer.json())["account"]
    return account


def keeper_on(backend: Any, *, keyring: Keyring | None = KEYRING, probe: bool = False) -> Any:
    """A keeper where ``app`` may use sso.example and spa.example."""
    probes = {SSO: sso_whoami} if probe else {}
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY, probes=probes),
        grants=[Grant("app", site, actions={"read", "write"}) for site in (SSO, SPA)],
        durability=Durability(keyring=keyring),
    )


async def sso_sign_in(keeper: SessionKeeper[Page], sites: LocalSites, account: str) -> None:
    """A person signs in to sso.example as ``account`` (a persistent cookie)."""
    await keeper.begin_login("app", SSO)
    page = await keeper.unguarded_page("app", sites.url(SSO, "/login"))
    await page.fill("input[name=account]", account)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("app", SSO, account=account)


async def spa_sign_in(keeper: SessionKeeper[Page], sites: LocalSites) -> None:
    """A person signs in to the SPA (its token in localStorage)."""
    await keeper.begin_login("app", SPA)
    page = await keeper.unguarded_page("app", sites.url(SPA, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", SHAPE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await page.wait_for_function("document.getElementById('account').textContent !== '...'")
    await keeper.record_login("app", SPA, account="alice")


async def serves(keeper: SessionKeeper[Page], sites: LocalSites, site: str) -> str | None:
    """The account ``site`` serves ``app``'s next request as."""
    if site == SPA:
        page = await keeper.unguarded_page("app", sites.url(SPA, "/app"))
        await page.wait_for_function("document.getElementById('account').textContent !== '...'")
        shown = await page.text_content("#account")
        return None if shown == "signed out" else shown
    page = await keeper.unguarded_page("app", sites.url(SSO, "/whoami"))
    account: str | None = json.loads(await page.inner_text("body"))["account"]
    return account


async def test_an_exported_state_signs_a_new_profile_in_and_is_sealed(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The cookie and the SPA token leave sealed (no value in the text); opened, they are a
    Playwright storageState; imported into a fresh profile, both sites serve alice there
    and the keeper records them as the conversation's, to re-validate."""
    async with keeper_on(playwright_backend()) as first:
        await first.ensure("app")
        await sso_sign_in(first, sites, "alice")
        await spa_sign_in(first, sites)
        sealed = await first.export_logins("app")
        page = await first.unguarded_page("app")
        token = await page.evaluate(f"() => localStorage.getItem('{SPA_TOKEN_KEY}')")
        cookie = next(c for c in await page.context.cookies() if c["name"] == "sso_session")
    assert token not in sealed and cookie["value"] not in sealed
    state = open_storage_state(sealed, KEYRING)
    assert [c["name"] for c in state["cookies"]] == ["sso_session"]
    assert [[i["name"] for i in o["localStorage"]] for o in state["origins"]] == [[SPA_TOKEN_KEY]]
    async with keeper_on(playwright_backend()) as second:
        await second.ensure("app")
        assert await serves(second, sites, SSO) is None  # the premise: a new profile
        assert await second.import_logins("app", sealed) == (SPA, SSO)
        assert await serves(second, sites, SSO) == "alice"
        assert await serves(second, sites, SPA) == "alice"
        records = {r.site: r for r in second.logins()}
        assert sorted(records) == [SPA, SSO]
        assert all(r.owner == "app" and r.needs_revalidation for r in records.values())


async def test_an_imported_login_is_guarded_before_import_logins_returns(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A page of a conversation with no grant that sits on the imported site's origin is
    moved off it, and its script's request there carries nothing (the site's own log),
    before any page loads a document: the import guards what it puts in the jar."""
    async with keeper_on(playwright_backend()) as first:
        await first.ensure("app")
        await sso_sign_in(first, sites, "alice")
        sealed = await first.export_logins("app", [SSO])
    second = keeper_on(playwright_backend())
    Guard(second)
    async with second:
        await second.ensure("research")
        other = await second.unguarded_page("research", sites.url(SSO, "/login"))
        await second.ensure("app")
        mark = len(sites.requests(SSO))
        assert await second.import_logins("app", sealed) == (SSO,)
        with contextlib.suppress(Exception):  # refused, or no longer on the origin
            await other.evaluate(
                "u => fetch(u, {credentials: 'include'}).then(r => r.text())",
                sites.url(SSO, "/whoami"),
            )
        assert [r.path for r in sites.requests(SSO)[mark:] if r.cookie("sso_session")] == []
        assert not other.url.startswith(sites.url(SSO, "/"))
        assert await serves(second, sites, SSO) == "alice"  # the owner's own request


async def test_an_import_never_writes_signed_out_state_over_good_state(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A live login the probe still sees is kept (mallory stays); a state whose session the
    server has since signed out is rolled back to the cookie the profile had (bob stays)."""
    async with keeper_on(playwright_backend(), probe=True) as first:
        await first.ensure("app")
        await sso_sign_in(first, sites, "alice")
        sealed = await first.export_logins("app", [SSO])
    async with keeper_on(playwright_backend(), probe=True) as kept:
        await kept.ensure("app")
        await sso_sign_in(kept, sites, "mallory")
        assert await kept.import_logins("app", sealed) == ()
        assert await serves(kept, sites, SSO) == "mallory"
    sites.expire_sessions(SSO)  # alice's exported session is dead on the server now
    async with keeper_on(playwright_backend(), probe=True) as rolled:
        await rolled.ensure("app")
        page = await rolled.unguarded_page("app", sites.url(SSO, "/login"))
        await page.fill("input[name=account]", "bob")  # signed in, never recorded
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        assert await rolled.import_logins("app", sealed) == ()
        assert await serves(rolled, sites, SSO) == "bob"
        assert rolled.logins() == ()


async def test_a_tampered_foreign_or_unscoped_state_is_refused_and_nothing_is_written(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """An altered seal, another keyring's seal and a sealed text that is no state are typed
    errors with the jar unchanged; no keyring is a UsageError; a site the conversation
    holds no login of cannot be exported."""
    async with keeper_on(playwright_backend()) as first:
        await first.ensure("app")
        await sso_sign_in(first, sites, "alice")
        sealed = await first.export_logins("app")
        with pytest.raises(LoginNotYours):
            await first.export_logins("app", [SPA])
    async with keeper_on(playwright_backend()) as second:
        await second.ensure("app")
        cut = len(sealed) // 2
        tampered = sealed[:cut] + ("A" if sealed[cut] != "A" else "B") + sealed[cut + 1 :]
        with pytest.raises(SealBroken):
            await second.import_logins("app", tampered)
        other = Keyring({"k2": bytes(range(1, 33))}).seal("{}", purpose="storage_state")
        with pytest.raises(UnknownKey):
            await second.import_logins("app", other)
        with pytest.raises(InvalidArgument):
            await second.import_logins("app", KEYRING.seal("{}", purpose="storage_state"))
        page = await second.unguarded_page("app")
        assert await page.context.cookies() == []
    async with keeper_on(playwright_backend(), keyring=None) as unsealed:
        await unsealed.ensure("app")
        with pytest.raises(UsageError):
            await unsealed.export_logins("app")


async def test_an_exported_login_keeps_its_samesite_and_works_across_sites_once_imported(
    sso_backend: BackendFactory, sso_sites: SsoSites
) -> None:
    """app.example's ``SameSite=None`` session leaves the export as ``None`` (not Chromium's
    default Lax): imported into a new profile, the owner's cross-site request from another
    site's page still carries it (app's own log serves ada)."""
    grant = Grant("owner", "app.example")
    first = sso_keeper(sso_backend(), grant, durability=Durability(keyring=KEYRING))
    async with first:
        await first.ensure("owner")
        await first.begin_login("owner", "app.example")
        await sign_in_by_redirect(
            await first.unguarded_page("owner"), sso_sites, "app.example", "ada"
        )
        await first.record_login("owner", "app.example", account="ada")
        sealed = await first.export_logins("owner", ["app.example"])
    state = open_storage_state(sealed, KEYRING)
    assert {c["name"]: c["sameSite"] for c in state["cookies"]}["app_session"] == "None"
    second = sso_keeper(sso_backend(), grant, durability=Durability(keyring=KEYRING))
    async with second:
        await second.ensure("owner")
        assert await second.import_logins("owner", sealed) == ("app.example",)
        page = await second.unguarded_page("owner", sso_sites.url("news.example", "/"))
        mark = sso_sites.mark()
        await page.evaluate(
            # No CORS answer: the script reads nothing, but the request goes (app's log).
            "u => fetch(u, {credentials: 'include'}).then(r => r.text()).catch(() => null)",
            sso_sites.url("app.example", "/api/me"),
        )
    served = [e.account for e in sso_sites.served("app", since=mark) if e.path == "/api/me"]
    assert served == ["ada"]
