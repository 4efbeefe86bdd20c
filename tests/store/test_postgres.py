"""PostgresStore specifics: racing workers, SKIP LOCKED, schema checks, the test server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest
from psycopg import pq

from session_keeper.errors import (
    InvalidArgument,
    LeaseHeldError,
    SchemaVersionError,
    StaleLeaseError,
    StoreCorrupt,
    StoreError,
)
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


def _probe_table(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE probe (id integer PRIMARY KEY)")


def _insert_probes(*ids: int) -> StoreOperation[None]:
    for i in ids:
        yield StoreStatement(
            "insert_probe", "INSERT INTO probe (id) VALUES (?)", (i,), answer="none"
        )


def _probes(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [int(r[0]) for r in conn.execute("SELECT id FROM probe ORDER BY id")]


async def test_statements_whose_answer_is_not_read_share_one_round_trip(
    pg_server: TemporaryPostgres, tmp_path: Path
) -> None:
    """BEGIN, three statements whose answer the operation does not read and COMMIT reach
    the server as one pipeline with one Sync (the one wait), not five round trips; a
    statement whose answer is read waits for it there and then."""
    dsn = pg_server.create_database()
    _probe_table(dsn)
    trace = tmp_path / "libpq.trace"

    def insert_then_count() -> StoreOperation[int]:
        yield from _insert_probes(4, 5)
        rows = yield StoreStatement("count", "SELECT COUNT(*) FROM probe")
        return int(rows[0][0])

    async with PostgresStore(dsn, clock=FakeClock(), min_size=1, max_size=1) as store:
        assert store._pool is not None
        with trace.open("w") as out:
            async with store._pool.connection() as conn:
                conn.pgconn.trace(out.fileno())
                conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            await run_store_operation(store, lambda: _insert_probes(1, 2, 3))
            first = trace.read_text()
            assert await run_store_operation(store, insert_then_count) == 5
            async with store._pool.connection() as conn:
                conn.pgconn.untrace()
        sent = [line.split("\t") for line in first.splitlines()]
        waits = [m for m in sent if m[0] == "F" and m[2].startswith(("Sync", "Query"))]
        assert len(waits) == 1, first
        both = [line.split("\t") for line in trace.read_text().splitlines()]
        assert len([m for m in both if m[0] == "F" and m[2].startswith("Sync")]) == 3
    assert _probes(dsn) == [1, 2, 3, 4, 5]


async def test_a_pipelined_operation_that_fails_late_writes_none_of_its_statements(
    pg_server: TemporaryPostgres,
) -> None:
    """Statements sent ahead (their answers not read) are undone when the operation
    raises after them, or when one of them fails on the server (the error arrives at the
    next wait, typed): nothing is written, and the next operation runs normally."""
    dsn = pg_server.create_database()
    _probe_table(dsn)

    def then_raise() -> StoreOperation[None]:
        yield from _insert_probes(1, 2)
        raise InvalidArgument("the operation's own check failed after its writes")

    def duplicate_then_read() -> StoreOperation[None]:
        yield from _insert_probes(3, 3)
        yield StoreStatement("count", "SELECT COUNT(*) FROM probe")

    async with PostgresStore(dsn, clock=FakeClock(), min_size=1, max_size=1) as store:
        with pytest.raises(InvalidArgument):
            await run_store_operation(store, then_raise)
        with pytest.raises(StoreCorrupt):
            await run_store_operation(store, duplicate_then_read)
        with pytest.raises(StoreCorrupt):
            await run_store_operation(store, lambda: _insert_probes(6, 6))
        assert _probes(dsn) == []
        await run_store_operation(store, lambda: _insert_probes(7))
    assert _probes(dsn) == [7]


async def test_an_operation_whose_connection_is_ended_before_its_commit_runs_again_once(
    pg_server: TemporaryPostgres,
) -> None:
    """A session ended by the server before the COMMIT went out (the stalled-blocker
    watch, an administrator) rolled its transaction back: the operation runs again on a
    fresh connection and writes once; ended a second time, it is a StoreError that names
    the loss, and nothing is written."""
    dsn = pg_server.create_database()
    _probe_table(dsn)
    attempts: list[int] = []

    def ended_mid_transaction(times: int, probe: int) -> StoreOperation[None]:
        yield from _insert_probes(probe)
        rows = yield StoreStatement("pid", "SELECT pg_backend_pid()")
        attempts.append(int(rows[0][0]))
        if len(attempts) <= times:
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (int(rows[0][0]),))
        yield StoreStatement("count", "SELECT COUNT(*) FROM probe")

    async with PostgresStore(dsn, clock=FakeClock(), min_size=1, max_size=2) as store:
        await run_store_operation(store, lambda: ended_mid_transaction(1, 1))
        assert len(attempts) == 2 and attempts[0] != attempts[1]
        assert _probes(dsn) == [1]
        attempts.clear()
        with pytest.raises(StoreError, match="connection was lost mid-transaction"):
            await run_store_operation(store, lambda: ended_mid_transaction(2, 2))
        assert len(attempts) == 2
        await run_store_operation(store, lambda: _insert_probes(3))
    assert _probes(dsn) == [1, 3]
