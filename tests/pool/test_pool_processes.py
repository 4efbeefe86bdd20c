"""Profile leases across OS processes on one PostgreSQL: racing pools never hold one
profile at once; a dead holder is detected by expiry; a stalled one is fenced."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from session_keeper.errors import ProfileHeld
from session_keeper.stores import Event, PostgresStore, ProfileLease
from session_keeper.stores._postgres import IDLE_IN_TRANSACTION_MS
from session_keeper.testing import TemporaryPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_pool_process.py")


def start(*args: str) -> subprocess.Popen[str]:
    """The pool process script in its own interpreter."""
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 60.0) -> str:
    """The first stdout line starting with ``prefix`` (the process's stderr on failure)."""
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


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test started; killed (by pid) if still running at the end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()  # SIGKILL ends a stopped process too
        proc.communicate()


async def take_over(store: PostgresStore, owner: str, ttl_s: float) -> ProfileLease:
    """p0 for ``owner`` as soon as its holder's lease let go (ProfileHeld tried again),
    bounded, so a holder that never lets go fails the test instead of hanging the run."""

    async def attempts() -> ProfileLease:
        while True:
            try:
                return await store.acquire_profile("p0", owner, timedelta(seconds=ttl_s))
            except ProfileHeld:
                await asyncio.sleep(0.05)

    return await asyncio.wait_for(attempts(), timeout=4 * IDLE_IN_TRANSACTION_MS / 1000)


def holder_intervals(events: list[Event]) -> dict[str, list[tuple[str, int, int, int | None]]]:
    """Per profile: (owner, token, acquired event id, released event id or None)."""
    out: dict[str, list[tuple[str, int, int, int | None]]] = {}
    for e in events:
        profile = str(e.data.get("profile"))
        spans = out.setdefault(profile, [])
        if e.kind == "profile_acquired":
            assert e.id is not None and e.lease_owner is not None
            spans.append((e.lease_owner, int(e.data["token"]), e.id, None))  # type: ignore[call-overload]
        elif e.kind == "profile_released":
            owner, token, start, end = spans[-1]
            assert (owner, token, end) == (e.lease_owner, e.data["token"], None)
            spans[-1] = (owner, token, start, e.id)
    return out


async def test_two_processes_racing_for_profiles_never_hold_one_at_once(
    pg_server: TemporaryPostgres, procs: list[subprocess.Popen[str]]
) -> None:
    """Two pool processes on one PostgreSQL take 60 turns each over the same four
    profiles: in the event log every profile's leases follow one another (each released
    before the next is acquired, tokens 1, 2, 3...), no lease is ever taken over, both
    processes used profiles, and they did contend (ProfileHeld seen)."""
    dsn = pg_server.create_database()
    async with PostgresStore(dsn):
        pass  # migrate once, before the racers start
    procs += [start("race", dsn, f"proc-{i}", "60") for i in range(2)]
    results = [json.loads(read_line(p, "DONE ", timeout=110)[5:]) for p in procs]
    for p in procs:
        assert p.wait(timeout=30) == 0
    async with PostgresStore(dsn) as store:
        events = [
            e
            for e in await store.events(limit=100_000)
            if e.kind in ("profile_acquired", "profile_released")
        ]
    spans = holder_intervals(events)
    owners = set()
    for profile, profile_spans in spans.items():
        assert [s[1] for s in profile_spans] == list(range(1, len(profile_spans) + 1)), profile
        for before, after in itertools.pairwise(profile_spans):
            assert before[3] is not None and before[3] < after[2], (profile, before, after)
        owners |= {s[0] for s in profile_spans}
    assert owners == {"proc-0", "proc-1"}
    assert not any("took_over_from" in e.data for e in events)
    assert sum(sum(r["used"].values()) for r in results) == 120
    assert sum(r["held_elsewhere"] for r in results) > 0


async def test_a_sigkilled_holder_is_detected_by_expiry_and_taken_over(
    pg_server: TemporaryPostgres, procs: list[subprocess.Popen[str]]
) -> None:
    """A holder SIGKILLed while holding p0: nobody may take p0 before its lease expires;
    after expiry another holder takes it with a larger token, and the takeover names the
    dead holder."""
    dsn = pg_server.create_database()
    async with PostgresStore(dsn):
        pass
    procs.append(start("hold", dsn, "doomed", "3"))
    token = int(read_line(procs[0], "HELD ").split()[1])
    procs[0].kill()  # SIGKILL: no release, no goodbye
    procs[0].wait(timeout=10)
    async with PostgresStore(dsn) as store:
        dead = await store.profile_lease("p0")
        assert dead is not None and (dead.owner, dead.token) == ("doomed", token)
        lease = await take_over(store, "survivor", 30)
        assert datetime.now(UTC) >= dead.expires_at
        assert lease.token == token + 1
        last = (await store.events(kind="profile_acquired", newest_first=True, limit=1))[0]
        assert (last.lease_owner, last.data["took_over_from"]) == ("survivor", "doomed")


async def test_a_stalled_holder_is_fenced_and_its_late_writes_refused(
    pg_server: TemporaryPostgres, procs: list[subprocess.Popen[str]]
) -> None:
    """A holder frozen (SIGSTOP) past its lease: another takes p0 over and saves; the
    holder, resumed, has every later save refused — the profile's document is the new
    holder's, untouched."""
    dsn = pg_server.create_database()
    async with PostgresStore(dsn):
        pass
    procs.append(start("hold", dsn, "stalled", "2"))
    holder = procs[0]
    token = int(read_line(holder, "HELD ").split()[1])
    os.kill(holder.pid, signal.SIGSTOP)
    async with PostgresStore(dsn) as store:
        lease = await take_over(store, "successor", 60)
        assert lease.token == token + 1
        await store.save_keeper_state_fenced(lease, "profile:p0", {"written_by": "successor"})
        rows_before = _head_written_at(dsn)
        os.kill(holder.pid, signal.SIGCONT)
        try:
            out, err = holder.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            holder.kill()
            out, err = holder.communicate()
            raise AssertionError(f"the stalled holder did not stop: {out}\n{err[-3000:]}") from None
        assert holder.returncode == 0, err[-3000:]
        assert any(line.startswith(("REFUSED", "FENCED")) for line in out.splitlines()), out
        assert await store.load_keeper_state("profile:p0") == {"written_by": "successor"}
        assert _head_written_at(dsn) == rows_before  # the holder's rows: no late write either
        current = await store.profile_lease("p0")
        assert current is not None and (current.owner, current.token) == ("successor", token + 1)


async def test_a_holder_frozen_mid_save_with_the_lease_row_locked_is_fenced_within_the_stall_bound(
    pg_server: TemporaryPostgres, procs: list[subprocess.Popen[str]]
) -> None:
    """A holder that froze between sending a fenced save and its COMMIT keeps the lease
    row locked on a session the server never times out ("active", waiting on its
    client): the successor's takeover ends that session once it has stalled the takeover
    for the stall bound, takes p0 over, and saves; the holder, resumed, finds its save
    refused and writes nothing."""
    dsn = pg_server.create_database()
    async with PostgresStore(dsn):
        pass
    procs.append(start("freeze", dsn, "frozen", "2"))
    holder = procs[0]
    token = int(read_line(holder, "HELD ").split()[1])
    read_line(holder, "FROZEN")
    started = time.monotonic()
    async with PostgresStore(dsn) as store:
        lease = await take_over(store, "successor", 60)
        waited = time.monotonic() - started
        assert lease.token == token + 1
        await store.save_keeper_state_fenced(lease, "profile:p0", {"written_by": "successor"})
        rows_before = _head_written_at(dsn)
        os.kill(holder.pid, signal.SIGCONT)
        out, err = holder.communicate(timeout=60)
        assert holder.returncode == 0, err[-3000:]
        assert any(line.startswith(("REFUSED", "FENCED")) for line in out.splitlines()), out
        assert await store.load_keeper_state("profile:p0") == {"written_by": "successor"}
        assert _head_written_at(dsn) == rows_before
    # The frozen session was ended by the watch, not by a lease that ran out first.
    assert waited >= IDLE_IN_TRANSACTION_MS / 1000, waited


def _head_written_at(dsn: str) -> object:
    """When the holder's keeper rows were last written (any write moves it)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT updated_at FROM keeper_heads WHERE keeper_id = 'profile:p0'"
        ).fetchone()
    return None if row is None else row[0]
