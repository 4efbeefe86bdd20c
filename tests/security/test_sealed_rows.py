"""The keeper's saved rows are sealed one by one, and their head says what they add up to:
a row changed, removed, added, moved or replayed from an older save is refused (SealBroken
with a keyring, StoreCorrupt without one), and nothing is written."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from session_keeper import Durability, SessionKeeper
from session_keeper.errors import SealBroken, StoreCorrupt
from session_keeper.security import Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests.keeper._saved import stored_rows

KEYS = Keyring([("k1", bytes(range(32)))])
Edit = Callable[[sqlite3.Connection, dict[str, str]], None]


def _row(conn: sqlite3.Connection, kind: str, key: str) -> str:
    (body,) = conn.execute(
        "SELECT body FROM keeper_rows WHERE kind = ? AND key = ?", (kind, key)
    ).fetchone()
    return str(body)


def _remove(conn: sqlite3.Connection, old: dict[str, str]) -> None:
    conn.execute("DELETE FROM keeper_rows WHERE kind = 'conversation' AND key = 'b'")


def _replay(conn: sqlite3.Connection, old: dict[str, str]) -> None:
    # Row a as an earlier save wrote it: sealed by the keeper, but not the current one.
    conn.execute(
        "UPDATE keeper_rows SET body = ? WHERE kind = 'conversation' AND key = 'a'", (old["a"],)
    )


def _move(conn: sqlite3.Connection, old: dict[str, str]) -> None:
    # Row a's sealed body under b's key.
    conn.execute(
        "UPDATE keeper_rows SET body = ? WHERE kind = 'conversation' AND key = 'b'",
        (_row(conn, "conversation", "a"),),
    )


def _change(conn: sqlite3.Connection, old: dict[str, str]) -> None:
    body = json.loads(_row(conn, "conversation", "a"))
    body["seen"] = 99
    conn.execute(
        "UPDATE keeper_rows SET body = ? WHERE kind = 'conversation' AND key = 'a'",
        (json.dumps(body),),
    )


def _add(conn: sqlite3.Connection, old: dict[str, str]) -> None:
    conn.execute(
        "INSERT INTO keeper_rows (keeper_id, kind, key, body) VALUES ('default', 'conversation', "
        "'c', ?)",
        (_row(conn, "conversation", "a"),),
    )


def _behead(conn: sqlite3.Connection, old: dict[str, str]) -> None:
    conn.execute("DELETE FROM keeper_heads")


async def _save(db: Path, keyring: Keyring | None) -> dict[str, str]:
    """Two conversations saved twice; returns row a as the first save wrote it."""
    clock = FakeClock()
    async with SqliteStore(db, clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(store=store, keyring=keyring),
        )
        async with keeper:
            await keeper.ensure("a", turn="t1")
            await keeper.ensure("b")
            await keeper.persist()
            conn = sqlite3.connect(db)
            try:
                first = {"a": _row(conn, "conversation", "a")}
            finally:
                conn.close()
            await keeper.ensure("a", turn="t2")
            await keeper.persist()
    return first


@pytest.mark.parametrize("edit", [_remove, _replay, _move, _change, _add, _behead])
@pytest.mark.parametrize(("keyring", "error"), [(KEYS, SealBroken), (None, StoreCorrupt)])
async def test_a_row_edited_outside_the_keeper_is_refused_and_nothing_written(
    tmp_path: Path, edit: Edit, keyring: Keyring | None, error: type[Exception]
) -> None:
    """Removed, replayed, moved, changed, added rows or a lost head: a typed error on open,
    before any browser starts, and the store is left as it was."""
    db = tmp_path / "k.db"
    old = await _save(db, keyring)
    conn = sqlite3.connect(db)
    edit(conn, old)
    conn.commit()
    conn.close()
    before = stored_rows(db)
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with SqliteStore(db, clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store, keyring=keyring),
        )
        with pytest.raises(error):
            await keeper.ensure("a")
        await keeper.aclose()
    assert backend.launches == 0
    assert stored_rows(db) == before


async def test_unchanged_rows_open_and_a_rotated_key_still_reads_them(tmp_path: Path) -> None:
    """The control: rows the keeper wrote open, also with a keyring that gained a newer key."""
    db = tmp_path / "k.db"
    await _save(db, KEYS)
    clock = FakeClock()
    async with SqliteStore(db, clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(store=store, keyring=KEYS.rotated("k2")),
        )
        async with keeper:
            facts = await keeper.ensure("a", turn="t2")  # the same turn: told the same facts
            assert facts.conversation == "a"
            await keeper.ensure("c")
