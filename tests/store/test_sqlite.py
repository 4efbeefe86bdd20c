"""SqliteStore specifics: durability settings, bad files, locking, several processes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper.errors import (
    InvalidArgumentType,
    SchemaVersionError,
    StaleLeaseError,
    StoreBusy,
    StoreCorrupt,
    StoreError,
)
from session_keeper.jobs import JobContract
from session_keeper.stores import SqliteStore
from session_keeper.stores._schema import SCHEMA_VERSION
from session_keeper.testing import (
    FakeClock,
    StoreOperation,
    StoreStatement,
    occupy_store_thread,
    run_store_operation,
    watch_store_statements,
)
from tests.store import _worker
from tests.store._helpers import TTL, records, running_job

WORKER = Path(__file__).with_name("_worker.py")


def fingerprint(path: Path) -> dict[str, str]:
    """sha256 of the database file and of any WAL/SHM next to it."""
    out = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        candidate = Path(str(path) + suffix)
        if candidate.exists():
            out[suffix or "db"] = hashlib.sha256(candidate.read_bytes()).hexdigest()
    return out


def row_counts(path: Path) -> dict[str, int]:
    """Rows per table, read with a plain sqlite3 connection."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        conn.close()


async def make_store_with_job(path: Path) -> None:
    """A store holding one running job with one committed page."""
    async with SqliteStore(path, clock=FakeClock()) as store:
        lease, cp = await running_job(store)
        await store.commit_page(lease, cp.checkpoint_revision, records("a"), "p2", "p1")


# ---------------------------------------------------------------- settings


async def test_store_uses_wal_full_sync_and_a_busy_timeout(tmp_path: Path) -> None:
    """The connection runs WAL with synchronous=FULL and a busy timeout."""
    store = SqliteStore(tmp_path / "s.db", busy_timeout=7)
    async with store:

        def pragmas() -> StoreOperation[tuple[object, ...]]:
            values = []
            for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys"):
                rows = yield StoreStatement(name, f"PRAGMA {name}")
                values.append(rows[0][0])
            return tuple(values)

        assert await run_store_operation(store, pragmas, write=False) == ("wal", 2, 7000, 1)


async def test_fresh_file_gets_the_current_schema_version_once(tmp_path: Path) -> None:
    """A new file is migrated to the current version; reopening does not migrate again."""
    path = tmp_path / "s.db"
    async with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM session_keeper_meta").fetchall()
    conn.close()
    assert version == [(str(SCHEMA_VERSION),)]
    before = fingerprint(path)["db"]
    async with SqliteStore(path):
        pass
    assert fingerprint(path)["db"] == before


async def test_memory_store_works_for_quick_tests() -> None:
    """ ":memory:" gives a private, working store."""
    async with SqliteStore(":memory:", clock=FakeClock()) as store:
        lease, cp = await running_job(store)
        result = await store.commit_page(lease, cp.checkpoint_revision, records("a"), None, "p")
        assert result.new_records == 1


# ---------------------------------------------------------------- bad input changes nothing


async def test_garbage_file_is_store_corrupt_and_untouched(tmp_path: Path) -> None:
    """A file that is not SQLite raises StoreCorrupt; its bytes stay the same, no WAL appears."""
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database, it is a grocery list\n" * 200)
    before = fingerprint(path)
    with pytest.raises(StoreCorrupt):
        async with SqliteStore(path):
            pass
    assert fingerprint(path) == before


async def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    """A valid SQLite file with someone else's tables is not adopted as a store."""
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    before = fingerprint(path)
    with pytest.raises(StoreCorrupt, match="not a session_keeper store"):
        async with SqliteStore(path):
            pass
    assert fingerprint(path) == before


async def test_damaged_pages_raise_store_corrupt_and_write_nothing(tmp_path: Path) -> None:
    """Overwritten pages inside a store surface as StoreCorrupt, never a raw sqlite error."""
    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock()) as store:
        for i in range(30):
            await store.submit_job(JobContract(job_id=f"job-{i}", extra={"pad": "x" * 2000}))
    # Fold the WAL into the file so the damage hits the pages we read.
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data) - page, 3 * page):
        data[offset : offset + page] = b"\xa5" * page
    path.write_bytes(bytes(data))
    before = fingerprint(path)
    with pytest.raises(StoreCorrupt):
        async with SqliteStore(path, clock=FakeClock(), check_integrity=True):
            pass
    assert fingerprint(path) == before
    with pytest.raises(StoreCorrupt):  # without the integrity check, the first read fails
        async with SqliteStore(path, clock=FakeClock()) as store:
            await store.jobs()


async def test_newer_schema_version_is_refused_untouched(tmp_path: Path) -> None:
    """A store written by a newer schema raises SchemaVersionError and is not modified."""
    path = tmp_path / "s.db"
    await make_store_with_job(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE session_keeper_meta SET value = ?", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = fingerprint(path)
    with pytest.raises(SchemaVersionError, match="knows up to"):
        async with SqliteStore(path):
            pass
    assert fingerprint(path) == before


async def test_checkpoint_with_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    """A checkpoint row of an unknown version raises SchemaVersionError; commits write nothing."""
    path = tmp_path / "s.db"
    clock = FakeClock()
    async with SqliteStore(path, clock=clock) as store:
        lease, cp = await running_job(store)
    conn = sqlite3.connect(path)
    body = json.loads(conn.execute("SELECT body FROM checkpoints").fetchone()[0])
    body["schema_version"] = 99
    conn.execute("UPDATE checkpoints SET body = ?", (json.dumps(body),))
    conn.commit()
    conn.close()
    before = row_counts(path)
    async with SqliteStore(path, clock=clock) as store:
        with pytest.raises(SchemaVersionError):
            await store.load_job("job-1")
        with pytest.raises(SchemaVersionError):
            await store.commit_page(lease, cp.checkpoint_revision, records("a"), "p2", "p1")
    assert row_counts(path) == before


async def test_malformed_contract_row_is_store_corrupt(tmp_path: Path) -> None:
    """A job row whose contract is not a contract raises StoreCorrupt and changes nothing."""
    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock()) as store:
        await store.submit_job(JobContract(job_id="j"))
    conn = sqlite3.connect(path)
    conn.execute("""UPDATE jobs SET contract = '{"schema_version": 1, "job_id": 7}'""")
    conn.commit()
    conn.close()
    before = row_counts(path)
    async with SqliteStore(path, clock=FakeClock()) as store:
        with pytest.raises(StoreCorrupt, match="contract"):
            await store.load_job("j")
        with pytest.raises(StoreCorrupt):
            await store.jobs()
    assert row_counts(path) == before


async def test_event_log_is_append_only(tmp_path: Path) -> None:
    """The events table refuses UPDATE and DELETE, even from a raw connection."""
    path = tmp_path / "s.db"
    await make_store_with_job(path)
    conn = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'forged'")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM events")
    conn.close()


async def test_read_only_store_reads_and_refuses_writes(tmp_path: Path) -> None:
    """read_only=True reads an existing store, refuses writes, and needs the file to exist."""
    path = tmp_path / "s.db"
    await make_store_with_job(path)
    before = row_counts(path)
    async with SqliteStore(path, read_only=True) as store:
        assert (await store.load_job("job-1")).checkpoint.next_cursor == "p2"
        with pytest.raises(StoreError):
            await store.save_keeper_state("k", {})
    assert row_counts(path) == before
    with pytest.raises(StoreError, match="no store"):
        async with SqliteStore(tmp_path / "missing.db", read_only=True):
            pass
    assert not (tmp_path / "missing.db").exists()


# ---------------------------------------------------------------- locking


async def test_a_long_foreign_lock_becomes_store_busy_not_database_is_locked(
    tmp_path: Path,
) -> None:
    """When another connection holds the write lock past the timeout, callers get StoreBusy."""
    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock(), busy_timeout=0.3) as store:
        await store.submit_job(JobContract(job_id="j"))
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusy) as info:
                await store.claim("j", "w1", TTL)
            assert "database is locked" not in str(info.value)
            assert isinstance(info.value, StoreError)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        # Once the lock is gone the same call succeeds.
        assert (await store.claim("j", "w1", TTL)).token == 1


async def test_a_short_foreign_lock_is_waited_out(tmp_path: Path) -> None:
    """A lock held for a moment by another connection delays the call but does not fail it."""
    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock()) as store:
        await store.submit_job(JobContract(job_id="j"))
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, blocker.execute, "ROLLBACK")
        lease = await store.claim("j", "w1", TTL)
        blocker.close()
        assert lease.token == 1


async def test_several_stores_on_one_file_write_concurrently(tmp_path: Path) -> None:
    """Four SqliteStores (four connections) writing at once: nothing lost, no lock errors."""
    path = tmp_path / "s.db"
    clock = FakeClock()
    stores = [SqliteStore(path, clock=clock) for _ in range(4)]
    for store in stores:
        await store.open()
    try:

        async def work(index: int, store: SqliteStore) -> None:
            for j in range(5):
                job_id = f"s{index}-j{j}"
                lease, cp = await running_job(store, job_id=job_id)
                revision = cp.checkpoint_revision
                for page in range(4):
                    ids = [f"{job_id}-{page}-{n}" for n in range(10)]
                    result = await store.commit_page(lease, revision, records(*ids), None, "p")
                    revision = result.checkpoint.checkpoint_revision

        await asyncio.gather(*(work(i, s) for i, s in enumerate(stores)))
        counts = [await stores[0].count_results(job.job_id) for job in await stores[0].jobs()]
        assert counts == [40] * 20
    finally:
        for store in stores:
            await store.close()


def test_several_processes_share_one_file_without_double_claims(tmp_path: Path) -> None:
    """Four OS processes drain 24 jobs from one file: each job claimed once, every page kept."""
    path = tmp_path / "s.db"

    async def setup() -> None:
        async with SqliteStore(path, clock=FakeClock()) as store:
            for i in range(24):
                await store.submit_job(JobContract(job_id=f"job-{i:02d}"))

    asyncio.run(setup())
    # Forked, not spawned: four real processes with their own connections and locks,
    # without four interpreter start-ups.
    fork = multiprocessing.get_context("fork")
    children = []
    for n in range(4):
        spec = {
            "mode": "drain",
            "kind": "sqlite",
            "location": str(path),
            "owner": f"proc-{n}",
            "pages": 3,
            "out": str(tmp_path / f"claimed-{n}.json"),
        }
        child = fork.Process(target=_worker.drain_in_child, args=(spec,))
        child.start()
        children.append(child)
    claimed: list[str] = []
    for n, child in enumerate(children):
        child.join(300)
        assert child.exitcode == 0
        claimed.extend(json.loads((tmp_path / f"claimed-{n}.json").read_text()))
    assert sorted(claimed) == [f"job-{i:02d}" for i in range(24)]

    async def verify() -> None:
        async with SqliteStore(path, clock=FakeClock()) as store:
            for job in await store.jobs():
                assert job.state == "done"
                assert await store.count_results(job.job_id) == 30
            tokens = [e.data["token"] for e in await store.events(kind="lease_claimed")]
            assert tokens == [1] * 24

    asyncio.run(verify())


def test_separate_interpreters_share_one_file(tmp_path: Path) -> None:
    """Two freshly started Python processes drain one file together without lock errors."""
    path = tmp_path / "s.db"

    async def setup() -> None:
        async with SqliteStore(path, clock=FakeClock()) as store:
            for i in range(8):
                await store.submit_job(JobContract(job_id=f"job-{i}"))

    asyncio.run(setup())
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                json.dumps(
                    {
                        "mode": "drain",
                        "kind": "sqlite",
                        "location": str(path),
                        "owner": f"p{n}",
                        "pages": 2,
                    }
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    claimed: list[str] = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        claimed.extend(json.loads(out.strip().splitlines()[-1]))
    assert sorted(claimed) == [f"job-{i}" for i in range(8)]


async def test_waiting_for_the_lock_does_not_block_the_event_loop(tmp_path: Path) -> None:
    """While a call waits on a foreign lock, other coroutines keep running."""
    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock()) as store:
        await store.submit_job(JobContract(job_id="j"))
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        asyncio.get_running_loop().call_later(0.3, blocker.execute, "ROLLBACK")
        await store.claim("j", "w1", timedelta(seconds=5))
        task.cancel()
        blocker.close()
        assert ticks >= 10


async def test_keeper_state_is_projected_into_inspection_tables(tmp_path: Path) -> None:
    """Generations, logins (names and fingerprints), grants and tabs a document's owner
    declares get their own rows, keyed by what they describe."""
    path = tmp_path / "s.db"
    projections: dict[str, list[dict[str, object]]] = {
        "keeper_generations": [{"generation": 1, "cause": "crashed"}, {"generation": 2}],
        "keeper_logins": [
            {
                "site": "billing.example",
                "owner": "billing",
                "generation": 2,
                "cookies": '[{"name":"sid","fingerprint":"abc"}]',
            }
        ],
        "keeper_grants": [{"grant_key": "1", "body": "{}"}],
        "keeper_tabs": [
            {
                "conversation": "billing",
                "last_verified_url": "https://billing.example/",
                "body": "{}",
            }
        ],
    }
    async with SqliteStore(path, clock=FakeClock()) as store:
        await store.save_keeper_state("k", {"generation": 2}, projections=projections)
    conn = sqlite3.connect(path)
    try:
        generations = conn.execute("SELECT generation, cause FROM keeper_generations").fetchall()
        logins = conn.execute("SELECT site, owner, cookies FROM keeper_logins").fetchall()
        tabs = conn.execute("SELECT conversation, last_verified_url FROM keeper_tabs").fetchall()
        grants = conn.execute("SELECT COUNT(*) FROM keeper_grants").fetchone()
    finally:
        conn.close()
    assert generations == [(1, "crashed"), (2, None)]
    assert logins == [
        ("billing.example", "billing", '[{"name":"sid","fingerprint":"abc"}]'),
    ]
    assert tabs == [("billing", "https://billing.example/")]
    assert grants == (1,)


async def test_group_commit_isolates_a_failing_write(tmp_path: Path) -> None:
    """Writes batched into one transaction fail alone: a stale commit beside good ones
    is rolled back by itself, the others are durable."""
    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock()) as store:
        lease_a, cp_a = await running_job(store, job_id="a")
        lease_b, cp_b = await running_job(store, job_id="b")
        # Keep the database thread busy so all three writes queue into one batch.
        occupy_store_thread(store, 0.2)
        outcomes = await asyncio.gather(
            store.commit_page(lease_a, cp_a.checkpoint_revision, records("a1"), "p2", "p1"),
            store.commit_page(lease_b, cp_b.checkpoint_revision + 5, records("x"), "p9", "p8"),
            store.commit_page(lease_b, cp_b.checkpoint_revision, records("b1"), "p2", "p1"),
            return_exceptions=True,
        )
        assert isinstance(outcomes[1], StaleLeaseError)
        assert not isinstance(outcomes[0], BaseException)
        assert not isinstance(outcomes[2], BaseException)
        assert [r.source_record_id for r in await store.results("a")] == ["a1"]
        assert [r.source_record_id for r in await store.results("b")] == ["b1"]
        assert (await store.load_checkpoint("b")).next_cursor == "p2"
    async with SqliteStore(path, clock=FakeClock()) as store:
        assert await store.count_results("b") == 1


async def test_group_committed_pages_each_report_their_own_counts_and_event(
    tmp_path: Path,
) -> None:
    """Page commits sharing one transaction each report their own new and repeated
    records and the id of their own event."""
    async with SqliteStore(tmp_path / "s.db", clock=FakeClock()) as store:
        lease_a, cp_a = await running_job(store, job_id="a")
        lease_b, cp_b = await running_job(store, job_id="b")
        first = await store.commit_page(
            lease_a, cp_a.checkpoint_revision, records("a1"), "p2", "p1"
        )
        # Keep the database thread busy so both commits queue into one batch.
        occupy_store_thread(store, 0.2)
        a, b = await asyncio.gather(
            store.commit_page(
                lease_a, first.checkpoint.checkpoint_revision, records("a1", "a2"), "p3", "p2"
            ),
            store.commit_page(
                lease_b, cp_b.checkpoint_revision, records("b1", "b2", "b3"), "p2", "p1"
            ),
        )
        assert (a.new_records, a.already_present) == (1, 1)
        assert (b.new_records, b.already_present) == (3, 0)
        for result, job_id in ((a, "a"), (b, "b")):
            [event] = await store.events(since_id=result.event_id - 1, limit=1)
            assert (event.id, event.kind, event.job_id) == (
                result.event_id,
                "page_committed",
                job_id,
            )
            assert event.revision == result.checkpoint.checkpoint_revision
            assert event.data["new_records"] == result.new_records


async def test_group_commit_redoes_the_batch_when_an_op_fails_after_writing(
    tmp_path: Path,
) -> None:
    """An op that raises after it wrote is undone completely; its batch-mates still commit."""

    def write_then_fail() -> StoreOperation[None]:
        yield StoreStatement("sneaky", "INSERT INTO keeper_state VALUES ('ghost', '{}', 'x')")
        raise ValueError("changed my mind")

    path = tmp_path / "s.db"
    async with SqliteStore(path, clock=FakeClock()) as store:
        occupy_store_thread(store, 0.2)
        outcomes = await asyncio.gather(
            store.save_keeper_state("a", {"generation": 1}),
            run_store_operation(store, write_then_fail),
            store.save_keeper_state("b", {"generation": 2}),
            return_exceptions=True,
        )
        assert outcomes[0] is None
        assert isinstance(outcomes[1], ValueError)
        assert outcomes[2] is None
        assert await store.keeper_ids() == ["a", "b"]


def test_store_constructors_take_no_test_hooks() -> None:
    """Crash tests watch statements through session_keeper.testing, not a constructor
    argument: the public signatures carry only what a user configures."""
    import inspect

    from session_keeper.stores import PostgresStore

    for cls in (SqliteStore, PostgresStore):
        params = set(inspect.signature(cls).parameters)
        assert not params & {"statement_hook", "hook", "fault_hooks"}, cls


def test_testing_mode_refuses_what_is_not_a_store() -> None:
    """watch_store_statements and occupy_store_thread name a wrong argument instead of
    silently doing nothing."""
    with pytest.raises(InvalidArgumentType):
        watch_store_statements(object(), print)
    with pytest.raises(InvalidArgumentType):
        occupy_store_thread(object(), 0.1)  # type: ignore[arg-type]


async def test_an_artifact_is_read_back_after_its_commit_and_its_caller_is_woken_once(
    tmp_path: Path,
) -> None:
    """put_artifact verifies in a later transaction, on the database thread: one wake-up."""
    labels: list[str] = []
    async with SqliteStore(tmp_path / "s.db") as store:
        loop = asyncio.get_running_loop()
        wakeups = 0
        original = loop.call_soon_threadsafe

        def counting(*args: object, **kwargs: object) -> object:
            nonlocal wakeups
            wakeups += 1
            return original(*args, **kwargs)  # type: ignore[arg-type]

        watch_store_statements(store, labels.append)
        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        try:
            ref = await store.put_artifact(b"page body", name="results/p1.json")
        finally:
            loop.call_soon_threadsafe = original  # type: ignore[method-assign]
            watch_store_statements(store, None)
        assert await store.read_artifact(ref.digest) == b"page body"
    # The read-back is its own transaction, begun after the write's COMMIT returned.
    assert labels == [
        "insert_artifact", "COMMIT", "COMMITTED", "select_artifact", "COMMIT", "COMMITTED",
    ]  # fmt: skip
    assert wakeups == 1
