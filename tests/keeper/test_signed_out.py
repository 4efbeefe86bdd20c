"""A site found signed out is a loss like any other (issue 9, item 2)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper.errors import InvalidArgumentType
from session_keeper.security import AuditLog, GuardPolicy, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

SITE = "billing.example"
KEYS = Keyring([("k1", bytes(range(32)))])


def keeper_on(backend: FakeBackend, clock: FakeClock, **kw: object) -> SessionKeeper[FakePage]:
    """billing owns the login; research holds a read grant on it."""
    return SessionKeeper(
        backend,
        clock=clock,
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
        grants=[
            Grant("billing", SITE, actions={"read", "write"}),
            Grant("research", SITE, actions={"read"}),
        ],
        **kw,  # type: ignore[arg-type]
    )


async def signed_in(keeper: SessionKeeper[FakePage], backend: FakeBackend) -> None:
    """Both conversations had their turn; billing signed in to billing.example."""
    for conv in ("billing", "research", "docs"):
        await keeper.ensure(conv)
    await backend.sign_in(SITE, name="billing_session")
    await keeper.record_login("billing", SITE, account="alice")


async def test_signed_out_login_is_told_once_to_the_owner_and_every_grantee() -> None:
    """report_signed_out: owner and grantee each hear login:<site> (signed_out) once, no restart."""
    backend, clock = FakeBackend(), FakeClock()
    async with keeper_on(backend, clock) as keeper:
        await signed_in(keeper, backend)
        loss = await keeper.report_signed_out(SITE, reported_by="job:audit", reason="login form")
        assert loss is not None and (str(loss), loss.cause, loss.owner) == (
            f"login:{SITE}",
            "signed_out",
            "billing",
        )
        for conv in ("billing", "research"):
            turn = await keeper.ensure(conv)
            assert not turn.restarted and turn.generation == 1
            assert [(str(x), x.cause) for x in turn.lost] == [(f"login:{SITE}", "signed_out")]
            again = await keeper.ensure(conv)
            assert again.lost == ()
        assert (await keeper.ensure("docs")).lost == ()  # no grant, no login: not affected
        assert backend.launches == 1


async def test_no_conversation_may_act_on_a_site_that_signed_out() -> None:
    """After the sign-out decide/permits/admit never answer act, for owner or grantee."""
    backend, clock = FakeBackend(), FakeClock()
    async with keeper_on(backend, clock) as keeper:
        await signed_in(keeper, backend)
        assert keeper.decide("billing", SITE, "write", assumes_login=True).outcome == "act"
        await keeper.report_signed_out(SITE, reported_by="billing")
        for conv, action in (("billing", "write"), ("billing", "read"), ("research", "read")):
            assert keeper.decide(conv, SITE, action, assumes_login=True).outcome != "act"
            assert keeper.decide(conv, SITE, action).outcome != "act"
            assert keeper.permits(conv, SITE, action).outcome != "act"
            assert keeper.admit(conv, SITE, action).outcome != "act"
        assert keeper.logins() == ()


async def test_a_signed_out_site_stays_guarded() -> None:
    """Its cookies are still in the jar: the Guard keeps refusing conversations without a grant."""
    backend, clock = FakeBackend(), FakeClock()
    async with keeper_on(backend, clock) as keeper:
        guard = GuardPolicy(keeper)
        await signed_in(keeper, backend)
        await keeper.report_signed_out(SITE, reported_by="billing")
        assert [x.name for x in keeper.lost_logins()] == [SITE]
        verdict = guard.decide("docs", "http://billing.example/invoices", "GET")
        assert not verdict.allowed and verdict.rule == "grant"
        write = guard.decide("research", "http://billing.example/card", "POST")
        assert not write.allowed


async def test_sign_out_is_saved_and_audited(tmp_path: Path) -> None:
    """The loss survives our own process restart, and the chain records who reported it."""
    db = tmp_path / "s.db"
    backend, clock = FakeBackend(), FakeClock()
    async with SqliteStore(str(db), clock=clock) as store:
        keeper = keeper_on(
            backend,
            clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
        )
        async with keeper:
            await signed_in(keeper, backend)
            await keeper.report_signed_out(SITE, reported_by="job:audit", reason="expired")
            await keeper.persist()
        again = keeper_on(
            FakeBackend(),
            clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS)),
        )
        async with again:
            assert [(x.name, x.cause) for x in again.lost_logins()] == [(SITE, "signed_out")]
            turn = await again.ensure("research")
            assert (f"login:{SITE}", "signed_out") in [(str(x), x.cause) for x in turn.lost]
        await verify_audit(store, KEYS)
    conn = sqlite3.connect(db)
    try:
        bodies = [
            json.loads(d)
            for (d,) in conn.execute("SELECT data FROM events WHERE kind = ?", (AUDIT_ENTRY_KIND,))
        ]
    finally:
        conn.close()
    text = json.dumps(bodies)
    assert "login_signed_out" in text and "job:audit" in text


async def test_report_signed_out_without_a_live_login_changes_nothing() -> None:
    """Nothing to lose: None, nobody is told anything."""
    backend, clock = FakeBackend(), FakeClock()
    async with keeper_on(backend, clock) as keeper:
        await keeper.ensure("billing")
        assert await keeper.report_signed_out(SITE, reported_by="billing") is None
        assert (await keeper.ensure("billing")).lost == ()
        assert keeper.lost_logins() == ()


@pytest.mark.parametrize(
    "kw",
    [
        {"site": None, "reported_by": "x"},
        {"site": SITE, "reported_by": 3},
        {"site": SITE, "reported_by": "x", "reason": 5},
    ],
)
async def test_report_signed_out_refuses_bad_input_and_changes_nothing(
    kw: dict[str, object],
) -> None:
    """A typed error at the call; the login stays recorded."""
    backend, clock = FakeBackend(), FakeClock()
    async with keeper_on(backend, clock) as keeper:
        await signed_in(keeper, backend)
        site = kw.pop("site")
        with pytest.raises(InvalidArgumentType):
            await keeper.report_signed_out(site, **kw)  # type: ignore[arg-type]
        assert [r.site for r in keeper.logins()] == [SITE]
