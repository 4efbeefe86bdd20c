"""Jobs on many machines: three worker processes on one PostgreSQL, each with its own
pool of profiles, run ten jobs — none lost, none duplicated, no profile shared."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from session_keeper.jobs import JobContract
from session_keeper.stores import Event, PostgresStore
from session_keeper.testing import TemporaryPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_pool_worker_process.py")
JOBS = 10
PAGES, PER_PAGE = 3, 4  # as in the worker script


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    """Worker processes a test started; killed (by pid) if still running at the end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def spawn(dsn: str, worker_id: str, kind: str, root: Path) -> subprocess.Popen[str]:
    """A worker machine: the worker script in its own interpreter."""
    (root / worker_id).mkdir()
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), dsn, worker_id, kind, str(root / worker_id)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def line_from(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    """The first stdout line starting with ``prefix`` (stderr in the failure)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line.strip()
        if not line and proc.poll() is not None:
            break
    proc.kill()
    _, err = proc.communicate()
    raise AssertionError(f"no {prefix!r} line; stderr:\n{err[-3000:]}")


def spans_by_profile(events: list[Event]) -> dict[str, list[tuple[str, int, int, int]]]:
    """Per profile, each lease as (owner, token, acquired id, released id), in order;
    asserts each is released by its holder before the next is acquired."""
    out: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    open_: dict[str, tuple[str, int, int]] = {}
    for e in events:
        assert e.id is not None and e.lease_owner is not None
        profile, token = str(e.data["profile"]), int(e.data["token"])  # type: ignore[call-overload]
        if e.kind == "profile_acquired":
            assert profile not in open_, f"{profile} acquired by {e.lease_owner} while held"
            assert "took_over_from" not in e.data
            open_[profile] = (e.lease_owner, token, e.id)
        elif e.kind == "profile_released":
            owner, held_token, start = open_.pop(profile)
            assert (owner, held_token) == (e.lease_owner, token)
            out[profile].append((owner, token, start, e.id))
    assert not open_, f"leases never released: {open_}"
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["fake", pytest.param("chromium", marks=pytest.mark.chromium)])
async def test_three_pool_workers_run_ten_jobs_with_none_lost_or_duplicated_and_no_profile_shared(
    pg_server: TemporaryPostgres,
    workers: list[subprocess.Popen[str]],
    tmp_path: Path,
    kind: str,
) -> None:
    """Three worker processes (each its own KeeperPool, of fake browsers or of real
    Chromium profiles) claim ten jobs
    with SKIP LOCKED from one PostgreSQL: every job is done with all its records once,
    each page committed once, and the event log shows every job's pages committed while
    its worker held the job's profile, and each profile held by one worker at a time."""
    dsn = pg_server.create_database()
    async with PostgresStore(dsn) as store:
        for n in range(JOBS):
            await store.submit_job(
                JobContract(
                    job_id=f"job-{n}",
                    # Two accounts for three workers: they must contend for profiles.
                    account_alias=f"acct-{n % 2}",
                    start_cursor="page-1",
                    required_fields=("name",),
                )
            )
        workers += [spawn(dsn, f"worker-{i}", kind, tmp_path) for i in range(3)]
        for proc in workers:
            line_from(proc, "READY", timeout=60)
        for proc in workers:  # all three start claiming together
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = [json.loads(line_from(p, "DONE ", timeout=240)[5:]) for p in workers]
        print("worker reports:", reports)  # jobs per worker, ProfileHeld refusals
        for proc in workers:
            assert proc.wait(timeout=30) == 0

        # 0 lost, 0 duplicated.
        finished = [j for r in reports for j in r["done"]]
        assert sorted(finished) == sorted(f"job-{n}" for n in range(JOBS))
        jobs = await store.jobs()
        assert {j.contract.job_id: j.checkpoint.state for j in jobs} == {
            f"job-{n}": "done" for n in range(JOBS)
        }
        events = await store.events(limit=100_000)
        commits = [e for e in events if e.kind == "page_committed"]
        for n in range(JOBS):
            job_id = f"job-{n}"
            assert await store.count_results(job_id) == PAGES * PER_PAGE
            mine = [e for e in commits if e.job_id == job_id]
            # One commit per page, in order: no page committed twice.
            assert [e.data["next_cursor"] for e in mine] == ["page-2", "page-3", None]
            assert sum(int(e.data["new_records"]) for e in mine) == PAGES * PER_PAGE  # type: ignore[call-overload]
            assert all(int(e.data["already_present"]) == 0 for e in mine)  # type: ignore[call-overload]

        # Each profile used by one worker at a time, and each job inside its worker's lease.
        spans = spans_by_profile(
            [e for e in events if e.kind in ("profile_acquired", "profile_released")]
        )
        placed = [e for e in events if e.kind == "job_on_profile"]
        assert sorted(e.job_id or "" for e in placed) == sorted(finished)
        for e in placed:
            profile, token = str(e.data["profile"]), e.data["token"]
            assert profile == f"p{int(str(e.job_id).split('-')[1]) % 2}"
            (span,) = [s for s in spans[profile] if s[1] == token]
            owner, _, start, end = span
            assert owner == e.lease_owner == e.data["profile_owner"]
            job_commits = [c for c in commits if c.job_id == e.job_id]
            assert all(c.lease_owner == owner for c in job_commits)
            assert all(start < c.id < end for c in job_commits if c.id is not None)
        used_by = {s[0] for profile_spans in spans.values() for s in profile_spans}
        assert len(used_by) >= 2, f"only {used_by} worked: no concurrency was tested"
