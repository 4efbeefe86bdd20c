"""Schema versions 2 (profile leases) and 3 (retention): older stores are migrated
forward, data kept; an unknown version is refused with a typed error, nothing written."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper.errors import SchemaVersionError
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.stores._schema import MIGRATIONS, SCHEMA_VERSION
from session_keeper.testing import FakeClock, TemporaryPostgres

TTL = timedelta(seconds=60)


def _v1_statements(dialect: str) -> list[str]:
    return [
        *MIGRATIONS[0](dialect),  # type: ignore[arg-type]
        "INSERT INTO session_keeper_meta (key, value) VALUES ('schema_version', '1')",
        "INSERT INTO keeper_state (keeper_id, body, updated_at) "
        "VALUES ('profile:alice', '{\"generation\": 3}', '2026-10-13T09:00:00.000000+00:00')",
    ]


def _v1_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in _v1_statements("sqlite"):
        conn.execute(statement)
    conn.close()


def _v1_postgres(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for statement in _v1_statements("postgres"):
            conn.execute(statement.encode())


def _version_and_tables(kind: str, location: str) -> tuple[str, bool]:
    query = "SELECT value FROM session_keeper_meta WHERE key = 'schema_version'"
    if kind == "sqlite":
        conn = sqlite3.connect(location)
        try:
            (version,) = conn.execute(query).fetchone()
            has = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'profile_leases'"
            ).fetchone()
        finally:
            conn.close()
        return str(version), has is not None
    import psycopg

    with psycopg.connect(location) as pg:
        row = pg.execute(query.encode()).fetchone()
        found = pg.execute("SELECT to_regclass('profile_leases')").fetchone()
    assert row is not None and found is not None
    return str(row[0]), found[0] is not None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def kind(request: pytest.FixtureRequest) -> str:
    """Each store implementation's name."""
    return str(request.param)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def v1_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A store written by schema version 1 (before profile leases), with one document."""
    if request.param == "sqlite":
        path = tmp_path / "v1.db"
        _v1_sqlite(path)
        return "sqlite", str(path)
    server: TemporaryPostgres = request.getfixturevalue("pg_server")
    dsn = server.create_database()
    _v1_postgres(dsn)
    return "postgres", dsn


def _open(kind: str, location: str) -> Store:
    if kind == "sqlite":
        return SqliteStore(location, clock=FakeClock())
    return PostgresStore(location, clock=FakeClock())


async def test_a_version_1_store_is_migrated_to_profile_leases_and_keeps_its_data(
    v1_store: tuple[str, str],
) -> None:
    """Opening a version-1 store adds the profile_leases table, stamps the current
    version, and keeps what was saved; profile leases then work."""
    kind, location = v1_store
    assert _version_and_tables(kind, location) == ("1", False)
    async with _open(kind, location) as store:
        assert await store.load_keeper_state("profile:alice") == {"generation": 3}
        lease = await store.acquire_profile("alice", "pool-a", TTL)
        await store.save_keeper_state_fenced(lease, "profile:alice", {"generation": 4})
        # Every later version's tables too: the durable steps' write intents (version 6).
        assert (await store.intend_write(lease, TTL, "run-1:1:refund")).first is True
    assert _version_and_tables(kind, location) == (str(SCHEMA_VERSION), True)


async def test_an_unknown_schema_version_is_refused_and_nothing_is_migrated(
    v1_store: tuple[str, str],
) -> None:
    """A store stamped with a version this code does not know raises SchemaVersionError
    on open, and no profile_leases table appears."""
    kind, location = v1_store
    update = "UPDATE session_keeper_meta SET value = '7' WHERE key = 'schema_version'"
    if kind == "sqlite":
        conn = sqlite3.connect(location, isolation_level=None)
        conn.execute(update)
        conn.close()
    else:
        import psycopg

        with psycopg.connect(location, autocommit=True) as pg:
            pg.execute(update.encode())
    with pytest.raises(SchemaVersionError, match="7"):
        async with _open(kind, location):
            pass
    assert _version_and_tables(kind, location) == ("7", False)


def _v2_statements(dialect: str) -> list[str]:
    old = "2026-10-13T09:00:00.000000+00:00"
    return [
        *MIGRATIONS[0](dialect),  # type: ignore[arg-type]
        *MIGRATIONS[1](dialect),  # type: ignore[arg-type]
        "INSERT INTO session_keeper_meta (key, value) VALUES ('schema_version', '2')",
        f"INSERT INTO events (at, kind, data) VALUES ('{old}', 'guard_block', '{{}}')",
        f"INSERT INTO events (at, kind, data) VALUES ('{old}', 'audit', '{{}}')",
    ]


async def test_a_version_2_store_is_migrated_to_retention_and_keeps_its_events(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    """Opening a version-2 store adds the event archive; its old events are kept until a
    retention pass, which then forgets the old block and keeps the audit entry."""
    if kind == "sqlite":
        location = str(tmp_path / "v2.db")
        conn = sqlite3.connect(location, isolation_level=None)
        for statement in _v2_statements("sqlite"):
            conn.execute(statement)
        conn.close()
    else:
        import psycopg

        server: TemporaryPostgres = request.getfixturevalue("pg_server")
        location = server.create_database()
        with psycopg.connect(location, autocommit=True) as pg, pg.transaction():
            for statement in _v2_statements("postgres"):
                pg.execute(statement.encode())
    clock = FakeClock()
    store = (
        SqliteStore(location, clock=clock)
        if kind == "sqlite"
        else PostgresStore(location, clock=clock)
    )
    async with store:
        assert [e.kind for e in await store.events()] == ["guard_block", "audit"]
        clock.advance(timedelta(days=30))
        assert (await store.prune_events(older_than=timedelta(days=1))).removed == 1
        assert [e.kind for e in await store.events()] == ["audit"]
    assert _version_and_tables(kind, location)[0] == str(SCHEMA_VERSION)
