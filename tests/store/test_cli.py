"""The ``session-keeper`` inspection CLI, on a SQLite store and a PostgreSQL one."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from session_keeper._model.events import (
    AUDIT_ARCHIVE_KIND,
    AUDIT_ENTRY_KIND,
    AUDIT_HEAD_KIND,
    EventKind,
)
from session_keeper.cli import main
from session_keeper.jobs import JobContract
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import Event, SqliteStore, Store
from session_keeper.testing import FakeClock, TemporaryPostgres
from tests.store._helpers import records, running_job
from tests.store.conftest import StoreMaker

KEEPER_STATE = {
    "generation": 2,
    "generations": [
        {
            "generation": 1,
            "started_at": "2026-10-13T09:00:00+00:00",
            "ended_at": "2026-10-13T09:20:00+00:00",
            "cause": "crashed",
        },
        {"generation": 2, "started_at": "2026-10-13T09:20:01+00:00"},
    ],
    "logins": [
        {
            "site": "billing.example",
            "owner": "billing",
            "account": "ana@billing",
            "recorded_at": "2026-10-13T09:21:00+00:00",
            "generation": 2,
            "cookies": [{"name": "sid", "fingerprint": "f" * 64}],
        }
    ],
    "grants": [
        {
            "conversation": "billing",
            "site": "billing.example",
            "actions": ["read", "write"],
            "expires_at": None,
        }
    ],
    "tabs": [{"conversation": "billing", "last_verified_url": "https://billing.example/"}],
}


async def populate(store: Store) -> None:
    """A keeper state, a job with one page committed, and a custom event."""
    await store.save_keeper_state("main", KEEPER_STATE)
    lease, cp = await running_job(store, job_id="catalogue-audit-001")
    await store.commit_page(lease, cp.checkpoint_revision, records("a", "b"), "page-2", "page-1")
    await store.submit_job(JobContract(job_id="other"))
    await store.append_event(
        Event(kind="step_failed", at=FakeClock().now(), job_id="other", failure_class="transient")
    )


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    """A populated SQLite store file."""
    path = tmp_path / "agent.db"

    async def build() -> None:
        async with StoreMaker("sqlite", str(path)).open(FakeClock()) as store:
            await populate(store)

    asyncio.run(build())
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (status, stdout, stderr)."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_generations_table_marks_the_current_one(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`generations` lists each browser generation, starring the current one."""
    status, out, _ = run(capsys, "store", "generations", "--db", str(sqlite_db))
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "KEEPER",
        "GENERATION",
        "CURRENT",
        "STARTED_AT",
        "ENDED_AT",
        "CAUSE",
    ]
    assert "crashed" in lines[2]
    assert lines[3].split()[:3] == ["main", "2", "*"]


def test_ledger_shows_fingerprints_never_values(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger` shows who logged in where with cookie names and fingerprints."""
    status, out, _ = run(capsys, "store", "ledger", "--db", str(sqlite_db))
    assert status == 0
    assert "billing.example" in out
    assert "ana@billing" in out
    assert "sid=ffffffffffff" in out
    status, out, _ = run(capsys, "store", "ledger", "--db", str(sqlite_db), "--json")
    [row] = json.loads(out)
    assert row["cookies"] == [{"name": "sid", "fingerprint": "f" * 64}]


def test_grants_and_json_option_before_or_after_the_command(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json` and `--db` work before or after the command, and in the first shape
    (`session-keeper --db x grants`); all print the grants as stored."""
    _, before, _ = run(capsys, "store", "--json", "--db", str(sqlite_db), "grants")
    _, after, _ = run(capsys, "store", "grants", "--db", str(sqlite_db), "--json")
    _, first_shape, _ = run(capsys, "--json", "--db", str(sqlite_db), "grants")
    _, mixed, _ = run(capsys, "grants", "--db", str(sqlite_db), "--json")
    assert json.loads(before) == json.loads(after) == json.loads(first_shape)
    assert json.loads(mixed) == json.loads(before)
    assert json.loads(before)[0]["actions"] == ["read", "write"]
    _, table, _ = run(capsys, "store", "grants", "--db", str(sqlite_db))
    assert "read,write" in table


def test_jobs_show_their_last_checkpoint(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`jobs` lists state, revision, cursor and lease holder; --json has the whole checkpoint."""
    status, out, _ = run(capsys, "store", "jobs", "--db", str(sqlite_db))
    assert status == 0
    line = next(x for x in out.splitlines() if x.startswith("catalogue-audit-001"))
    assert line.split()[:5] == ["catalogue-audit-001", "running", "2", "page-1", "page-2"]
    assert "w1#1" in line
    _, out, _ = run(capsys, "store", "jobs", "--db", str(sqlite_db), "--json", "--state", "ready")
    [job] = json.loads(out)
    assert job["job_id"] == "other"
    assert next(iter(job["checkpoint"])) == "schema_version"


def test_events_are_recent_and_filterable(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`events` prints the most recent events oldest first; --job filters."""
    _, out, _ = run(capsys, "store", "events", "--db", str(sqlite_db), "--limit", "2", "--json")
    kinds = [e["kind"] for e in json.loads(out)]
    assert kinds == ["job_submitted", "step_failed"]
    _, out, _ = run(
        capsys, "store", "events", "--db", str(sqlite_db), "--job", "catalogue-audit-001"
    )
    assert "page_committed" in out
    assert "step_failed" not in out


def test_cli_never_writes_to_the_store(sqlite_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every command leaves the database file byte for byte as it was."""
    before = hashlib.sha256(sqlite_db.read_bytes()).hexdigest()
    for command in ("generations", "ledger", "grants", "jobs", "events"):
        assert run(capsys, "store", command, "--db", str(sqlite_db))[0] == 0
    assert hashlib.sha256(sqlite_db.read_bytes()).hexdigest() == before


def test_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing or corrupt store gives a one-line error and status 2, creating nothing."""
    missing = tmp_path / "missing.db"
    status, _, err = run(capsys, "store", "jobs", "--db", str(missing))
    assert status == 2
    assert err.startswith("session-keeper store: error: no store")
    assert not missing.exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"x" * 4096)
    status, _, err = run(capsys, "store", "jobs", "--db", str(garbage))
    assert (status, err.count("\n")) == (2, 1)


def test_empty_store_prints_nothing_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store with no keeper state says so instead of printing an empty table."""
    path = tmp_path / "empty.db"

    async def build() -> None:
        async with StoreMaker("sqlite", str(path)).open(FakeClock()):
            pass

    asyncio.run(build())
    assert run(capsys, "store", "ledger", "--db", str(path))[1] == "(nothing)\n"


def test_console_script_entry_point_runs(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m session_keeper.cli` (what the console script calls) works; help explains
    that the keeper, not the store, owns the state document's shape."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "session_keeper.cli",
            "store",
            "jobs",
            "--db",
            str(sqlite_db),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert {j["job_id"] for j in json.loads(proc.stdout)} == {"catalogue-audit-001", "other"}
    with pytest.raises(SystemExit) as exit_info:
        main(["store", "--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert "written by the SessionKeeper" in help_text


@pytest.mark.postgres
def test_cli_reads_a_postgres_store(
    pg_server: TemporaryPostgres, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dsn` inspects a PostgreSQL store the same way."""
    dsn = pg_server.create_database()

    async def build() -> None:
        async with StoreMaker("postgres", dsn).open(FakeClock()) as store:
            await populate(store)

    asyncio.run(build())
    status, out, _ = run(capsys, "store", "ledger", "--dsn", dsn, "--json")
    assert status == 0
    assert json.loads(out)[0]["site"] == "billing.example"
    status, out, _ = run(capsys, "store", "jobs", "--dsn", dsn)
    assert "catalogue-audit-001" in out


def test_prune_forgets_old_events_and_keeps_what_the_job_loop_reads(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``prune`` forgets events older than the age given (reporting how many), keeping
    each job's newest event of each kind; results of jobs not ended stay."""

    async def add_old_events() -> None:
        async with SqliteStore(str(sqlite_db), clock=FakeClock()) as store:
            old: list[tuple[EventKind, str | None]] = [
                ("guard_block", None),
                ("step_failed", "other"),
            ]
            for kind, job in old:
                event = Event(kind=kind, at=FakeClock().now(), job_id=job)
                await store.append_event(event)

    asyncio.run(add_old_events())
    status, out, _ = run(
        capsys,
        "store",
        "prune",
        "--db",
        str(sqlite_db),
        "--events-older-than",
        "0s",
        "--results-older-than",
        "0s",
        "--json",
    )
    assert status == 0
    removed = {r["pruned"]: r["removed"] for r in json.loads(out)}
    assert removed["results"] == 0  # no job ended
    assert removed["events"] == 2  # the block, and the older of other's two failures

    async def check() -> None:
        async with SqliteStore(str(sqlite_db)) as store:
            events = await store.events(limit=1000)
            kinds = [(e.job_id, e.kind) for e in events]
            assert len(kinds) == len(set(kinds))
            assert await store.count_results("catalogue-audit-001") == 2

    asyncio.run(check())


def test_prune_forgets_old_write_intents_and_keeps_newer_ones(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``prune --write-intents-older-than`` forgets the intents recorded before the age
    given (reporting how many); one recorded since stays, so its step still reads back."""
    ttl = timedelta(hours=1)
    now = datetime.now(UTC)

    async def intend(at: datetime, key: str) -> None:
        async with SqliteStore(str(sqlite_db), clock=FakeClock(at)) as store:
            lease = await store.acquire_profile(key, "w1", ttl)
            await store.intend_write(lease, ttl, key)

    asyncio.run(intend(now - timedelta(days=40), "run-old:1:refund"))
    asyncio.run(intend(now, "run-new:1:refund"))
    status, out, _ = run(
        capsys, "store", "prune", "--db", str(sqlite_db), "--write-intents-older-than", "30d",
        "--json",
    )  # fmt: skip
    assert status == 0
    assert json.loads(out) == [{"pruned": "write_intents", "removed": 1}]

    async def first(key: str) -> bool:
        async with SqliteStore(str(sqlite_db), clock=FakeClock(now + 2 * ttl)) as store:
            lease = await store.acquire_profile(key, "w2", ttl)
            return (await store.intend_write(lease, ttl, key)).first

    assert asyncio.run(first("run-old:1:refund")) is True
    assert asyncio.run(first("run-new:1:refund")) is False


@pytest.mark.parametrize(
    "argv",
    [["prune"], ["prune", "--events-older-than", "soon"], ["prune", "--events-older-than", "-1d"]],
)
def test_prune_refuses_bad_ages_and_changes_nothing(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A prune without an age, or with one that is not an age, exits 2 and changes nothing."""
    before = hashlib.sha256(sqlite_db.read_bytes()).hexdigest()
    try:
        status = run(capsys, "store", *argv, "--db", str(sqlite_db))[0]
    except SystemExit as exit_:  # argparse's own refusal of a malformed value
        status = exit_.code  # type: ignore[assignment]
    assert status == 2
    assert hashlib.sha256(sqlite_db.read_bytes()).hexdigest() == before


def test_prune_of_a_missing_store_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pruning a path with no store is an error, and no store appears there."""
    missing = tmp_path / "missing.db"
    status, _, err = run(
        capsys, "store", "prune", "--db", str(missing), "--events-older-than", "1d"
    )
    assert status == 2 and "no store" in err
    assert not missing.exists()


KEYS = "k1=" + "ab" * 32
OLD = datetime(2020, 1, 1, tzinfo=UTC)


async def _audit_chain(path: Path, entries: int) -> None:
    """``entries`` audit entries written long ago, one a batch (a sealed head every 100)."""
    async with SqliteStore(str(path), clock=FakeClock(OLD)) as store:
        audit = AuditLog(store, Keyring.from_text(KEYS), clock=FakeClock(OLD))
        for i in range(entries):
            await audit.record_many([("decision", {"n": i}, None)])


async def _kinds(path: Path) -> dict[str, int]:
    async with SqliteStore(str(path), read_only=True) as store:
        events = await store.events(limit=10_000)
    return {kind: sum(e.kind == kind for e in events) for kind in {e.kind for e in events}}


def test_prune_archives_the_audit_chain_with_the_keepers_keys_and_it_still_verifies(
    sqlite_db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prune --audit-older-than`` with the keeper's keys in the environment archives the
    chain's old part below a sealed mark: the chain verifies in full and opens after it."""
    asyncio.run(_audit_chain(sqlite_db, 250))
    monkeypatch.setenv("SESSION_KEEPER_KEYS", KEYS)
    status, out, _ = run(
        capsys, "store", "prune", "--db", str(sqlite_db), "--audit-older-than", "30d", "--json"
    )
    assert status == 0
    # Entries 1..200 and the heads after 100 and 200: up to the newest head before the cut.
    assert json.loads(out) == [{"pruned": "audit", "removed": 202}]
    kinds = asyncio.run(_kinds(sqlite_db))
    assert (kinds[AUDIT_ENTRY_KIND], kinds.get(AUDIT_HEAD_KIND, 0), kinds[AUDIT_ARCHIVE_KIND]) == (
        50,
        0,
        1,
    )

    async def check() -> None:
        async with SqliteStore(str(sqlite_db)) as store:
            keyring = Keyring.from_text(KEYS)
            assert await verify_audit(store, keyring) == 250
            assert await AuditLog(store, keyring).open() == 250

    asyncio.run(check())


@pytest.mark.parametrize("keys", [None, "k1=" + "cd" * 32], ids=["no keys", "other keys"])
def test_prune_of_the_audit_chain_without_the_keepers_keys_changes_nothing(
    sqlite_db: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keys: str | None,
) -> None:
    """Without keys, or with keys the chain was not sealed with, ``prune`` exits 2 with a
    clear error and removes nothing, not even the events it was also asked to forget."""
    asyncio.run(_audit_chain(sqlite_db, 150))
    monkeypatch.delenv("SESSION_KEEPER_KEY_FILE", raising=False)
    if keys is None:
        monkeypatch.delenv("SESSION_KEEPER_KEYS", raising=False)
    else:
        monkeypatch.setenv("SESSION_KEEPER_KEYS", keys)
    before = asyncio.run(_kinds(sqlite_db))
    status, out, err = run(
        capsys,
        "store",
        "prune",
        "--db",
        str(sqlite_db),
        "--audit-older-than",
        "30d",
        "--events-older-than",
        "0s",
    )
    assert status == 2 and out == ""
    expected = "SESSION_KEEPER_KEYS" if keys is None else "not the keys the keeper sealed it with"
    assert expected in err
    assert "cd" * 32 not in err
    assert asyncio.run(_kinds(sqlite_db)) == before
