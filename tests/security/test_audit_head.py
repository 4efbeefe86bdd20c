"""The audit head: a chain cut short is noticed, and an empty chain's head verifies."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from session_keeper import Durability, SessionKeeper
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper._model.grants import Grant
from session_keeper.errors import AuditTampered
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

KEYS = Keyring([("k1", bytes(range(32)))])


def _drop_last_audit_row(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        conn.execute(
            "DELETE FROM events WHERE id = (SELECT max(id) FROM events WHERE kind = ?)",
            (AUDIT_ENTRY_KIND,),
        )
        conn.commit()
    finally:
        conn.close()


async def test_audit_entries_cut_from_the_end_are_noticed_by_the_next_keeper(
    tmp_path: Path,
) -> None:
    """Cutting the newest audit entry is noticed (AuditTampered): sealed state keeps the head."""
    db = tmp_path / "k.db"
    clock = FakeClock()
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(
                store=store, keyring=KEYS, audit=AuditLog(store, KEYS, clock=clock)
            ),
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
            durability=Durability(
                store=store, keyring=KEYS, audit=AuditLog(store, KEYS, clock=clock)
            ),
        )
        with pytest.raises(AuditTampered):
            async with keeper:
                await keeper.ensure("a")


async def test_verify_audit_accepts_the_head_of_an_empty_chain(tmp_path: Path) -> None:
    """AuditLog.head of an empty chain, (0, ''), verifies against that same chain."""
    async with SqliteStore(tmp_path / "a.db", clock=FakeClock()) as store:
        audit = AuditLog(store, KEYS, clock=FakeClock())
        await audit.open()
        head = audit.head
        assert head == (0, "")
        assert await verify_audit(store, KEYS, expected_head=head) == 0
