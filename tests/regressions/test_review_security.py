"""Regressions for security problems a second review found: each failed before its fix."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from pathlib import Path

import pytest
from playwright.async_api import Page

from session_keeper import (
    PROBE_CONVERSATION,
    AuditLog,
    AuditTampered,
    Cookie,
    Grant,
    Guard,
    GuardPolicy,
    LoginVault,
    SessionKeeper,
    SqliteStore,
    verify_audit,
)
from session_keeper._audit import AUDIT_EVENT
from session_keeper._errors import IntegrityError, KeyringError, SealBroken, UsageError
from session_keeper._secrets import Keyring
from session_keeper.testing import FakeBackend, FakeClock, LocalSites

from ..conftest import BackendFactory
from ..guard.test_guard_chromium import KEY, billing_keeper, sign_in_billing, with_login


@pytest.mark.chromium
async def test_conversation_named_like_the_probe_reads_without_a_grant(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A conversation that calls itself 'session-keeper:probe' must not get the probe's reads."""
    keeper = billing_keeper(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        assert guard.enforcing
        mark = len(sites.requests("billing.example"))
        try:
            await keeper.ensure(PROBE_CONVERSATION)
            page = await keeper.tab(PROBE_CONVERSATION, sites.url("billing.example", "/invoices"))
            await page.wait_for_load_state()
        except UsageError:
            pass  # refusing the reserved name (a typed usage error) is a fine fix
        assert with_login(sites, mark) == 0


@pytest.mark.chromium
async def test_blank_popup_navigated_through_a_redirect_carries_the_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """window.open('') then location= a redirect into billing: the hop must not escape the Guard."""
    keeper = billing_keeper(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        assert guard.enforcing
        await keeper.ensure("research")
        page: Page = await keeper.tab("research", sites.url("docs.example", "/"))
        mark = len(sites.requests("billing.example"))
        target = (
            sites.url("docs.example", "/redirect")
            + "?to="
            + sites.url("billing.example", "/invoices")
        )
        # The popup races its own watch: before the fix about 1 in 5 leaked (3 of 15
        # runs), so ten popups make a missed race show up in about 9 runs of 10.
        for _ in range(10):
            async with page.expect_popup() as info:
                await page.evaluate(
                    "(u) => { const w = window.open(''); w.location.href = u; }", target
                )
            popup = await info.value
            await popup.wait_for_selector("#session-keeper-blocked", state="attached")
            await popup.close()
        await asyncio.sleep(0.5)
        assert with_login(sites, mark) == 0


def test_sealed_value_without_a_blob_is_sealbroken_not_indexerror() -> None:
    """Keyring.open on 'sk1.k1' (no ciphertext part) must raise SealBroken, not IndexError."""
    keys = Keyring([("k1", bytes(range(32)))])
    with pytest.raises(SealBroken):
        keys.open("sk1.k1", purpose="login.account")


def test_key_parse_error_does_not_echo_a_base64_key() -> None:
    """A base64 key pasted without an id must not appear in the KeyringError message."""
    key = base64.b64encode(bytes(range(100, 116))).decode()  # a 16-byte key: ends with '=='
    assert key.endswith("==")
    with pytest.raises(KeyringError) as info:
        Keyring.from_text(key)
    assert key.rstrip("=") not in str(info.value)


KEYS = Keyring([("k1", bytes(range(32)))])


async def test_vault_restore_of_an_allowed_site_brings_back_a_disallowed_sites_login(
    tmp_path: Path,
) -> None:
    """Restoring a.corp.example must not put back b.corp.example's (shared) login cookie."""
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        vault = LoginVault(store, KEYS, restore_sites=["a.corp.example"], clock=clock)
        keeper = SessionKeeper(
            backend,
            clock=clock,
            store=store,
            keyring=KEYS,
            vault=vault,
            grants=[Grant("a", "a.corp.example"), Grant("b", "b.corp.example")],
        )
        async with keeper:
            await keeper.ensure("a")
            session = backend.current
            assert session is not None
            # One SSO cookie for the parent domain: the login of both sub-sites.
            await session.add_cookies([Cookie(name="sso", value="s3cret", domain=".corp.example")])
            await keeper.record_login("a", "a.corp.example")
            await keeper.record_login("b", "b.corp.example")
            await backend.crash()
            turn = await keeper.ensure("b")
            assert "b.corp.example" not in turn.restored
            assert backend.current is not None
            jar = await backend.current.cookies()
            live = {r.site for r in keeper.logins()}
            # b.corp.example is reported lost and no longer protected, yet its login is back.
            leaked = [c.name for c in jar if c.applies_to("b.corp.example")]
            assert "b.corp.example" in live or leaked == []


def _drop_last_audit_row(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        conn.execute(
            "DELETE FROM events WHERE id = (SELECT max(id) FROM events WHERE kind = ?)",
            (AUDIT_EVENT,),
        )
        conn.commit()
    finally:
        conn.close()


async def test_keeper_does_not_notice_audit_entries_cut_from_the_end(tmp_path: Path) -> None:
    """The keeper keeps no audit head, so deleting its newest audit entry goes unnoticed."""
    db = tmp_path / "k.db"
    clock = FakeClock()
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            store=store,
            keyring=KEYS,
            audit=AuditLog(store, KEYS, clock=clock),
        )
        async with keeper:
            await keeper.ensure("a")
            keeper.grant(Grant("a", "billing.example"))
            keeper.grant(Grant("evil", "billing.example"))  # the entry an attacker hides
            await keeper.persist()
    _drop_last_audit_row(db)
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            store=store,
            keyring=KEYS,
            audit=AuditLog(store, KEYS, clock=clock),
        )
        with pytest.raises(AuditTampered):
            async with keeper:
                await keeper.ensure("a")


async def test_verify_audit_rejects_the_head_of_an_empty_chain(tmp_path: Path) -> None:
    """AuditLog.head of an empty chain, (0, ''), fails verify_audit on that same chain."""
    async with SqliteStore(tmp_path / "a.db", clock=FakeClock()) as store:
        audit = AuditLog(store, KEYS, clock=FakeClock())
        await audit.open()
        head = audit.head
        assert head == (0, "")
        assert await verify_audit(store, KEYS, expected_head=head) == 0


async def test_url_password_reaches_the_store(tmp_path: Path) -> None:
    """A tab URL with user:password@ keeps the password in the stored keeper document."""
    db = tmp_path / "k.db"
    clock = FakeClock()
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(FakeBackend(clock=clock), clock=clock, store=store, keyring=KEYS)
        async with keeper:
            await keeper.ensure("a")
            await keeper.tab("a", "https://alice:hunter2-canary@docs.example/guide?x=1")
            await keeper.persist()
    conn = sqlite3.connect(db)
    try:
        rows = [str(r) for r in conn.execute("SELECT * FROM keeper_state").fetchall()]
    finally:
        conn.close()
    assert rows
    assert not any("hunter2-canary" in r for r in rows)


async def test_grant_forged_in_the_stored_document_is_honoured_without_audit_trace(
    tmp_path: Path,
) -> None:
    """A grant written straight into keeper_state (no audit entry) must not be honoured."""
    db = tmp_path / "k.db"
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            store=store,
            keyring=KEYS,
            audit=AuditLog(store, KEYS, clock=clock),
            grants=[Grant("billing", "billing.example")],
            keeper_id="k",
        )
        async with keeper:
            await keeper.ensure("billing")
            await backend.sign_in("billing.example", persistent=True)
            await keeper.record_login("billing", "billing.example")
            await keeper.persist()
        doc = await store.load_keeper_state("k")
        assert doc is not None
        grants = list(doc["grants"])  # type: ignore[call-overload]
        grants.append({**grants[0], "conversation": "evil"})
        await store.save_keeper_state("k", {**doc, "grants": grants})
        keeper = SessionKeeper(
            backend,
            clock=clock,
            store=store,
            keyring=KEYS,
            audit=AuditLog(store, KEYS, clock=clock),
            keeper_id="k",
        )
        outcome = "refused"
        try:
            async with keeper:
                await keeper.ensure("evil")
                await keeper.ensure("billing")
                await backend.sign_in("billing.example")
                await keeper.record_login("billing", "billing.example")
                outcome = keeper.decide("evil", "billing.example", "read").outcome
        except IntegrityError as exc:  # only a typed refusal; a crash still fails
            outcome = f"refused: {type(exc).__name__}"
        assert outcome != "act", outcome


async def test_partly_lost_login_leaves_its_surviving_cookie_unguarded() -> None:
    """After a crash takes only the session cookie, the surviving login cookie is unguarded."""
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    keeper = SessionKeeper(
        backend, clock=clock, grants=[Grant("billing", "billing.example")], fingerprint_key=KEY
    )
    guard = GuardPolicy(keeper)
    remember: list[Cookie] = []

    async def persistent_cookie_survives(session: object, generation: int) -> None:
        # Chromium flushes old persistent cookies; a fresh session cookie dies with it.
        if generation > 1:
            await backend.current.add_cookies(remember)  # type: ignore[union-attr]

    keeper.add_launch_hook(persistent_cookie_survives)
    async with keeper:
        await keeper.ensure("billing")
        remember.append(await backend.sign_in("billing.example", name="remember", persistent=True))
        await backend.sign_in("billing.example", name="session")
        await keeper.record_login("billing", "billing.example")
        assert not guard.decide("research", "http://billing.example/", "GET").allowed
        await backend.crash()
        await keeper.ensure("billing")
        assert backend.current is not None
        jar = [c.name for c in await backend.current.cookies()]
        assert jar == ["remember"]
        # research holds no grant; the remember-me login cookie still rides on its request.
        assert not guard.decide("research", "http://billing.example/", "GET").allowed
