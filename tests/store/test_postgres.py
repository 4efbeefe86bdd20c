"""PostgresStore specifics: racing workers, SKIP LOCKED, schema checks, the test server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from session_keeper.errors import LeaseHeldError, SchemaVersionError, StaleLeaseError, StoreError
from session_keeper.jobs import JobContract
from session_keeper.stores import PostgresStore
from session_keeper.stores._schema import SCHEMA_VERSION
from session_keeper.testing import (
    FakeClock,
    StoreOperation,
    StoreStatement,
    TemporaryPostgres,
    run_store_operation,
)
from tests.store._helpers import TTL, records

pytestmark = pytest.mark.postgres


def count_rows(dsn: str) -> dict[str, int]:
    """Rows in every session_keeper table."""
    with psycopg.connect(dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        out = {}
        for table in tables:
            row = conn.execute(f"SELECT COUNT(*) FROM {table}".encode()).fetchone()
            assert row is not None
            out[table] = int(row[0])
        return out


async def test_two_workers_race_for_one_job_and_exactly_one_wins(
    pg_server: TemporaryPostgres,
) -> None:
    """Two stores (two pools) claim one job at once, 25 rounds: one winner per round,
    and the loser's commit, made with the lease it held last, is rejected."""
    dsn = pg_server.create_database()
    clock = FakeClock()
    async with (
        PostgresStore(dsn, clock=clock) as a,
        PostgresStore(dsn, clock=clock) as b,
    ):
        await a.submit_job(JobContract(job_id="hot"))
        first = await a.claim("hot", "setup", TTL)
        checkpoint = await a.transition(first, 0, "running")
        await a.release(first)
        revision = checkpoint.checkpoint_revision
        previous = first
        for round_no in range(25):
            outcomes = await asyncio.gather(
                a.claim("hot", "worker-a", TTL),
                b.claim("hot", "worker-b", TTL),
                return_exceptions=True,
            )
            winners = [o for o in outcomes if not isinstance(o, BaseException)]
            losers = [o for o in outcomes if isinstance(o, BaseException)]
            assert len(winners) == 1, outcomes
            assert all(isinstance(e, LeaseHeldError) for e in losers)
            [lease] = winners
            assert lease.token == previous.token + 1
            # The previous round's holder is fenced out, with a current revision even.
            with pytest.raises(StaleLeaseError):
                await b.commit_page(previous, revision, records(f"x{round_no}"), None, "p")
            winner_store = a if lease.owner == "worker-a" else b
            result = await winner_store.commit_page(
                lease, revision, records(f"r{round_no}"), None, f"p{round_no}"
            )
            revision = result.checkpoint.checkpoint_revision
            await winner_store.release(lease)
            previous = lease
        assert await a.count_results("hot") == 25


async def test_claim_next_ready_with_skip_locked_across_pools(
    pg_server: TemporaryPostgres,
) -> None:
    """Three stores × eight coroutines drain 40 jobs: each job is claimed exactly once."""
    dsn = pg_server.create_database()
    clock = FakeClock()
    stores = [PostgresStore(dsn, clock=clock, max_size=4) for _ in range(3)]
    for store in stores:
        await store.open()
    try:
        for i in range(40):
            await stores[0].submit_job(JobContract(job_id=f"job-{i:02d}"))

        async def worker(store: PostgresStore, name: str) -> list[str]:
            mine = []
            while (lease := await store.claim_next_ready(name, TTL)) is not None:
                mine.append(lease.job_id)
                await asyncio.sleep(0)
            return mine

        results = await asyncio.gather(
            *(worker(s, f"w{i}-{j}") for i, s in enumerate(stores) for j in range(8))
        )
        claimed = [job for batch in results for job in batch]
        assert sorted(claimed) == [f"job-{i:02d}" for i in range(40)]
    finally:
        for store in stores:
            await store.close()


async def test_newer_schema_is_refused_and_nothing_is_written(
    pg_server: TemporaryPostgres,
) -> None:
    """A database stamped with a newer schema raises SchemaVersionError; row counts stay."""
    dsn = pg_server.create_database()
    async with PostgresStore(dsn, clock=FakeClock()) as store:
        await store.submit_job(JobContract(job_id="j"))
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE session_keeper_meta SET value = %s", (str(SCHEMA_VERSION + 1),))
    before = count_rows(dsn)
    with pytest.raises(SchemaVersionError):
        async with PostgresStore(dsn, clock=FakeClock()):
            pass
    assert count_rows(dsn) == before


async def test_concurrent_openers_migrate_a_fresh_database_once(
    pg_server: TemporaryPostgres,
) -> None:
    """Five stores opening one empty database at once all succeed; the schema exists once."""
    dsn = pg_server.create_database()
    stores = [PostgresStore(dsn, clock=FakeClock()) for _ in range(5)]
    await asyncio.gather(*(s.open() for s in stores))
    for store in stores:
        await store.close()
    assert count_rows(dsn)["session_keeper_meta"] == 1


async def test_unreachable_server_is_a_store_error_without_the_password() -> None:
    """A DSN nobody listens on raises StoreError quickly; the password never appears."""
    store = PostgresStore(
        "postgresql://user:hunter2@127.0.0.1:1/db", clock=FakeClock(), connect_timeout=1
    )
    with pytest.raises(StoreError) as info:
        await store.open()
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(store)


def test_temporary_postgres_cleans_up_after_itself() -> None:
    """A TemporaryPostgres serves connections inside ``with`` and leaves no directory behind."""
    with TemporaryPostgres() as pg:
        with psycopg.connect(pg.dsn) as conn:
            row = conn.execute("SHOW synchronous_commit").fetchone()
            assert row == ("on",)
            listen = conn.execute("SHOW listen_addresses").fetchone()
            assert listen == ("127.0.0.1",)
        data_dir = pg.directory
        assert data_dir.exists()
    assert not Path(data_dir).exists()


async def test_synchronous_commit_is_forced_on(pg_server: TemporaryPostgres) -> None:
    """Store connections run with synchronous_commit=on whatever the server default."""
    dsn = pg_server.create_database()
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        db = dsn.rsplit("/", 1)[1]
        conn.execute(f'ALTER DATABASE "{db}" SET synchronous_commit = off'.encode())

    def show() -> StoreOperation[list[tuple[object, ...]]]:
        return (yield StoreStatement("show", "SHOW synchronous_commit"))

    async with PostgresStore(dsn, clock=FakeClock()) as store:
        rows = await run_store_operation(store, show, write=False)
        assert [tuple(r) for r in rows] == [("on",)]
