"""Retention on every store: old events and ended jobs' results can be forgotten; the audit chain,
what the job loop reads and everything newer stay, and the log refuses other deletions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

import pytest

from session_keeper._model.events import (
    AUDIT_ARCHIVE_KIND,
    AUDIT_ENTRY_KIND,
    AUDIT_HEAD_KIND,
    EventKind,
)
from session_keeper.errors import (
    AuditTampered,
    InvalidArgument,
    InvalidArgumentType,
    StoreBusy,
    UnknownKey,
)
from session_keeper.jobs import JobContract
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import Event, Pruned, Store
from session_keeper.stores._schema import KEPT_EVENT_KINDS
from session_keeper.testing import FakeClock
from tests.store._helpers import records, running_job
from tests.store.conftest import StoreMaker

DAY = timedelta(days=1)


async def _log(store: Store, clock: FakeClock, kind: EventKind, **fields: object) -> None:
    await store.append_event(Event(kind=kind, at=clock.now(), **fields))  # type: ignore[arg-type]


async def _kinds(store: Store) -> list[str]:
    return [e.kind for e in await store.events(limit=10_000)]


def test_the_kept_kinds_are_the_audit_chains() -> None:
    """The kinds the store never prunes include the audit chain's entries, heads and
    archive marks."""
    assert {AUDIT_ENTRY_KIND, AUDIT_HEAD_KIND, AUDIT_ARCHIVE_KIND} <= set(KEPT_EVENT_KINDS)


async def test_prune_events_forgets_only_events_older_than_the_cutoff(
    store: Store, clock: FakeClock
) -> None:
    """Events older than the cut-off go; newer ones stay, in order, with their ids."""
    for i in range(5):
        await _log(store, clock, "guard_block", data={"n": i})
    clock.advance(2 * DAY)
    await _log(store, clock, "guard_block", data={"n": "new"})
    newer = await store.events(limit=10)
    pruned = await store.prune_events(older_than=DAY)
    assert pruned == Pruned(removed=5, through_id=newer[4].id)
    assert await store.events(limit=10) == newer[5:]


async def test_prune_events_keeps_every_audit_entry(store: Store, clock: FakeClock) -> None:
    """Audit entries are never pruned, however old: the chain stays whole to verify."""
    await _log(store, clock, AUDIT_ENTRY_KIND, data={"seq": 1})
    await _log(store, clock, "guard_block")
    await _log(store, clock, AUDIT_ENTRY_KIND, data={"seq": 2})
    clock.advance(30 * DAY)
    assert (await store.prune_events(older_than=DAY)).removed == 1
    assert await _kinds(store) == [AUDIT_ENTRY_KIND, AUDIT_ENTRY_KIND]


async def test_prune_events_keeps_the_newest_event_of_each_kind_of_a_stored_job(
    store: Store, clock: FakeClock
) -> None:
    """For a job still in the store, the newest event of each kind survives (the job loop
    reads the last lease claim, page commit, pause and resume); older ones go."""
    await running_job(store)
    for i in range(3):
        await _log(store, clock, "page_committed", job_id="job-1", revision=i)
        await _log(store, clock, "human_pause", job_id="job-1", revision=i)
    await _log(store, clock, "page_committed", job_id="gone-job", revision=9)
    clock.advance(2 * DAY)
    await store.prune_events(older_than=DAY)
    left = await store.events(limit=100)
    kinds = [e.kind for e in left]
    assert all(e.job_id == "job-1" for e in left)  # the unknown job's event went
    assert sorted(kinds) == sorted(set(kinds))  # one of each kind
    assert {"lease_claimed", "page_committed", "human_pause"} <= set(kinds)
    assert {e.kind: e.revision for e in left if e.kind != "lease_claimed"}.items() >= {
        ("page_committed", 2),
        ("human_pause", 2),
    }
    # What the loop asks for still answers.
    newest = await store.events(job_id="job-1", kind="page_committed", limit=1, newest_first=True)
    assert newest[0].revision == 2


async def test_prune_events_with_nothing_old_enough_changes_nothing(
    store: Store, clock: FakeClock
) -> None:
    """A pass with nothing older than the cut-off removes nothing and reports no mark."""
    await _log(store, clock, "guard_block")
    assert await store.prune_events(older_than=DAY) == Pruned(removed=0)
    assert await _kinds(store) == ["guard_block"]


@pytest.mark.parametrize(
    ("older_than", "error"),
    [("1d", InvalidArgumentType), (3600, InvalidArgumentType), (-DAY, InvalidArgument)],
)
async def test_prune_refuses_a_bad_age_and_changes_nothing(
    store: Store, clock: FakeClock, older_than: object, error: type[Exception]
) -> None:
    """A non-timedelta or negative age is a typed error; no event and no result goes."""
    await running_job(store)
    await _log(store, clock, "guard_block")
    clock.advance(10 * DAY)
    before = await store.events(limit=100)
    with pytest.raises(error):
        await store.prune_events(older_than=older_than)  # type: ignore[arg-type]
    with pytest.raises(error):
        await store.prune_results(older_than=older_than)  # type: ignore[arg-type]
    assert await store.events(limit=100) == before
    assert (await store.load_job("job-1")).checkpoint.state == "running"


async def test_prune_results_forgets_only_results_of_jobs_ended_before_the_cutoff(
    store: Store, clock: FakeClock
) -> None:
    """Results of jobs that ended before the cut-off go; results of running, paused and
    recently ended jobs stay, and every job stays with its final state."""
    jobs = ("old-done", "still-running", "paused")
    for job_id in jobs:
        lease, cp = await running_job(store, job_id)
        await store.commit_page(lease, cp.checkpoint_revision, records("a", "b"), "c1", "p1")
    done = await store.load_job("old-done")
    assert done.lease is not None
    await store.transition(done.lease, done.checkpoint.checkpoint_revision, "done")
    paused = await store.load_job("paused")
    assert paused.lease is not None
    await store.transition(
        paused.lease, paused.checkpoint.checkpoint_revision, "awaiting_human", pause_reason="x"
    )
    clock.advance(2 * DAY)
    lease, cp = await running_job(store, "recent-failed")
    await store.commit_page(lease, cp.checkpoint_revision, records("z"), None, "p1")
    await store.transition(lease, cp.checkpoint_revision + 1, "failed")

    assert await store.prune_results(older_than=DAY) == Pruned(removed=2)
    counts = {j.job_id: await store.count_results(j.job_id) for j in await store.jobs()}
    assert counts == {"old-done": 0, "still-running": 2, "paused": 2, "recent-failed": 1}
    states = {j.job_id: j.checkpoint.state for j in await store.jobs()}
    assert states["old-done"] == "done"


async def test_a_job_whose_results_were_pruned_is_not_run_again(
    store: Store, clock: FakeClock
) -> None:
    """Submitting an ended job's contract after its results were pruned returns the ended
    job, as before: retention never turns a finished job back into a new one."""
    lease, cp = await running_job(store)
    await store.commit_page(lease, cp.checkpoint_revision, records("a"), None, "p1")
    await store.transition(lease, cp.checkpoint_revision + 1, "done")
    clock.advance(2 * DAY)
    await store.prune_results(older_than=DAY)
    job = await store.submit_job(JobContract(job_id="job-1"))
    assert job.checkpoint.state == "done"


def _raw_delete(maker: StoreMaker, where: str) -> None:
    sql = f"DELETE FROM events WHERE {where}"
    if maker.kind == "sqlite":
        conn = sqlite3.connect(maker.location, isolation_level=None)
        try:
            conn.execute(sql)
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(maker.location, autocommit=True) as pg:
        pg.execute(sql.encode())


def _refused(maker: StoreMaker) -> tuple[type[Exception], ...]:
    if maker.kind == "sqlite":
        return (sqlite3.IntegrityError,)
    import psycopg

    return (psycopg.Error,)


async def test_the_log_refuses_deletes_retention_did_not_release(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """Outside a retention pass the database refuses deleting events: above the archive
    mark, or an audit entry below it."""
    async with maker.open(clock) as store:
        await _log(store, clock, AUDIT_ENTRY_KIND, data={"seq": 1})
        await _log(store, clock, "guard_block")
        clock.advance(2 * DAY)
        await _log(store, clock, "guard_block")
        await store.prune_events(older_than=DAY)
    with pytest.raises(_refused(maker)):
        _raw_delete(maker, "kind <> 'audit'")
    with pytest.raises(_refused(maker)):
        _raw_delete(maker, "kind = 'audit'")
    async with maker.open(clock) as store:
        assert await _kinds(store) == [AUDIT_ENTRY_KIND, "guard_block"]


async def test_a_pruned_log_keeps_an_audit_chain_that_verifies_and_opens_from_its_head(
    store: Store, clock: FakeClock
) -> None:
    """After a retention pass over a busy log, the audit chain still verifies in full and
    an open still starts from its sealed head (the heads are kept like the entries)."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = AuditLog(store, keyring)
    for i in range(250):
        await _log(store, clock, "guard_block", data={"n": i})
        await audit.record_many([("decision", {"n": i}, None)])
    clock.advance(30 * DAY)
    pruned = await store.prune_events(older_than=DAY)
    assert pruned.removed == 250
    assert await verify_audit(store, keyring) == 250
    reopened = AuditLog(store, keyring)
    await reopened.record_many([("decision", {"n": "after"}, None)])
    assert await verify_audit(store, keyring) == 251


async def _chain(store: Store, clock: FakeClock, keyring: Keyring, entries: int) -> AuditLog:
    """An audit log that wrote ``entries`` entries, one a batch (a head every 100)."""
    audit = AuditLog(store, keyring, clock=clock)
    for i in range(entries):
        await audit.record_many([("decision", {"n": i}, None)])
    return audit


async def _count(store: Store, kind: EventKind) -> int:
    return len(await store.events(kind=kind, limit=10_000))


async def test_an_archived_audit_chain_verifies_from_its_mark_and_goes_on(
    store: Store, clock: FakeClock
) -> None:
    """Archiving removes the chain's entries and heads up to the newest head before the
    cut, in one pass; the chain still verifies in full, reopens, and grows from there."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 250)
    clock.advance(30 * DAY)
    await audit.record("decision", {"n": "recent"})
    pruned = await audit.archive(older_than=DAY)
    # Entries 1..200 and the heads after 100 and 200; entries 201..251 stay.
    assert pruned.removed == 202
    assert await _count(store, AUDIT_ENTRY_KIND) == 51
    assert await _count(store, AUDIT_HEAD_KIND) == 0
    assert await _count(store, AUDIT_ARCHIVE_KIND) == 1
    assert await verify_audit(store, keyring, expected_head=audit.head) == 251
    reopened = AuditLog(store, keyring, clock=clock)
    assert await reopened.open(expected_head=audit.head) == 251
    await reopened.record("decision", {"n": "after"})
    assert await verify_audit(store, keyring) == 252


async def test_a_second_archive_pass_goes_on_from_the_first(store: Store, clock: FakeClock) -> None:
    """Passes add up: the chain starts from the newest mark, the older marks stay."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 150)
    clock.advance(30 * DAY)
    assert (await audit.archive(older_than=DAY)).removed == 101
    for i in range(100):
        await audit.record("decision", {"n": f"later {i}"})
    clock.advance(30 * DAY)
    assert (await audit.archive(older_than=DAY)).removed == 101
    assert await _count(store, AUDIT_ARCHIVE_KIND) == 2
    assert await _count(store, AUDIT_ENTRY_KIND) == 50
    assert await verify_audit(store, keyring) == 250
    assert await AuditLog(store, keyring).open() == 250


async def test_the_kinds_retention_keeps_are_the_kinds_the_audit_chain_writes(
    store: Store, clock: FakeClock
) -> None:
    """An audit log that wrote entries, sealed heads and an archive mark left exactly the
    kinds the store never prunes: one list, not two that can drift apart."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 150)
    clock.advance(30 * DAY)
    await audit.archive(older_than=DAY)
    for i in range(100):
        await audit.record("decision", {"n": f"later {i}"})
    assert set(await _kinds(store)) == set(KEPT_EVENT_KINDS)


async def test_archiving_with_no_head_old_enough_changes_nothing(
    store: Store, clock: FakeClock
) -> None:
    """No sealed head before the cut: nothing is removed and no mark is written."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 99)
    clock.advance(30 * DAY)
    before = await store.events(limit=10_000)
    assert await audit.archive(older_than=DAY) == Pruned(removed=0)
    assert await store.events(limit=10_000) == before


async def test_archiving_refuses_a_forged_head_and_changes_nothing(
    store: Store, clock: FakeClock
) -> None:
    """A head at the cut that was not sealed with the keyring stops the pass whole."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 50)
    last = (await store.events(kind=AUDIT_ENTRY_KIND, newest_first=True, limit=1))[0].data
    forged = {"seq": last["seq"], "mac": last["mac"], "key_id": "k1"}
    await _log(store, clock, AUDIT_HEAD_KIND, data={**forged, "seal_key_id": "k1", "seal": "00"})
    clock.advance(30 * DAY)
    before = await store.events(limit=10_000)
    with pytest.raises(AuditTampered):
        await audit.archive(older_than=DAY)
    assert await store.events(limit=10_000) == before


async def test_an_archived_chain_cut_past_its_mark_is_found(store: Store, clock: FakeClock) -> None:
    """The chain goes on only from a mark sealed for it: a newest mark edited to name
    another entry is refused; the true one, written again as the newest, verifies."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 250)
    clock.advance(30 * DAY)
    await audit.archive(older_than=DAY)
    mark = (await store.events(kind=AUDIT_ARCHIVE_KIND, limit=1))[0]
    # The mark sealed for seq 200, edited as if the chain began after 100.
    replayed = {**mark.data, "seq": 100}
    await _log(store, clock, AUDIT_ARCHIVE_KIND, data=replayed)
    with pytest.raises(AuditTampered, match="archive mark"):
        await verify_audit(store, keyring)
    # The true mark, written again newest, names entry 200: the chain follows it.
    await _log(store, clock, AUDIT_ARCHIVE_KIND, data=mark.data)
    assert await verify_audit(store, keyring) == 250


async def test_the_log_refuses_deletes_an_archive_pass_did_not_release(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """Outside an archive pass the database refuses deleting the chain's entries above
    its archive row, and any archive mark."""
    keyring = Keyring({"k1": b"k" * 32})
    async with maker.open(clock) as store:
        audit = await _chain(store, clock, keyring, 150)
        clock.advance(30 * DAY)
        await audit.archive(older_than=DAY)
    with pytest.raises(_refused(maker)):
        _raw_delete(maker, f"kind = '{AUDIT_ENTRY_KIND}'")
    with pytest.raises(_refused(maker)):
        _raw_delete(maker, f"kind = '{AUDIT_ARCHIVE_KIND}'")
    async with maker.open(clock) as store:
        assert await verify_audit(store, keyring) == 150


async def test_a_live_log_goes_on_after_another_log_archived_its_chain(
    store: Store, clock: FakeClock
) -> None:
    """A pass run by another process (the CLI's) while a keeper's log is open leaves the
    keeper's log writing on from its own head: the chain verifies against that head."""
    keyring = Keyring({"k1": b"k" * 32})
    live = await _chain(store, clock, keyring, 250)
    clock.advance(30 * DAY)
    assert (await AuditLog(store, keyring, clock=clock).archive(older_than=DAY)).removed == 202
    for i in range(120):  # past the next sealed head
        await live.record_many([("decision", {"n": f"after {i}"}, None)])
    assert await verify_audit(store, keyring, expected_head=live.head) == 370
    assert await AuditLog(store, keyring, clock=clock).open(expected_head=live.head) == 370


async def test_archiving_checks_what_it_removes_and_refuses_entries_it_cannot_check(
    store: Store, clock: FakeClock
) -> None:
    """The pass verifies the whole chain first: entries signed with a key the keyring no
    longer holds are not archived unchecked (UnknownKey, nothing changes); with every
    key, the same pass goes through."""
    old = Keyring({"k0": b"o" * 32})
    await _chain(store, clock, old, 150)
    both = old.rotated("k1", b"n" * 32)
    rotated = AuditLog(store, both, clock=clock)
    for i in range(150):  # signed with k1, sealed heads at 200 and 300
        await rotated.record_many([("decision", {"n": f"k1 {i}"}, None)])
    clock.advance(30 * DAY)
    before = await store.events(limit=10_000)
    newest_only = Keyring({"k1": b"n" * 32})
    with pytest.raises(UnknownKey, match="k0"):
        await AuditLog(store, newest_only, clock=clock).archive(older_than=DAY)
    assert await store.events(limit=10_000) == before
    assert (await AuditLog(store, both, clock=clock).archive(older_than=DAY)).removed == 303


def _raw_edit(maker: StoreMaker, seq: int) -> None:
    """Edit audit entry ``seq``'s body in place, as an attacker with the database would
    (the append-only triggers stop accidents, not an attacker)."""
    if maker.kind == "sqlite":
        conn = sqlite3.connect(maker.location, isolation_level=None)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_no_update")
            conn.execute(
                "UPDATE events SET data = json_set(data, '$.body.n', 'edited') "
                "WHERE kind = 'audit' AND json_extract(data, '$.seq') = ?",
                (seq,),
            )
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(maker.location, autocommit=True) as pg:
        pg.execute(b"ALTER TABLE events DISABLE TRIGGER USER")
        pg.execute(
            b"UPDATE events SET data = jsonb_set(data::jsonb, '{body,n}', '\"edited\"')::text "
            b"WHERE kind = 'audit' AND (data::jsonb->>'seq')::int = %s",
            (seq,),
        )
        pg.execute(b"ALTER TABLE events ENABLE TRIGGER USER")


async def test_archiving_finds_an_entry_edited_in_the_part_it_removes(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """An entry edited below the cut, which an open never reads again, is found by the
    pass that would remove it: AuditTampered names it, and nothing changes."""
    keyring = Keyring({"k1": b"k" * 32})
    async with maker.open(clock) as store:
        await _chain(store, clock, keyring, 250)
    _raw_edit(maker, 42)
    clock.advance(30 * DAY)
    async with maker.open(clock) as store:
        audit = AuditLog(store, keyring, clock=clock)
        assert await audit.open() == 250  # from the newest head: entry 42 is not read
        before = await store.events(limit=10_000)
        with pytest.raises(AuditTampered, match="edited"):
            await audit.archive(older_than=DAY)
        assert await store.events(limit=10_000) == before


def _raw_copy(maker: StoreMaker, ids: list[int]) -> None:
    """Append byte-for-byte copies of the events ``ids`` (their seals stay valid)."""
    if maker.kind == "sqlite":
        conn = sqlite3.connect(maker.location, isolation_level=None)
        try:
            columns = [r[1] for r in conn.execute("PRAGMA table_info(events)") if r[1] != "id"]
            listed = ", ".join(columns)
            for event_id in ids:
                conn.execute(
                    f"INSERT INTO events ({listed}) SELECT {listed} FROM events WHERE id = ?",
                    (event_id,),
                )
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(maker.location, autocommit=True) as pg:
        rows = pg.execute(
            b"SELECT column_name FROM information_schema.columns "
            b"WHERE table_name = 'events' AND column_name <> 'id'"
        ).fetchall()
        listed = ", ".join(str(r[0]) for r in rows)
        for event_id in ids:
            pg.execute(
                f"INSERT INTO events ({listed}) SELECT {listed} FROM events WHERE id = %s".encode(),
                (event_id,),
            )


async def test_archiving_refuses_a_head_and_entry_copied_to_the_end_of_the_log(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """A genuine old head and its entry, copied to the log's end, pass every seal and an
    open from the newest head; the pass still finds that the head's entry is not the
    chain's and removes nothing (else it would remove the chain up to the copies)."""
    keyring = Keyring({"k1": b"k" * 32})
    async with maker.open(clock) as store:
        await _chain(store, clock, keyring, 250)
        head = next(e for e in await store.events(kind=AUDIT_HEAD_KIND) if e.data["seq"] == 100)
        entry = next(
            e
            for e in await store.events(kind=AUDIT_ENTRY_KIND, limit=10_000)
            if e.data["seq"] == 100
        )
    assert head.id is not None and entry.id is not None
    _raw_copy(maker, [entry.id, head.id])
    clock.advance(30 * DAY)
    async with maker.open(clock) as store:
        audit = AuditLog(store, keyring, clock=clock)
        assert await audit.open() == 100  # the copies look like the chain's end
        before = await store.events(limit=10_000)
        with pytest.raises(AuditTampered, match="audit head"):
            await audit.archive(older_than=DAY)
        assert await store.events(limit=10_000) == before


async def test_archiving_with_a_store_clock_ahead_of_the_logs_changes_nothing(
    store: Store, clock: FakeClock
) -> None:
    """The store's cut falls on a head the log's check did not reach (its clock runs
    ahead): the pass tries again, then says so (StoreBusy) and removes nothing."""
    keyring = Keyring({"k1": b"k" * 32})
    await _chain(store, clock, keyring, 250)
    clock.advance(30 * DAY)
    behind = FakeClock(clock.now() - 29 * DAY)
    before = await store.events(limit=10_000)
    with pytest.raises(StoreBusy, match="cut moved"):
        await AuditLog(store, keyring, clock=behind).archive(older_than=DAY)
    assert await store.events(limit=10_000) == before


async def test_archiving_finds_a_forged_head_in_the_part_it_removes(
    store: Store, clock: FakeClock
) -> None:
    """A head forged among the ones the pass removes (not the head at the cut) is found,
    as a verification would find it, and nothing changes."""
    keyring = Keyring({"k1": b"k" * 32})
    audit = await _chain(store, clock, keyring, 150)
    last = (await store.events(kind=AUDIT_ENTRY_KIND, newest_first=True, limit=1))[0].data
    forged = {"seq": last["seq"], "mac": last["mac"], "key_id": "k1"}
    await _log(store, clock, AUDIT_HEAD_KIND, data={**forged, "seal_key_id": "k1", "seal": "00"})
    for i in range(100):  # a genuine head at 200, after the forged one
        await audit.record_many([("decision", {"n": f"later {i}"}, None)])
    clock.advance(30 * DAY)
    before = await store.events(limit=10_000)
    with pytest.raises(AuditTampered, match="forged"):
        await AuditLog(store, keyring, clock=clock).archive(older_than=DAY)
    assert await store.events(limit=10_000) == before


def _raw_backdate(maker: StoreMaker, event_id: int) -> None:
    """Give event ``event_id`` the time of the log's first audit entry (a head's time is
    not under any seal)."""
    first = "(SELECT MIN(at) FROM events WHERE kind = 'audit')"
    if maker.kind == "sqlite":
        conn = sqlite3.connect(maker.location, isolation_level=None)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_no_update")
            conn.execute(f"UPDATE events SET at = {first} WHERE id = ?", (event_id,))
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(maker.location, autocommit=True) as pg:
        pg.execute(b"ALTER TABLE events DISABLE TRIGGER USER")
        pg.execute(f"UPDATE events SET at = {first} WHERE id = %s".encode(), (event_id,))
        pg.execute(b"ALTER TABLE events ENABLE TRIGGER USER")


async def test_archiving_refuses_a_head_whose_time_was_edited_to_reach_recent_entries(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """A recent head dated back (its time is not sealed) would let a pass remove entries
    younger than the cut; the entry it names is dated by its MAC, so the pass refuses."""
    keyring = Keyring({"k1": b"k" * 32})
    async with maker.open(clock) as store:
        audit = await _chain(store, clock, keyring, 150)
        clock.advance(2 * DAY)
        for i in range(100):  # a head at 200, two days younger than the first
            await audit.record_many([("decision", {"n": f"later {i}"}, None)])
        newest = (await store.events(kind=AUDIT_HEAD_KIND, newest_first=True, limit=1))[0]
    assert newest.id is not None and newest.data["seq"] == 200
    _raw_backdate(maker, newest.id)
    async with maker.open(clock) as store:
        before = await store.events(limit=10_000)
        with pytest.raises(AuditTampered, match="time was edited"):
            await AuditLog(store, keyring, clock=clock).archive(older_than=DAY)
        assert await store.events(limit=10_000) == before


def _raw_copy_data(maker: StoreMaker, pairs: list[tuple[int, int]]) -> None:
    """For each ``(source, target)``, give event ``target`` the data of ``source``."""
    if maker.kind == "sqlite":
        conn = sqlite3.connect(maker.location, isolation_level=None)
        try:
            conn.execute("DROP TRIGGER IF EXISTS events_no_update")
            for source, target in pairs:
                conn.execute(
                    "UPDATE events SET data = (SELECT data FROM events WHERE id = ?) WHERE id = ?",
                    (source, target),
                )
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(maker.location, autocommit=True) as pg:
        pg.execute(b"ALTER TABLE events DISABLE TRIGGER USER")
        for source, target in pairs:
            pg.execute(
                b"UPDATE events SET data = (SELECT data FROM events WHERE id = %s) WHERE id = %s",
                (source, target),
            )
        pg.execute(b"ALTER TABLE events ENABLE TRIGGER USER")


class _RewrittenBeforeThePass:
    """The store, but an attacker rewrites rows after the pass's check and before its
    transaction."""

    def __init__(self, store: Store, rewrite: Callable[[], None]) -> None:
        self._store, self._rewrite = store, rewrite

    async def archive_audit(self, **arguments: Any) -> Pruned:
        self._rewrite()
        return await self._store.archive_audit(**arguments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_archiving_refuses_rows_rewritten_between_its_check_and_its_transaction(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """The head at the cut and its entry, rewritten after the check with a later genuine
    head's and entry's data (every seal still valid, the rows where they were), would
    make the mark vouch past what was checked: the pass refuses and removes nothing."""
    keyring = Keyring({"k1": b"k" * 32})
    async with maker.open(clock) as store:
        audit = await _chain(store, clock, keyring, 150)
        clock.advance(2 * DAY)
        for i in range(100):  # a head at 200, younger than the cut
            await audit.record_many([("decision", {"n": f"later {i}"}, None)])
        heads = {e.data["seq"]: e for e in await store.events(kind=AUDIT_HEAD_KIND)}
        entries = {
            e.data["seq"]: e for e in await store.events(kind=AUDIT_ENTRY_KIND, limit=10_000)
        }
    pairs = [(heads[200].id, heads[100].id), (entries[200].id, entries[100].id)]
    assert all(isinstance(i, int) for pair in pairs for i in pair)
    async with maker.open(clock) as store:
        racing = _RewrittenBeforeThePass(
            store, lambda: _raw_copy_data(maker, cast("list[tuple[int, int]]", pairs))
        )
        with pytest.raises(AuditTampered, match="not the chain's entry at that place"):
            await AuditLog(cast(Store, racing), keyring, clock=clock).archive(older_than=DAY)
        assert await _count(store, AUDIT_ENTRY_KIND) == 250
        assert await _count(store, AUDIT_ARCHIVE_KIND) == 0


class _ArchivedMidway:
    """The store, but another process's archive pass commits right after the first read
    of ``kind``: between the reads of one open or verification."""

    def __init__(self, store: Store, kind: str, archive: AuditLog) -> None:
        self._store, self._kind, self._archive = store, kind, archive
        self.passes = 0

    async def events(self, **query: Any) -> list[Event]:
        found = await self._store.events(**query)
        if query.get("kind") == self._kind and not self.passes:
            self.passes += (await self._archive.archive(older_than=DAY)).removed > 0
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize("check", ["open", "verify_audit"])
async def test_a_check_that_meets_an_archive_pass_between_its_reads_checks_again(
    store: Store, clock: FakeClock, check: str
) -> None:
    """An archive pass (the CLI's, say) committing between the reads of an open or a
    verification is no tampering: the check runs again from the new mark and passes."""
    keyring = Keyring({"k1": b"k" * 32})
    writer = await _chain(store, clock, keyring, 200)
    clock.advance(30 * DAY)
    midway = _ArchivedMidway(store, AUDIT_HEAD_KIND, AuditLog(store, keyring, clock=clock))
    if check == "open":
        assert await AuditLog(cast(Store, midway), keyring, clock=clock).open() == 200
    else:
        assert await verify_audit(cast(Store, midway), keyring, expected_head=writer.head) == 200
    assert midway.passes == 1
    assert await _count(store, AUDIT_ENTRY_KIND) == 0


async def test_prune_write_intents_forgets_only_intents_older_than_the_cutoff(
    store: Store, clock: FakeClock
) -> None:
    """Write intents recorded before the cut-off go (a step after that is as its engine
    says); newer ones stay, so their next attempt still reads back first."""
    lease = await store.acquire_profile("alice", "pool-a", DAY)
    await store.intend_write(lease, DAY, "run-old:1:refund")
    clock.advance(2 * DAY)
    lease = await store.acquire_profile("alice", "pool-a", DAY)
    await store.intend_write(lease, DAY, "run-new:1:refund")
    assert await store.prune_write_intents(older_than=DAY) == Pruned(removed=1)
    assert (await store.intend_write(lease, DAY, "run-old:1:refund")).first is True
    assert (await store.intend_write(lease, DAY, "run-new:1:refund")).first is False
    assert await store.prune_write_intents(older_than=DAY) == Pruned(removed=0)


@pytest.mark.parametrize(("age", "error"), [(-DAY, InvalidArgument), (30, InvalidArgumentType)])
async def test_prune_write_intents_refuses_a_bad_age_and_forgets_nothing(
    store: Store, age: Any, error: type[Exception]
) -> None:
    """A negative or non-timedelta age is a typed error; every intent stays."""
    lease = await store.acquire_profile("alice", "pool-a", DAY)
    await store.intend_write(lease, DAY, "run-1:1:refund")
    with pytest.raises(error):
        await store.prune_write_intents(older_than=age)
    assert (await store.intend_write(lease, DAY, "run-1:1:refund")).first is False
