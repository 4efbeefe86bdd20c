"""Atomic page commit under real process death, on SQLite and PostgreSQL.

A child process commits page 2 and is killed (``os._exit`` or SIGKILL) just before
each statement of the commit, just before ``COMMIT``, and just after it. The parent
then reopens the store: before ``COMMIT`` the previous checkpoint must be intact
with only page 1's records; after it, page 2 is fully there. The cursor never runs
ahead of durable output, and re-running the page afterwards duplicates nothing. The
page's artifact, written by the commit itself, is stored exactly when its checkpoint
is; one written beforehand by ``put_artifact`` is referenced exactly then.

Children are forked (no interpreter start-up, so every point is cheap to test); the
tests are synchronous so a child never inherits a running event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import shutil
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest

from session_keeper.testing import FakeClock, TemporaryPostgres
from tests.store import _worker
from tests.store._helpers import TTL, records, running_job, stored_artifacts
from tests.store.conftest import StoreMaker

PAGE_1 = ["r1", "r2", "r3"]
#: Page 2 repeats r3 (a boundary record seen twice) and adds two new ones.
PAGE_2 = ["r3", "r4", "r5"]
#: Points also tested with SIGKILL (the rest use ``os._exit``; both skip every
#: cleanup handler, SIGKILL also skips the interpreter's own exit path).
SIGKILL_POINTS = ("insert_results", "COMMIT", "COMMITTED")

_FORK = multiprocessing.get_context("fork")
EVIDENCE_DIGEST = "sha256:" + hashlib.sha256(_worker.EVIDENCE).hexdigest()
#: How the child writes page 2's artifact: inside the commit (the job loop's way), or
#: with put_artifact before it.
ARTIFACT_MODES = ("page", "put")


def crash_child(spec: dict[str, Any], index: int, sigkill: bool) -> BaseProcess:
    """Fork a child that commits page 2 and dies before hook call ``index``."""
    child = _FORK.Process(
        target=_worker.crash, args=({**spec, "crash_at": index, "sigkill": sigkill},)
    )
    child.start()
    return child


def wait_dead(child: BaseProcess, sigkill: bool, label: str) -> None:
    """The child died the way we killed it (not by an error of its own)."""
    child.join(120)
    expected = -9 if sigkill else 17
    assert child.exitcode == expected, f"{label}: exit {child.exitcode}"


async def prepare(maker: StoreMaker, artifact: str = "page") -> dict[str, Any]:
    """A running job with page 1 committed; returns the worker spec for page 2."""
    async with maker.open(FakeClock()) as store:
        lease, cp = await running_job(store)
        result = await store.commit_page(
            lease, cp.checkpoint_revision, records(*PAGE_1), "p2", "p1"
        )
    return {
        "kind": maker.kind,
        "location": maker.location,
        "job_id": "job-1",
        "owner": lease.owner,
        "token": lease.token,
        "revision": result.checkpoint.checkpoint_revision,
        "records": PAGE_2,
        "artifact": artifact,
    }


async def check_outcome(maker: StoreMaker, spec: dict[str, Any], committed: bool) -> None:
    """The store holds exactly the old or exactly the new checkpoint."""
    async with maker.open(FakeClock()) as store:
        cp = await store.load_checkpoint("job-1")
        ids = sorted(r.source_record_id for r in await store.results("job-1"))
        # Every accepted revision has its event; a rolled-back commit has none.
        revisions = [e.revision for e in await store.events() if e.revision is not None]
        if committed:
            assert cp.checkpoint_revision == spec["revision"] + 1
            assert (cp.next_cursor, cp.accepted_artifact) == ("page-3", "results/page-2.json")
            assert ids == ["r1", "r2", "r3", "r4", "r5"]
            assert (await store.events(newest_first=True, limit=1))[0].kind == "page_committed"
        else:
            assert cp.checkpoint_revision == spec["revision"]
            assert cp.next_cursor == "p2"
            assert ids == PAGE_1
        assert revisions == list(range(cp.checkpoint_revision + 1))
        # No artifact without its checkpoint, no checkpoint without its artifact.
        artifacts = await stored_artifacts(store)
        if committed:
            assert cp.artifact_digest == EVIDENCE_DIGEST
            assert artifacts == [(EVIDENCE_DIGEST, True)]
        elif spec["artifact"] == "page":
            assert artifacts == []
        else:  # put before the commit: durable, but referenced by no checkpoint
            assert artifacts == [(EVIDENCE_DIGEST, False)]


def points(labels: list[str]) -> list[tuple[int, str, bool]]:
    """Every statement point with os._exit, and a few with SIGKILL as well."""
    out = [(i, label, False) for i, label in enumerate(labels)]
    out += [(i, label, True) for i, label in enumerate(labels) if label in SIGKILL_POINTS]
    return out


def check_labels(labels: list[str], artifact: str) -> None:
    """The commit passes the statement points the test means to crash at."""
    assert labels[0] == "lock_lease_and_job"
    assert ("write_artifact" if artifact == "page" else "reference_artifact") in labels
    assert labels.count("COMMIT") == 1  # the artifact too: one transaction, one fsync
    assert labels[-2:] == ["COMMIT", "COMMITTED"]
    assert "insert_results" in labels
    assert "update_checkpoint" in labels
    assert "insert_event" in labels


@pytest.mark.parametrize("artifact", ARTIFACT_MODES)
def test_sqlite_commit_is_atomic_under_process_death(tmp_path: Path, artifact: str) -> None:
    """Killed before any commit statement, SQLite keeps the old checkpoint (and no page
    artifact); after, the new one with its artifact."""
    maker = StoreMaker("sqlite", str(tmp_path / "base.db"))
    spec = asyncio.run(prepare(maker, artifact))

    def copy_location(name: str) -> str:
        target = tmp_path / f"{name}.db"
        for suffix in ("", "-wal", "-shm"):
            source = Path(maker.location + suffix)
            if source.exists():
                shutil.copyfile(source, str(target) + suffix)
        return str(target)

    labels = _worker.labels({**spec, "location": copy_location("labels")})
    check_labels(labels, artifact)
    # One prepared copy per crash point, so each outcome is checked on its own.
    runs = []
    for index, label, sigkill in points(labels):
        location = copy_location(f"{index}-{int(sigkill)}")
        runs.append(
            (label, sigkill, location, crash_child({**spec, "location": location}, index, sigkill))
        )
    for label, sigkill, location, child in runs:
        wait_dead(child, sigkill, label)
        outcome = check_outcome(StoreMaker("sqlite", location), spec, label == "COMMITTED")
        asyncio.run(outcome)


@pytest.mark.postgres
@pytest.mark.parametrize("artifact", ARTIFACT_MODES)
def test_postgres_commit_is_atomic_under_process_death(
    pg_server: TemporaryPostgres, artifact: str
) -> None:
    """Killed before COMMIT, PostgreSQL rolls the commit (and its page artifact) back;
    after COMMIT both are durable."""
    maker = StoreMaker("postgres", pg_server.create_database())
    spec = asyncio.run(prepare(maker, artifact))
    base_name = maker.location.rsplit("/", 1)[1]
    scratch = f"{base_name}_labels"
    pg_server.psql(f'CREATE DATABASE "{scratch}" TEMPLATE "{base_name}"')
    labels = _worker.labels({**spec, "location": pg_server.dsn_for(scratch)})
    check_labels(labels, artifact)
    # Every pre-commit point at once on the same database: a child blocked on the
    # lease row lock goes on when the holder dies, then dies at its own point. None
    # of them may leave a trace.
    early = [p for p in points(labels) if p[1] != "COMMITTED"]
    runs = [(label, sigkill, crash_child(spec, i, sigkill)) for i, label, sigkill in early]
    for label, sigkill, child in runs:
        wait_dead(child, sigkill, label)
    asyncio.run(check_outcome(maker, spec, committed=False))
    child = crash_child(spec, labels.index("COMMITTED"), True)
    wait_dead(child, True, "COMMITTED")
    asyncio.run(check_outcome(maker, spec, committed=True))


def test_page_repeated_after_a_crash_is_not_duplicated(tmp_path: Path) -> None:
    """After a pre-commit crash the new owner repeats the page; no record is stored twice."""
    maker = StoreMaker("sqlite", str(tmp_path / "s.db"))
    spec = asyncio.run(prepare(maker))
    wait_dead(crash_child(spec, 4, False), False, "mid-commit")

    async def resume() -> None:
        clock = FakeClock()
        async with maker.open(clock) as store:
            clock.advance(TTL * 120)  # the dead worker's lease (one hour) has run out
            lease = await store.claim_next_ready("w2", TTL)
            assert lease is not None
            result = await store.commit_page(
                lease, spec["revision"], records(*PAGE_2), "page-3", "p2"
            )
            assert (result.new_records, result.already_present) == (2, 1)
            ids = [r.source_record_id for r in await store.results("job-1")]
            assert ids == ["r1", "r2", "r3", "r4", "r5"]

    asyncio.run(resume())
