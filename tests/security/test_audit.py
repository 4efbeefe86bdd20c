"""The audit hash chain: any edited, deleted, inserted or reordered entry is found."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper._security.audit import _PURPOSE, _canonical
from session_keeper.errors import AuditTampered, UnknownKey
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.stores._records import Event
from session_keeper.testing import FakeClock

KEYS = Keyring([("k1", bytes(range(32)))])


async def write_chain(db: Path, n: int = 5, keyring: Keyring = KEYS) -> tuple[int, str]:
    """Write ``n`` audit entries (and one unrelated event in between); return the head."""
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        audit = AuditLog(store, keyring, clock=FakeClock())
        for i in range(n):
            await audit.record("grant_added", {"conversation": f"c{i}", "site": "billing.example"})
            if i == 1:
                await store.append_event(Event(kind="guard_block", at=FakeClock().now()))
        assert audit.head is not None
        return audit.head


def tamper(db: Path, *statements: str) -> None:
    """Edit the SQLite file directly, as an attacker with file access would."""
    conn = sqlite3.connect(db)
    try:
        # The store's append-only triggers stop accidents, not an attacker with the file.
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def audit_rows(db: Path) -> list[tuple[int, str]]:
    """(id, data) of every audit row, by id."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(
            "SELECT id, data FROM events WHERE kind = ? ORDER BY id", (AUDIT_ENTRY_KIND,)
        ).fetchall()
    finally:
        conn.close()


async def verify(db: Path, keyring: Keyring = KEYS, head: tuple[int, str] | None = None) -> int:
    """verify_audit on a freshly opened store."""
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        return await verify_audit(store, keyring, expected_head=head)


async def test_intact_chain_verifies(tmp_path: Path) -> None:
    """An untouched chain verifies and reports its length, ignoring other events."""
    db = tmp_path / "s.db"
    head = await write_chain(db)
    assert await verify(db, head=head) == 5


async def test_edited_entry_is_found(tmp_path: Path) -> None:
    """Changing one entry's body (a grant's conversation) breaks its MAC."""
    db = tmp_path / "s.db"
    await write_chain(db)
    row_id, data = audit_rows(db)[2]
    doc = json.loads(data)
    doc["body"]["conversation"] = "research"
    tamper(db, f"UPDATE events SET data = '{json.dumps(doc)}' WHERE id = {row_id}")
    with pytest.raises(AuditTampered, match=f"id={row_id} was edited"):
        await verify(db)


async def test_edited_column_outside_data_is_found(tmp_path: Path) -> None:
    """The timestamp is covered too: backdating an entry is found."""
    db = tmp_path / "s.db"
    await write_chain(db)
    row_id, _ = audit_rows(db)[1]
    tamper(db, f"UPDATE events SET at = '2001-01-01T00:00:00.000000+00:00' WHERE id = {row_id}")
    with pytest.raises(AuditTampered, match="edited"):
        await verify(db)


async def test_deleted_entry_is_found(tmp_path: Path) -> None:
    """Deleting an entry in the middle breaks the sequence."""
    db = tmp_path / "s.db"
    await write_chain(db)
    row_id, _ = audit_rows(db)[2]
    tamper(db, f"DELETE FROM events WHERE id = {row_id}")
    with pytest.raises(AuditTampered, match="deleted, inserted or reordered"):
        await verify(db)


async def test_reordered_entries_are_found(tmp_path: Path) -> None:
    """Swapping two entries' positions (their ids) is found."""
    db = tmp_path / "s.db"
    await write_chain(db)
    (a, _), (b, _) = audit_rows(db)[1:3]
    tamper(
        db,
        f"UPDATE events SET id = -1 WHERE id = {a}",
        f"UPDATE events SET id = {a} WHERE id = {b}",
        f"UPDATE events SET id = {b} WHERE id = -1",
    )
    with pytest.raises(AuditTampered):
        await verify(db)


async def test_cut_off_tail_is_found_against_the_writers_head(tmp_path: Path) -> None:
    """Deleting the last entries leaves a valid prefix; the writer's head exposes it."""
    db = tmp_path / "s.db"
    head = await write_chain(db)
    last_id, _ = audit_rows(db)[-1]
    tamper(db, f"DELETE FROM events WHERE id = {last_id}")
    assert await verify(db) == 4  # without the head, a prefix is all one can check
    with pytest.raises(AuditTampered, match="removed from its end"):
        await verify(db, head=head)


async def test_forged_entry_without_the_key_is_found(tmp_path: Path) -> None:
    """An entry appended by someone without the key does not verify."""
    db = tmp_path / "s.db"
    head = await write_chain(db)
    forger = Keyring([("k1", bytes(32))])
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        # The forger's AuditLog trusts nothing it cannot check: it refuses to extend.
        with pytest.raises(AuditTampered):
            await AuditLog(store, forger).record("grant_added", {"conversation": "research"})
        await store.append_event(
            Event(
                kind=AUDIT_ENTRY_KIND,
                at=FakeClock().now(),
                data={
                    "type": "grant_added",
                    "seq": head[0] + 1,
                    "prev": head[1],
                    "key_id": "k1",
                    "body": {"conversation": "research"},
                    "mac": "00" * 32,
                },
            )
        )
    with pytest.raises(AuditTampered, match="edited"):
        await verify(db)


async def test_tampered_chain_refuses_new_entries_and_writes_nothing(tmp_path: Path) -> None:
    """On a broken chain AuditLog.record raises every time and appends no event."""
    db = tmp_path / "s.db"
    await write_chain(db)
    row_id, _ = audit_rows(db)[0]
    tamper(db, f"DELETE FROM events WHERE id = {row_id}")
    before = len(audit_rows(db))
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        audit = AuditLog(store, KEYS)
        for _ in range(2):
            with pytest.raises(AuditTampered):
                await audit.record("decision", {"outcome": "act"})
    assert len(audit_rows(db)) == before


async def test_missing_key_is_unknown_key_not_tampering(tmp_path: Path) -> None:
    """Verifying with a keyring that lacks the signing key says which key is missing."""
    db = tmp_path / "s.db"
    await write_chain(db)
    with pytest.raises(UnknownKey, match="'k1'"):
        await verify(db, Keyring([("k9", bytes(32))]))


async def test_wrong_key_under_the_same_id_is_tampering(tmp_path: Path) -> None:
    """A different key under the signing key's id cannot vouch for the chain."""
    db = tmp_path / "s.db"
    await write_chain(db)
    with pytest.raises(AuditTampered):
        await verify(db, Keyring([("k1", bytes(32))]))


async def test_chain_spans_a_key_rotation(tmp_path: Path) -> None:
    """Entries under k1 and, after rotation, k2 verify with a keyring holding both."""
    db = tmp_path / "s.db"
    await write_chain(db, 2)
    rotated = KEYS.rotated("k2")
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        audit = AuditLog(store, rotated)
        await audit.record("grant_added", {"conversation": "x"})
    assert json.loads(audit_rows(db)[-1][1])["key_id"] == "k2"
    assert await verify(db, rotated) == 3
    with pytest.raises(UnknownKey):
        await verify(db, rotated.without("k1"))


async def test_a_chain_longer_than_the_saved_head_is_fine(tmp_path: Path) -> None:
    """Entries appended after the head was saved (a crash in between) still verify."""
    db = tmp_path / "s.db"
    head = await write_chain(db, 3)
    async with SqliteStore(str(db), clock=FakeClock()) as store:
        await AuditLog(store, KEYS).record("grant_added", {"conversation": "late"})
    assert await verify(db, head=head) == 4
    with pytest.raises(AuditTampered, match="not the one its writer reported"):
        await verify(db, head=(head[0], "00" * 32))


async def test_an_entry_signed_with_a_retired_key_after_a_newer_one_is_found(
    tmp_path: Path,
) -> None:
    """After rotation, an entry signed with the older (still held) key is refused."""
    b1, b2 = bytes(range(32)), bytes(range(1, 33))
    rotated = Keyring([("k1", b1), ("k2", b2)])
    async with SqliteStore(tmp_path / "a.db", clock=FakeClock()) as store:
        await AuditLog(store, Keyring([("k1", b1)])).record("grant_added", {"n": 1})
        await AuditLog(store, rotated).record("grant_added", {"n": 2})
        assert await verify_audit(store, rotated) == 2
        # Someone holding only the retired key k1 appends an entry, chained correctly.
        head = (await store.events(kind=AUDIT_ENTRY_KIND, newest_first=True, limit=1))[0]
        at = FakeClock().now()
        fields = {"type": "grant_added", "seq": 3, "prev": head.data["mac"], "key_id": "k1"}
        fields["body"] = {"conversation": "evil"}
        _, mac = Keyring([("k1", b1)]).mac(
            _canonical(at, None, fields), purpose=_PURPOSE, key_id="k1"
        )
        await store.append_event(Event(kind=AUDIT_ENTRY_KIND, at=at, data={**fields, "mac": mac}))
        with pytest.raises(AuditTampered, match="older"):
            await verify_audit(store, rotated)
