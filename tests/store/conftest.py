"""Store fixtures: every contract test runs on SQLite and on a real PostgreSQL.

The PostgreSQL server is a :class:`TemporaryPostgres` started once per test session.
Without PostgreSQL the ``postgres`` tests skip, except under CI (``CI`` set), where
a server that cannot start is a failure. Contract tests share one database that is
emptied before each test (much faster than a database per test); tests that
change the schema itself ask ``pg_server.create_database()`` for their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import FakeClock, TemporaryPostgres

#: Tables emptied between PostgreSQL contract tests (the meta table keeps its version).
_DATA_TABLES = (
    "keeper_state",
    "keeper_heads",
    "keeper_rows",
    "keeper_generations",
    "keeper_logins",
    "keeper_grants",
    "keeper_tabs",
    "profile_leases",
    "write_intents",
    "external_writes",
    "leases",
    "results",
    "checkpoints",
    "jobs",
    "artifacts",
    "events",
    "event_archive",
)


@pytest.fixture(scope="session")
def pg_shared_dsn(pg_server: TemporaryPostgres) -> str:
    """A database shared by the contract tests (emptied before each one)."""
    return pg_server.create_database("sk_contract")


class StoreMaker:
    """Opens stores of one kind on one location, so a test can reopen what it wrote."""

    def __init__(self, kind: str, location: str) -> None:
        self.kind = kind
        self.location = location

    def make(self, clock: FakeClock | None = None, **kwargs: Any) -> Store:
        """An unopened store on this location."""
        if self.kind == "sqlite":
            return SqliteStore(self.location, clock=clock, **kwargs)
        return PostgresStore(self.location, clock=clock, **kwargs)

    def open(
        self, clock: FakeClock | None = None, **kwargs: Any
    ) -> AbstractAsyncContextManager[Store]:
        """``async with maker.open(clock) as store:`` — an opened store, closed after."""

        @asynccontextmanager
        async def opened() -> AsyncIterator[Store]:
            async with self.make(clock, **kwargs) as store:
                yield store

        return opened()


def _empty_pg(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('jobs')").fetchone()
        if exists is None or exists[0] is None:
            return
        # DELETE beats TRUNCATE on tiny tables (no new files to fsync); replica role
        # skips the events table's append-only trigger, for this cleanup only.
        with conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in _DATA_TABLES:
                conn.execute(f"DELETE FROM {table}".encode())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def maker(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    """A StoreMaker for each implementation: a fresh SQLite file, an emptied PG database."""
    if request.param == "sqlite":
        return StoreMaker("sqlite", str(tmp_path / "store.db"))
    dsn = request.getfixturevalue("pg_shared_dsn")
    _empty_pg(dsn)
    return StoreMaker("postgres", dsn)


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at the default start; stores read lease expiry from it."""
    return FakeClock()


@pytest.fixture
async def store(maker: StoreMaker, clock: FakeClock) -> AsyncIterator[Store]:
    """An opened store (each implementation in turn) on the fake clock."""
    async with maker.open(clock) as opened:
        yield opened
