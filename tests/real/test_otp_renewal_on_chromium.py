"""Renewal against a real second factor on real Chromium: otp.example, a Django app whose
TOTP codes django-otp's ``TOTPDevice`` judges (a used code refused, throttling after
failures). Every outcome is counted against the site's own request log.

The site runs on :data:`~tests.real.conftest.OTP_STEP_S`-second windows and the keeper's
vault holds the otpauth URI carrying that period: every wait for a window is of that
period, so bounds here are stated in periods."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pyotp
import pytest
import pytest_asyncio
from playwright.async_api import Page

from demos.guard_attacks import search_canaries
from demos.sites import DemoSites
from demos.sites.otp_django import (
    LOCKED_TEXT_START,
    OTP_HOST,
    OTP_PASSWORD,
    OTP_SECRET,
    REUSED_TEXT,
    WRONG_CODE_TEXT,
    OtpSite,
    SiteRequest,
    otp_recipe,
)
from session_keeper import Durability, Grant, LoginSettings, RenewalPolicy, SessionKeeper
from session_keeper.security import AuditLog, Keyring, SealedCredentials
from session_keeper.stores import SqliteStore

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import OTP_STEP_S

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

SITE = OTP_HOST
OWNER = "owner-chat"
#: A base32 secret that is not the account's: every code it makes is wrong.
WRONG_SECRET = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
#: The site's window, seconds (its devices' step; the period of the vault's URI).
STEP = OTP_STEP_S


def code_at(secret: str, at: float) -> str:
    """``secret``'s code at ``at`` on the site's windows (what its authenticator shows)."""
    return pyotp.TOTP(secret, interval=STEP).at(at)


async def whoami(page: Page) -> str | None:
    """otp.example's own word on who is signed in (the keeper's LoginProbe)."""
    answer = await page.goto(f"http://{SITE}/whoami")
    assert answer is not None
    account: str | None = (await answer.json())["account"]
    return account


@attrs.frozen(kw_only=True)
class World:
    keeper: SessionKeeper[Page]
    store: SqliteStore
    vault: SealedCredentials
    site: OtpSite
    account: str

    async def audited(self, type_: str) -> list[dict[str, Any]]:
        """The bodies of the keeper's audit entries of ``type_``, oldest first."""
        await self.keeper.persist()
        return [
            dict(e.data["body"])  # type: ignore[call-overload]
            for e in await self.store.events(kind="audit", limit=10_000)
            if e.data.get("type") == type_
        ]


MakeWorld = Callable[..., Awaitable[World]]


@pytest_asyncio.fixture(loop_scope="module")
async def make_world(
    playwright_backend: BackendFactory, otp_site: OtpSite, sites: DemoSites, tmp_path: Path
) -> AsyncIterator[MakeWorld]:
    """``await make_world(account, attempts=N)``: a keeper whose vault holds ``account``'s
    otp.example credentials, renewing with ``attempts`` at most (no backoff)."""
    opened: list[SessionKeeper[Page]] = []
    stores: list[SqliteStore] = []

    async def make(account: str, *, attempts: int) -> World:
        store = SqliteStore(str(tmp_path / f"keeper-{account}.db"))
        await store.__aenter__()
        stores.append(store)
        keyring = Keyring.generate()
        vault = SealedCredentials(store, keyring)
        await vault.set(SITE, "username", account)
        await vault.set(SITE, "password", OTP_PASSWORD)
        await vault.set(SITE, "totp", otp_site.totp_uri(account))
        backend = playwright_backend(
            host_resolver_rules=f"{otp_site.host_resolver_rules}, {sites.host_resolver_rules}"
        )
        keeper: SessionKeeper[Page] = SessionKeeper(
            backend,
            grants=[Grant(OWNER, SITE)],
            login_settings=LoginSettings(
                fingerprint_key=bytes(range(32)),
                probes={SITE: whoami},
                recipes={SITE: otp_recipe(timeout=timedelta(seconds=5))},
                credentials=vault,
                renewal=RenewalPolicy(attempts=attempts, backoff=timedelta(0)),
            ),
            durability=Durability(store=store, keyring=keyring, audit=AuditLog(store, keyring)),
        )
        await keeper.__aenter__()
        opened.append(keeper)
        await keeper.ensure(OWNER)
        return World(keeper=keeper, store=store, vault=vault, site=otp_site, account=account)

    yield make
    for keeper in opened:
        await keeper.__aexit__(None, None, None)
    for store in stores:
        await store.__aexit__(None, None, None)


async def wait_for_time_left(seconds: float) -> None:
    """Return once the site's current window has at least ``seconds`` left."""
    left = STEP - time.time() % STEP
    if left < seconds:
        await asyncio.sleep(left + 0.2)


async def person_signs_in(world: World) -> None:
    """The owner signs in as a person in the keeper's browser, with the code her phone
    showed a step ago (django-otp's tolerance of one step accepts it): the device's last
    verified step is then behind the keeper's clock, as after any earlier sign-in."""
    keeper = world.keeper
    await keeper.begin_login(OWNER, SITE)
    page = await keeper.unguarded_page(OWNER, world.site.url("/login"))
    await page.get_by_label("Username").fill(world.account)
    await page.get_by_label("Password").fill(OTP_PASSWORD)
    await page.click("button[type=submit]")
    await wait_for_time_left(STEP / 2)  # the code judged in the window it was made in
    await page.get_by_label("Code").fill(code_at(OTP_SECRET, time.time() - STEP))
    await page.click("button[type=submit]")
    await page.locator("#who").wait_for()
    await keeper.record_login(OWNER, SITE, account=world.account)


def codes_since(site: OtpSite, since: int, account: str) -> list[SiteRequest]:
    """The codes of ``account`` the site judged after log entry ``since``."""
    return [r for r in site.requests()[since:] if r.code is not None and r.user == account]


async def test_a_renewal_signs_in_with_password_and_code_after_a_server_side_sign_out(
    make_world: MakeWorld,
) -> None:
    """Signed in, signed out by the server, signed in again by the recipe: one password,
    one code django-otp accepted, and the site serves the account again."""
    world = await make_world("alice", attempts=3)
    keeper, site = world.keeper, world.site
    await person_signs_in(world)
    site.sign_out_everyone()
    assert await whoami(await keeper.unguarded_page(OWNER)) is None  # the site's word
    since = len(site.requests())
    renewal = await keeper.renew_login(OWNER, SITE)
    assert (renewal.outcome, renewal.attempts, renewal.account) == ("renewed", 1, "alice")
    assert [r.code for r in codes_since(site, since, "alice")] == ["accepted"]
    posts = [r.path for r in site.requests()[since:] if r.method == "POST"]
    assert posts == ["/login", "/login/code"]
    assert await whoami(await keeper.unguarded_page(OWNER)) == "alice"


async def test_a_renewal_that_finds_the_account_signed_in_types_nothing(
    make_world: MakeWorld,
) -> None:
    """The keeper believes the login lost while the site still serves the account (its
    login page sends a signed-in browser home): the probe sees the account before any form
    is filled, the login is recorded and nothing is posted to the site."""
    world = await make_world("bob", attempts=3)
    keeper, site = world.keeper, world.site
    await person_signs_in(world)
    await keeper.report_signed_out(SITE, reported_by=OWNER, reason="a test's belief")
    since = len(site.requests())
    renewal = await keeper.renew_login(OWNER, SITE)
    assert (renewal.outcome, renewal.attempts, renewal.account) == ("renewed", 1, "bob")
    assert [r for r in site.requests()[since:] if r.method == "POST"] == []
    served = {r.account for r in site.requests()[since:]}
    assert served == {"bob"}  # every request of the renewal, the probe's included
    assert [r.owner for r in keeper.logins()] == [OWNER]


async def test_a_wrong_totp_secret_is_refused_with_the_sites_reason_and_told_as_a_loss(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    """The vault holds a wrong TOTP secret: the renewal is refused with django-otp's own
    "invalid token" text, the site served nobody, the owner's next turn says the login is
    lost, word for word, and no password, secret or code typed is in the reason, the
    audit or the logs."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    world = await make_world("carol", attempts=1)
    keeper, site = world.keeper, world.site
    await person_signs_in(world)
    await keeper.ensure(OWNER)  # the sign-in told
    site.sign_out_everyone()
    wrong_uri = site.totp_uri("carol", WRONG_SECRET)
    await world.vault.set(SITE, "totp", wrong_uri)
    since = len(site.requests())
    renewal = await keeper.renew_login(OWNER, SITE)
    assert (renewal.outcome, renewal.attempts, renewal.needs_human) == ("refused", 1, True)
    assert renewal.reason == f"the site refused: {WRONG_CODE_TEXT}"
    judged = codes_since(site, since, "carol")
    assert [r.code for r in judged] == ["wrong"]
    assert {r.account for r in site.requests()[since:]} == {None}  # served nobody
    turn = await keeper.ensure(OWNER)
    assert turn.to_prompt() == (
        f"Browser {turn.browser_id}: the same browser, but since your last turn:\n"
        f"- Lost login to {SITE} (owner {OWNER}): signed out by the site. "
        "Do not act there until a human signs in again."
    )
    # The code typed is six digits: searched where a timestamp cannot match it by chance.
    code = code_at(WRONG_SECRET, judged[0].window * STEP)  # type: ignore[operator]
    reasons = [f["reason"] for f in await world.audited("login_renewal_failed")]
    assert reasons == [renewal.reason]
    assert code not in repr(renewal)
    canaries = {
        "password": OTP_PASSWORD,
        "secret": OTP_SECRET,
        "wrong secret": WRONG_SECRET,
        "wrong secret's URI": wrong_uri,
        "secret's URI": site.totp_uri("carol"),
    }
    await keeper.persist()
    events = await world.store.events(limit=10_000)
    hits = search_canaries(
        canaries,
        {
            "renewal": repr(renewal).encode(),
            "events": repr([e.to_dict() for e in events]).encode(),
            "logs": "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records).encode(),
        },
    )
    assert caplog.records  # the scan is not hollow
    assert hits == []


@pytest.mark.slow
async def test_a_reused_code_waits_for_the_next_window_and_renews(
    make_world: MakeWorld,
) -> None:
    """A code of this window was used elsewhere: django-otp refuses the renewal's code as
    used (the site's reason is audited), the next attempt types the next window's code and
    signs in; never two codes of one window."""
    world = await make_world("dave", attempts=3)
    keeper, site = world.keeper, world.site
    # At a window's start: the direct sign-in, then the renewal's first code, both in it
    # (the keeper types no code with less than its margin, half this window, left).
    await wait_for_time_left(STEP - 0.5)
    direct = site.sign_in_directly(code_at(OTP_SECRET, time.time()), username="dave")
    assert direct.code == "accepted"
    since = len(site.requests())
    started = time.monotonic()
    renewal = await keeper.renew_login(OWNER, SITE)
    took = time.monotonic() - started
    assert (renewal.outcome, renewal.attempts, renewal.account) == ("renewed", 2, "dave")
    judged = codes_since(site, since, "dave")
    assert [(r.code, r.window) for r in judged] == [
        ("reused", direct.window),
        ("accepted", direct.window + 1),  # type: ignore[operator]
    ]
    assert took < STEP + 10, took  # one window waited, no more (and 10 s of work)
    failed = await world.audited("login_renewal_failed")
    assert [(f["attempt"], f["reason"]) for f in failed] == [
        (1, f"the site refused: {REUSED_TEXT}")
    ]
    assert await whoami(await keeper.unguarded_page(OWNER)) == "dave"


@pytest.mark.slow
async def test_a_locked_out_account_is_refused_with_that_reason_within_the_policy(
    make_world: MakeWorld,
) -> None:
    """django-otp's throttling has locked the device: each attempt is refused with its
    "verification temporarily disabled" text, no more attempts than the policy's two, each
    in a window of its own, and the site serves nobody."""
    world = await make_world("erin", attempts=2)
    keeper, site = world.keeper, world.site
    site.lock_out("erin", failures=9)  # locked for 256 s
    try:
        since = len(site.requests())
        renewal = await keeper.renew_login(OWNER, SITE)
    finally:
        site.unlock("erin")
    assert (renewal.outcome, renewal.attempts, renewal.needs_human) == ("refused", 2, True)
    judged = codes_since(site, since, "erin")
    assert [r.code for r in judged] == ["locked", "locked"]
    assert len({r.window for r in judged}) == 2
    assert renewal.reason == (
        f"the site refused: {LOCKED_TEXT_START} 9 failed attempts, please try again soon."
    )
    assert {r.account for r in site.requests()[since:]} == {None}
