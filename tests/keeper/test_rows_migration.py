"""A store saved before rows (schema 3, one sealed document) is converted once, then its
rows are authoritative; on SQLite and on PostgreSQL.

``fixtures/keeper_before_rows.db`` was written by the code before rows (main at
f8983ac): a keeper with a keyring and an audit chain; ``billing`` took two turns across
a crash and signed in again (a sealed account), ``research`` holds a counted grant, spent
once, and is owed the restart.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, LoginSettings, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.stores._schema import MIGRATIONS, SCHEMA_VERSION
from session_keeper.testing import FakeBackend, FakeClock, FakePage, TemporaryPostgres

FIXTURE = Path(__file__).parent / "fixtures" / "keeper_before_rows.db"
KEYS = Keyring([("k1", bytes(range(32)))])


def _old_document() -> str:
    conn = sqlite3.connect(FIXTURE)
    try:
        (body,) = conn.execute(
            "SELECT body FROM keeper_state WHERE keeper_id = 'default'"
        ).fetchone()
    finally:
        conn.close()
    return str(body)


def _postgres_before_rows(pg_server: TemporaryPostgres) -> str:
    """A PostgreSQL store at schema 3 holding the fixture's document (no audit chain)."""
    import psycopg

    dsn = pg_server.create_database()
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for step in MIGRATIONS[:3]:
            for statement in step("postgres"):
                conn.execute(statement.encode())
        conn.execute("INSERT INTO session_keeper_meta (key, value) VALUES ('schema_version', '3')")
        conn.execute(
            "INSERT INTO keeper_state (keeper_id, body, updated_at) VALUES ('default', %s, now())",
            (_old_document(),),
        )
    return dsn


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def before_rows(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, location) of a store saved by the code before rows."""
    if request.param == "sqlite":
        db = tmp_path / "k.db"
        shutil.copy(FIXTURE, db)
        return "sqlite", str(db)
    return "postgres", _postgres_before_rows(request.getfixturevalue("pg_server"))


@asynccontextmanager
async def _keeper(kind: str, location: str) -> AsyncIterator[tuple[SessionKeeper[FakePage], Store]]:
    clock = FakeClock()
    store: Store = (
        SqliteStore(location, clock=clock)
        if kind == "sqlite"
        else PostgresStore(location, clock=clock)
    )
    async with store:
        # The SQLite fixture carries its audit chain; the PostgreSQL copy has only the document.
        audit = AuditLog(store, KEYS, clock=clock) if kind == "sqlite" else None
        keeper = SessionKeeper(
            FakeBackend(clock=clock),
            clock=clock,
            durability=Durability(store=store, keyring=KEYS, audit=audit),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
        )
        async with keeper:
            yield keeper, store


def _view(keeper: SessionKeeper[FakePage]) -> dict[str, Any]:
    return {
        "logins": sorted((r.site, r.owner, r.account) for r in keeper.logins()),
        "grants": sorted((g.conversation, g.site, g.uses) for g in keeper.grants()),
        "generation": keeper.generation,
        "generations": [(g.generation, g.cause) for g in keeper.generations()],
    }


async def test_a_document_saved_before_rows_is_converted_once_then_rows_are_authoritative(
    before_rows: tuple[str, str],
) -> None:
    """The old sealed document is read, every fact in it kept (sealed account, spent uses,
    a restart owed); the first save writes it as rows and drops it; the next process
    reads the rows alone."""
    kind, location = before_rows
    async with _keeper(kind, location) as (keeper, store):
        converted = _view(keeper)  # loaded on open, before the first ensure() accounts for it
        facts = await keeper.ensure("research")
        await keeper.persist()
        assert await store.load_keeper_state("default") is None
        saved = await store.load_keeper_rows("default")
        assert saved is not None and ("lost_login", "billing.example") in saved.rows
        assert await store.keeper_ids() == ["default"]
        doc = await saved_document(store, "default")
    assert doc is not None
    assert [(g["conversation"], g["uses_left"]) for g in doc["grants"]] == [
        ("billing", None),
        ("research", 2),
    ]
    assert facts.restarted and {x.name for x in facts.lost} == {"billing.example", "research"}
    assert ("billing.example", "billing", "alice@billing") in converted["logins"]
    assert ("research", "billing.example", 3) in converted["grants"]
    assert [g for g, _ in converted["generations"]][:2] == [1, 2]
    async with _keeper(kind, location) as (keeper, store):
        again = await keeper.ensure("research")
        assert _view(keeper)["grants"] == converted["grants"]
        assert not again.restarted or again.generation != facts.generation
        assert await store.load_keeper_state("default") is None
    if kind == "sqlite":
        conn = sqlite3.connect(location)
        try:
            (version,) = conn.execute(
                "SELECT value FROM session_keeper_meta WHERE key = 'schema_version'"
            ).fetchone()
        finally:
            conn.close()
        assert version == str(SCHEMA_VERSION)
