"""The keeper's ledger, grant, approval and decision changes form a verifiable audit chain."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper.errors import AuditTampered
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests.keeper._saved import stored_rows

KEYS = Keyring([("k1", bytes(range(32)))])


def rows(db: Path) -> list[tuple[int, str]]:
    """(id, data) of the audit entries in the file."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT id, data FROM events WHERE kind = ? ORDER BY id", (AUDIT_ENTRY_KIND,)
        ).fetchall()
    finally:
        conn.close()


def keeper_doc(db: Path) -> str:
    """The keeper's saved rows and head, as stored."""
    return json.dumps(stored_rows(db))


async def run_turns(db: Path) -> None:
    """Grant, sign in, decide, borrow, revoke, crash: every change goes to the chain."""
    backend = FakeBackend()
    clock = FakeClock()
    async with SqliteStore(str(db), clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
        )
        async with keeper:
            keeper.grant(Grant("billing", "billing.example"))
            await keeper.ensure("billing")
            await backend.sign_in("billing.example")
            await keeper.record_login("billing", "billing.example")
            keeper.decide("billing", "billing.example", "write")
            keeper.decide("research", "billing.example", "read")
            keeper.approve_borrow(
                "research", "billing.example", "read", "ops-lead", expires_in=timedelta(hours=1)
            )
            keeper.revoke("research", "billing.example")
            await backend.crash()
            await keeper.ensure("billing")
            await keeper.persist()


async def test_every_change_is_an_entry_in_order(tmp_path: Path) -> None:
    """The chain verifies and lists the changes in the order they happened."""
    db = tmp_path / "s.db"
    await run_turns(db)
    async with SqliteStore(str(db)) as store:
        assert await verify_audit(store, KEYS) == 7
    types = [json.loads(d)["type"] for _, d in rows(db)]
    assert types == [
        "grant_added",
        "login_recorded",
        "decision",
        "decision",
        "borrow_approved",
        "grants_revoked",
        "login_lost",
    ]
    blocked = json.loads(rows(db)[3][1])["body"]
    assert blocked["outcome"] == "block" and blocked["conversation"] == "research"


async def test_keeper_refuses_a_tampered_trail_and_writes_nothing(tmp_path: Path) -> None:
    """Turning the recorded 'block' into an 'act': the next keeper refuses to start."""
    db = tmp_path / "s.db"
    await run_turns(db)
    row_id, data = rows(db)[3]
    doc = json.loads(data)
    doc["body"]["outcome"] = "act"
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET data = ? WHERE id = ?", (json.dumps(doc), row_id))
    conn.commit()
    conn.close()
    before = (keeper_doc(db), len(rows(db)))
    async with SqliteStore(str(db)) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(),
            durability=Durability(store=store, audit=AuditLog(store, KEYS)),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
        )
        with pytest.raises(AuditTampered, match=f"id={row_id}"):
            await keeper.__aenter__()
        await keeper.aclose()
    assert (keeper_doc(db), len(rows(db))) == before


async def test_a_keeper_reopens_on_an_archived_chain_and_goes_on(tmp_path: Path) -> None:
    """After its chain's oldest part was archived, a keeper opens again on it (against
    its saved head), writes on, and the chain verifies from the archive mark."""
    db = tmp_path / "s.db"
    clock = FakeClock()

    def keeper_on(store: SqliteStore) -> SessionKeeper[FakePage]:
        return SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
            grants=[Grant("billing", "billing.example", actions={"read"})],
        )

    async with SqliteStore(str(db), clock=clock) as store, keeper_on(store) as keeper:
        for _ in range(250):
            keeper.decide("billing", "billing.example", "read")
        await keeper.persist()
        clock.advance(timedelta(days=30))
        keeper.decide("billing", "billing.example", "read")
        await keeper.persist()
        assert keeper.audit is not None
        assert (await keeper.audit.archive(older_than=timedelta(days=1))).removed > 0
    async with SqliteStore(str(db), clock=clock) as store:
        async with keeper_on(store) as keeper:
            keeper.decide("billing", "billing.example", "read")
            await keeper.persist()
        # 252 decisions: the chain's last seq. The first 250 went out in one batch,
        # sealed by one head (a month old at the pass): those were archived.
        assert await verify_audit(store, KEYS) == 252
        assert len(await store.events(kind=AUDIT_ENTRY_KIND, limit=1000)) == 2
