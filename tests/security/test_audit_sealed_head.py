"""The sealed audit head: an open checks only entries newer than it, once, with the MAC key
derived once; a tampered head is refused; verify() still walks the whole chain."""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._model.events import AUDIT_ENTRY_KIND, AUDIT_HEAD_KIND
from session_keeper._security.audit import HEAD_EVERY
from session_keeper.errors import AuditTampered
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.stores._records import Event
from session_keeper.testing import FakeBackend, FakeClock, FakePage, drain_keeper_writes

RAW = bytes(range(32))
KEYS = Keyring([("k1", RAW)])
#: Enough entries for several sealed heads.
N = 3 * HEAD_EVERY + 20


async def write_chain(db: Path, n: int = N) -> tuple[int, str]:
    """``n`` entries, in batches of 50 (heads saved as the batches pass HEAD_EVERY)."""
    async with SqliteStore(db, clock=FakeClock()) as store:
        audit = AuditLog(store, KEYS, clock=FakeClock())
        for start in range(0, n, 50):
            await audit.record_many(
                [("decision", {"i": i}, None) for i in range(start, min(n, start + 50))]
            )
        assert audit.head is not None
        return audit.head


def rows(db: Path, kind: str) -> list[tuple[int, dict[str, object]]]:
    """(id, data) of the rows of ``kind``, by id."""
    conn = sqlite3.connect(db)
    try:
        found = conn.execute("SELECT id, data FROM events WHERE kind = ? ORDER BY id", (kind,))
        return [(i, json.loads(d)) for i, d in found.fetchall()]
    finally:
        conn.close()


def tamper(db: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    """Edit the file directly, as an attacker with file access would."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute("DROP TRIGGER IF EXISTS events_no_delete")
        for sql, params in statements:
            conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


def set_data(db: Path, row_id: int, data: dict[str, object]) -> None:
    tamper(db, ("UPDATE events SET data = ? WHERE id = ?", (json.dumps(data), row_id)))


@contextmanager
def counting(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Count MAC checks and key derivations."""
    seen = {"verify_mac": 0, "derive": 0}
    verify_mac, derive = Keyring.verify_mac, HKDF.derive

    def count_verify(self: Keyring, *args: object, **kwargs: object) -> bool:
        seen["verify_mac"] += 1
        return verify_mac(self, *args, **kwargs)  # type: ignore[arg-type]

    def count_derive(self: HKDF, key: bytes) -> bytes:
        seen["derive"] += 1
        return derive(self, key)

    with monkeypatch.context() as m:
        m.setattr(Keyring, "verify_mac", count_verify)
        m.setattr(HKDF, "derive", count_derive)
        yield seen


async def open_log(db: Path, keyring: Keyring = KEYS, head: tuple[int, str] | None = None) -> int:
    """AuditLog.open on a freshly opened store (a fresh keyring: no derived key cached)."""
    async with SqliteStore(db, clock=FakeClock()) as store:
        return await AuditLog(store, keyring).open(expected_head=head)


async def full_verify(db: Path) -> int:
    async with SqliteStore(db, clock=FakeClock()) as store:
        return await AuditLog(store, KEYS).verify()


async def test_an_open_checks_only_the_entries_newer_than_the_sealed_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 320 entries, an open checks the head's seal and fewer than HEAD_EVERY entries."""
    db = tmp_path / "a.db"
    head = await write_chain(db)
    assert rows(db, AUDIT_HEAD_KIND), "batches past HEAD_EVERY entries save a head"
    with counting(monkeypatch) as seen:
        assert await open_log(db, Keyring([("k1", RAW)]), head) == N
    assert seen["verify_mac"] <= HEAD_EVERY
    assert await full_verify(db) == N


async def test_an_open_walks_the_chain_once_and_derives_each_key_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain with no saved head is checked once per open, with one HKDF per key and purpose."""
    db = tmp_path / "a.db"
    head = await write_chain(db, 40)  # below HEAD_EVERY: no head saved, a full walk
    assert not rows(db, AUDIT_HEAD_KIND)
    with counting(monkeypatch) as seen:
        assert await open_log(db, Keyring([("k1", RAW)]), head) == 40
    assert seen == {"verify_mac": 40, "derive": 1}


async def test_a_tampered_entry_before_the_saved_head_is_still_found_by_verify(
    tmp_path: Path,
) -> None:
    """An edit behind the head passes an open (not re-checked) but not verify()."""
    db = tmp_path / "a.db"
    await write_chain(db)
    row_id, data = rows(db, AUDIT_ENTRY_KIND)[10]
    set_data(db, row_id, {**data, "body": {"i": "forged"}})
    assert await open_log(db) == N
    with pytest.raises(AuditTampered, match=f"id={row_id} was edited"):
        await full_verify(db)
    async with SqliteStore(db, clock=FakeClock()) as store:
        with pytest.raises(AuditTampered):
            await verify_audit(store, KEYS)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda d: {**d, "seq": d["seq"] - 1}, id="seq"),
        pytest.param(lambda d: {**d, "mac": "00" * 32}, id="mac"),
        pytest.param(lambda d: {**d, "seal": "00" * 32}, id="seal"),
        pytest.param(lambda d: {k: v for k, v in d.items() if k != "seal"}, id="unsealed"),
    ],
)
async def test_a_tampered_head_is_refused_with_a_typed_error_and_nothing_is_written(
    tmp_path: Path, edit: object
) -> None:
    """An edited newest head: open, record and verify raise AuditTampered; nothing is added."""
    db = tmp_path / "a.db"
    await write_chain(db)
    head_id, data = rows(db, AUDIT_HEAD_KIND)[-1]
    set_data(db, head_id, edit(data))  # type: ignore[operator]
    before = len(rows(db, AUDIT_ENTRY_KIND)) + len(rows(db, AUDIT_HEAD_KIND))
    async with SqliteStore(db, clock=FakeClock()) as store:
        audit = AuditLog(store, KEYS)
        with pytest.raises(AuditTampered, match="head"):
            await audit.open()
        with pytest.raises(AuditTampered):
            await audit.record("decision", {"outcome": "act"})
        with pytest.raises(AuditTampered):
            await verify_audit(store, KEYS)
    assert len(rows(db, AUDIT_ENTRY_KIND)) + len(rows(db, AUDIT_HEAD_KIND)) == before


async def test_a_head_sealed_with_another_key_is_refused(tmp_path: Path) -> None:
    """A head forged by someone without the key (a well-formed seal under another key)."""
    db = tmp_path / "a.db"
    await write_chain(db)
    _, entry = rows(db, AUDIT_ENTRY_KIND)[5]
    forger = Keyring([("k1", bytes(32))])
    payload = json.dumps({"seq": 6, "mac": entry["mac"], "key_id": "k1"}, sort_keys=True)
    _, seal = forger.mac(payload.encode(), purpose="audit-head")
    forged = {"seq": 6, "mac": entry["mac"], "key_id": "k1", "seal_key_id": "k1", "seal": seal}
    async with SqliteStore(db, clock=FakeClock()) as store:
        await store.append_event(Event(kind=AUDIT_HEAD_KIND, at=FakeClock().now(), data=forged))
    with pytest.raises(AuditTampered, match="seal does not match"):
        await open_log(db)


async def test_a_head_copied_past_newer_entries_is_refused(tmp_path: Path) -> None:
    """Replaying an older (genuine) head after newer entries does not hide them."""
    db = tmp_path / "a.db"
    await write_chain(db)
    _, old = rows(db, AUDIT_HEAD_KIND)[0]
    async with SqliteStore(db, clock=FakeClock()) as store:
        await store.append_event(Event(kind=AUDIT_HEAD_KIND, at=FakeClock().now(), data=old))
    with pytest.raises(AuditTampered, match="not the newest entry"):
        await open_log(db)
    with pytest.raises(AuditTampered, match="not the entry before it"):
        await full_verify(db)


async def test_the_newest_entry_named_by_the_head_is_checked_at_open(tmp_path: Path) -> None:
    """Editing the entry the head names (the newest) is found by an open."""
    db = tmp_path / "a.db"
    await write_chain(db, 2 * HEAD_EVERY)  # ends exactly at a head
    row_id, data = rows(db, AUDIT_ENTRY_KIND)[-1]
    assert rows(db, AUDIT_HEAD_KIND)[-1][1]["seq"] == data["seq"]
    set_data(db, row_id, {**data, "type": "forged"})
    with pytest.raises(AuditTampered, match=f"id={row_id} was edited"):
        await open_log(db)


async def test_entries_cut_with_their_heads_are_found_against_the_writers_head(
    tmp_path: Path,
) -> None:
    """Deleting the newest entries and the heads after them: the writer's head exposes it."""
    db = tmp_path / "a.db"
    head = await write_chain(db)
    first_head_id = rows(db, AUDIT_HEAD_KIND)[0][0]
    tamper(db, ("DELETE FROM events WHERE id > ?", (first_head_id,)))
    assert await open_log(db) == rows(db, AUDIT_HEAD_KIND)[0][1]["seq"]
    with pytest.raises(AuditTampered, match="removed from its end"):
        await open_log(db, head=head)


async def test_an_open_without_heads_checks_everything_and_the_next_batch_seals(
    tmp_path: Path,
) -> None:
    """With every head deleted an open walks the whole chain; the next write saves a head."""
    db = tmp_path / "a.db"
    await write_chain(db)
    tamper(db, ("DELETE FROM events WHERE kind = ?", (AUDIT_HEAD_KIND,)))
    async with SqliteStore(db, clock=FakeClock()) as store:
        audit = AuditLog(store, KEYS)
        assert await audit.open() == N
        await audit.record("decision", {"outcome": "act"})
    (_, head), *_ = rows(db, AUDIT_HEAD_KIND)
    assert head["seq"] == N + 1
    assert await full_verify(db) == N + 1


async def test_the_saved_head_holds_no_secret(tmp_path: Path) -> None:
    """Canary: no form of the keyring's key or of a derived MAC key is in a head row."""
    db = tmp_path / "a.db"
    await write_chain(db)
    text = json.dumps(rows(db, AUDIT_HEAD_KIND))
    derived = [KEYS._derived("k1", p) for p in ("audit", "audit-head")]
    for key in (RAW, *derived):
        for form in (key.hex(), base64.b64encode(key).decode(), base64.urlsafe_b64encode(key)):
            assert (form if isinstance(form, str) else form.decode()) not in text
    assert set(json.loads(text)[0][1]) == {"seq", "mac", "key_id", "seal_key_id", "seal"}


class CountingStore(SqliteStore):
    """Counts the store's event-writing transactions."""

    writes = 0

    async def append_event(self, event: Event) -> None:
        self.writes += 1
        await super().append_event(event)

    async def append_events(self, events: Sequence[Event]) -> list[Event]:
        self.writes += 1
        return await super().append_events(events)


async def test_a_burst_of_decisions_is_written_in_one_transaction(tmp_path: Path) -> None:
    """250 queued decision entries reach the store in one write, and the chain verifies."""
    clock = FakeClock()
    async with CountingStore(tmp_path / "k.db", clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
            grants=[Grant("research", "billing.example")],
        )
        async with keeper:
            await keeper.ensure("research")
            await keeper.persist()
            before = store.writes
            for _ in range(250):
                keeper.decide("research", "billing.example")
            await drain_keeper_writes(keeper)
            await keeper.persist()
            assert store.writes - before == 1
        assert await verify_audit(store, KEYS) == 250
