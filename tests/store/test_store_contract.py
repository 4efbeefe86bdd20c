"""The Store contract, run against every implementation (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from session_keeper.errors import (
    ArtifactNotFound,
    ContractError,
    InvalidArgument,
    InvalidArgumentType,
    InvalidTransition,
    JobNotFound,
    LeaseHeldError,
    ProfileHeld,
    ProfileLeaseLost,
    StaleLeaseError,
    StoreCorrupt,
)
from session_keeper.jobs import JobContract, JobState, Lease, PageArtifact, ResultRecord
from session_keeper.stores import Event, Store
from session_keeper.testing import (
    FakeClock,
    StoreOperation,
    StoreStatement,
    run_store_operation,
    watch_store_statements,
)
from tests.store._helpers import TTL, records, running_job, stored_artifacts
from tests.store.conftest import StoreMaker


async def snapshot(store: Store, job_id: str = "job-1") -> tuple[object, ...]:
    """Everything a failed call must leave unchanged."""
    job = await store.load_job(job_id)
    return (
        job.checkpoint,
        job.lease,
        tuple(await store.results(job_id)),
        len(await store.events()),
        tuple(await store.external_writes(job_id)),
    )


# ---------------------------------------------------------------- the seam


def test_implementations_satisfy_the_protocol(store: Store) -> None:
    """Each implementation is a runtime-checkable Store."""
    assert isinstance(store, Store)


# ---------------------------------------------------------------- jobs


async def test_submit_creates_a_ready_job_at_revision_zero(store: Store) -> None:
    """A submitted job is ready, revision 0, unleased, and its checkpoint copies the contract."""
    deadline = datetime(2026, 10, 14, 9, 0, tzinfo=UTC)
    contract = JobContract(
        job_id="catalogue-audit-001",
        site="catalogue.example",
        account_alias="approved-reader",
        input_manifest="catalogue-fixture-v1",
        source_view="fixture-snapshot-v1",
        start_cursor="page-1",
        deadline_at=deadline,
        max_attempts=5,
        extra={"note": "read-only"},
    )
    job = await store.submit_job(contract)
    loaded = await store.load_job("catalogue-audit-001")
    assert loaded == job
    assert loaded.contract == contract
    assert loaded.lease is None
    cp = loaded.checkpoint
    assert (cp.state, cp.checkpoint_revision, cp.attempts_used) == ("ready", 0, 0)
    assert (cp.account_alias, cp.input_manifest, cp.source_view) == (
        "approved-reader",
        "catalogue-fixture-v1",
        "fixture-snapshot-v1",
    )
    assert cp.next_cursor == "page-1"
    assert cp.deadline_at == deadline
    assert [e.kind for e in await store.events()] == ["job_submitted"]


async def test_resubmitting_the_same_contract_is_idempotent(store: Store) -> None:
    """Submitting an equal contract twice returns the stored job and writes nothing new."""
    first = await store.submit_job(JobContract(job_id="j"))
    again = await store.submit_job(JobContract(job_id="j"))
    assert again == first
    assert len(await store.events()) == 1


async def test_resubmitting_a_different_contract_is_refused(store: Store) -> None:
    """A different contract under an existing id raises ContractError and changes nothing."""
    await store.submit_job(JobContract(job_id="j", site="a.example"))
    before = await snapshot(store, "j")
    with pytest.raises(ContractError):
        await store.submit_job(JobContract(job_id="j", site="b.example"))
    assert await snapshot(store, "j") == before
    assert (await store.load_job("j")).contract.site == "a.example"


async def test_unknown_job_raises_job_not_found(store: Store) -> None:
    """Loading, claiming or committing an unknown job raises JobNotFound (a LookupError)."""
    with pytest.raises(JobNotFound):
        await store.load_job("nope")
    with pytest.raises(LookupError):
        await store.claim("nope", "w1", TTL)
    ghost = Lease(job_id="nope", owner="w1", token=1, expires_at=datetime(2030, 1, 1, tzinfo=UTC))
    with pytest.raises(JobNotFound):
        await store.commit_page(ghost, 0, records("a"), None, "page-1")


async def test_jobs_lists_in_submission_order_and_filters_by_state(
    store: Store, clock: FakeClock
) -> None:
    """jobs() returns jobs oldest first, optionally only the requested states."""
    for name in ("b", "a", "c"):
        await store.submit_job(JobContract(job_id=name))
        clock.advance(1)
    lease = await store.claim("a", "w1", TTL)
    await store.transition(lease, 0, "running")
    assert [j.job_id for j in await store.jobs()] == ["b", "a", "c"]
    assert [j.job_id for j in await store.jobs(states=["running"])] == ["a"]
    assert await store.jobs(states=[]) == []
    with pytest.raises(InvalidArgument):
        await store.jobs(states=["sleeping"])  # type: ignore[list-item]


async def test_bad_arguments_are_refused_before_touching_the_store(store: Store) -> None:
    """Wrong types and values raise InvalidArgument(Type) and write nothing."""
    lease, _ = await running_job(store)
    before = await snapshot(store)
    with pytest.raises(InvalidArgumentType):
        await store.submit_job({"job_id": "x"})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await store.claim("job-1", "", TTL)
    with pytest.raises(InvalidArgument):
        await store.claim("job-1", "w2", timedelta(0))
    with pytest.raises(InvalidArgumentType):
        await store.commit_page(lease, 1, [{"id": "a"}], None, "p")  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        await store.commit_page(
            lease, 1, [ResultRecord(source_record_id="a", data={"x": float("nan")})], None, "p"
        )
    with pytest.raises(InvalidArgument):
        await store.transition(lease, 1, "sleeping")  # type: ignore[arg-type]
    assert await snapshot(store) == before


# ---------------------------------------------------------------- leases


async def test_claim_grows_the_fencing_token_every_time(store: Store, clock: FakeClock) -> None:
    """Each successful claim gets a larger token and an expiry of clock.now() + ttl."""
    await store.submit_job(JobContract(job_id="j"))
    first = await store.claim("j", "w1", TTL)
    assert first.token == 1
    assert first.expires_at == clock.now() + TTL
    await store.release(first)
    second = await store.claim("j", "w2", TTL)
    assert second.token == 2
    assert (await store.load_job("j")).lease == second


async def test_unexpired_lease_blocks_every_other_claim(store: Store, clock: FakeClock) -> None:
    """While a lease is unexpired, claims raise LeaseHeldError, the holder's own included."""
    await store.submit_job(JobContract(job_id="j"))
    held = await store.claim("j", "w1", TTL)
    clock.advance(TTL - timedelta(seconds=1))
    with pytest.raises(LeaseHeldError, match="w1"):
        await store.claim("j", "w2", TTL)
    with pytest.raises(LeaseHeldError):
        await store.claim("j", "w1", TTL)
    assert (await store.load_job("j")).lease == held


async def test_expired_lease_can_be_taken_over_and_the_old_one_is_fenced(
    store: Store, clock: FakeClock
) -> None:
    """After expiry another worker claims with a higher token; the old lease's writes fail."""
    old, checkpoint = await running_job(store)
    clock.advance(TTL)
    new = await store.claim("job-1", "w2", TTL)
    assert new.token == old.token + 1
    before = await snapshot(store)
    with pytest.raises(StaleLeaseError):
        await store.commit_page(old, checkpoint.checkpoint_revision, records("a"), "p2", "p1")
    with pytest.raises(StaleLeaseError):
        await store.transition(old, checkpoint.checkpoint_revision, "done")
    with pytest.raises(StaleLeaseError):
        await store.extend(old, TTL)
    with pytest.raises(StaleLeaseError):
        await store.release(old)
    with pytest.raises(StaleLeaseError):
        await store.record_write_intent(old, "send-1", {"to": "x"})
    assert await snapshot(store) == before
    result = await store.commit_page(new, checkpoint.checkpoint_revision, records("a"), "p2", "p1")
    assert result.new_records == 1


async def test_an_expired_lease_cannot_commit_even_if_nobody_took_over(
    store: Store, clock: FakeClock
) -> None:
    """An expired lease is stale for writes; it can still be released."""
    lease, checkpoint = await running_job(store)
    clock.advance(TTL)
    before = await snapshot(store)
    with pytest.raises(StaleLeaseError, match="expired"):
        await store.commit_page(lease, checkpoint.checkpoint_revision, records("a"), None, "p")
    assert await snapshot(store) == before
    await store.release(lease)
    assert (await store.load_job("job-1")).lease is None


async def test_extend_moves_the_expiry_and_keeps_the_token(store: Store, clock: FakeClock) -> None:
    """extend() renews a current lease to now + ttl with the same token."""
    lease, checkpoint = await running_job(store)
    clock.advance(TTL - timedelta(seconds=5))
    renewed = await store.extend(lease, TTL)
    assert renewed.token == lease.token
    assert renewed.expires_at == clock.now() + TTL
    clock.advance(TTL - timedelta(seconds=5))
    # The original expiry has passed, but the renewed lease is current.
    await store.commit_page(renewed, checkpoint.checkpoint_revision, records("a"), None, "p1")
    with pytest.raises(LeaseHeldError):
        await store.claim("job-1", "w2", TTL)


async def test_release_frees_the_job_for_the_next_claim(store: Store) -> None:
    """After release() any worker may claim at once, with a higher token."""
    lease, _ = await running_job(store)
    await store.release(lease)
    assert (await store.load_job("job-1")).lease is None
    again = await store.claim("job-1", "w2", TTL)
    assert again.token == lease.token + 1
    kinds = [e.kind for e in await store.events(job_id="job-1")]
    assert kinds.count("lease_claimed") == 2
    assert "lease_released" in kinds


async def test_claim_next_ready_hands_out_each_claimable_job_once(
    store: Store, clock: FakeClock
) -> None:
    """claim_next_ready takes the oldest free job, skips leased, paused and finished ones."""
    for name in ("a", "b", "c", "d", "e"):
        await store.submit_job(JobContract(job_id=name))
        clock.advance(1)
    held = await store.claim("a", "other", TTL)
    lease_b = await store.claim("b", "w", TTL)
    await store.transition(lease_b, 0, "running")
    await store.transition(lease_b, 1, "done")
    lease_c = await store.claim("c", "w", TTL)
    await store.transition(lease_c, 0, "awaiting_human", pause_reason="login expired")
    await store.release(lease_c)
    got = [await store.claim_next_ready("x", TTL) for _ in range(3)]
    assert [g.job_id if g else None for g in got] == ["d", "e", None]
    assert held.job_id == "a"


async def test_claim_next_ready_recovers_a_running_job_whose_worker_died(
    store: Store, clock: FakeClock
) -> None:
    """A running job whose lease expired is claimable again, with a higher token."""
    dead, _ = await running_job(store, owner="dead-worker")
    assert await store.claim_next_ready("w2", TTL) is None
    clock.advance(TTL)
    rescued = await store.claim_next_ready("w2", TTL)
    assert rescued is not None
    assert (rescued.job_id, rescued.token) == ("job-1", dead.token + 1)
    claimed = await store.events(kind="lease_claimed", newest_first=True, limit=1)
    assert claimed[0].data["took_over_from"] == "dead-worker"


# ---------------------------------------------------------------- page commits


async def test_commit_page_upserts_results_idempotently(store: Store) -> None:
    """A repeated source_record_id is not duplicated; the first accepted version is kept."""
    lease, cp = await running_job(store)
    first = await store.commit_page(lease, cp.checkpoint_revision, records("a", "b"), "p2", "p1")
    assert (first.new_records, first.already_present) == (2, 0)
    changed = [ResultRecord(source_record_id="b", data={"id": "b", "title": "changed"})]
    second = await store.commit_page(
        lease, first.checkpoint.checkpoint_revision, [*changed, *records("c", "c")], "p3", "p2"
    )
    assert (second.new_records, second.already_present) == (1, 2)
    stored = await store.results("job-1")
    assert [r.source_record_id for r in stored] == ["a", "b", "c"]
    assert stored[1].data["title"] == "item b"
    assert [r.step for r in stored] == ["p1", "p1", "p2"]
    assert await store.count_results("job-1") == 3


async def test_commit_page_advances_cursor_revision_and_logs_one_event(
    store: Store,
) -> None:
    """A commit sets cursor, step and revision + 1, and appends an event with the counts."""
    lease, cp = await running_job(store)
    # The caller's kind (any but the store's default, "page_committed") is kept.
    base = Event(kind="job_running", at=datetime(2026, 1, 1, tzinfo=UTC), page_identity="p1#ok")
    result = await store.commit_page(
        lease, cp.checkpoint_revision, records("a"), "page-2", "page-1", event=base
    )
    new = result.checkpoint
    assert (new.next_cursor, new.last_committed_step) == ("page-2", "page-1")
    assert new.checkpoint_revision == cp.checkpoint_revision + 1
    assert await store.load_checkpoint("job-1") == new
    [event] = await store.events(since_id=result.event_id - 1)
    assert event.id == result.event_id
    assert (event.kind, event.job_id, event.step, event.page_identity) == (
        "job_running",
        "job-1",
        "page-1",
        "p1#ok",
    )
    assert (event.revision, event.lease_owner) == (new.checkpoint_revision, "w1")
    assert event.data["new_records"] == 1
    # The event log is the checkpoint history: one event per accepted revision.
    revisions = [e.revision for e in await store.events(job_id="job-1") if e.revision is not None]
    assert revisions == [0, 1, 2]


async def test_stale_revision_is_rejected_and_nothing_is_written(store: Store) -> None:
    """A commit naming an old checkpoint revision raises StaleLeaseError and writes nothing."""
    lease, cp = await running_job(store)
    await store.commit_page(lease, cp.checkpoint_revision, records("a"), "p2", "p1")
    before = await snapshot(store)
    with pytest.raises(StaleLeaseError, match="revision"):
        await store.commit_page(lease, cp.checkpoint_revision, records("b"), "p3", "p2")
    assert await snapshot(store) == before


async def test_pages_are_committed_only_while_running(store: Store) -> None:
    """Committing to a ready job raises InvalidTransition."""
    await store.submit_job(JobContract(job_id="j"))
    lease = await store.claim("j", "w1", TTL)
    with pytest.raises(InvalidTransition):
        await store.commit_page(lease, 0, records("a"), None, "p1")
    assert await store.count_results("j") == 0


async def test_commit_can_finish_the_job_in_the_same_transaction(store: Store) -> None:
    """commit_page(state="done") stores the last page and completes the job atomically."""
    lease, cp = await running_job(store)
    result = await store.commit_page(
        lease, cp.checkpoint_revision, records("z"), None, "last", state="done"
    )
    assert result.checkpoint.state == "done"
    assert (await store.load_job("job-1")).state == "done"
    with pytest.raises(InvalidArgument):
        await store.commit_page(lease, 3, records("y"), None, "p", state="awaiting_human")


async def test_attempts_and_deadline_are_persisted(store: Store) -> None:
    """attempts_used survives in the checkpoint and can grow but never shrink."""
    deadline = datetime(2026, 10, 13, 12, 0, tzinfo=UTC)
    lease, cp = await running_job(store, deadline_at=deadline)
    cp = await store.transition(lease, cp.checkpoint_revision, "running", attempts_used=2)
    assert (cp.attempts_used, cp.deadline_at) == (2, deadline)
    result = await store.commit_page(
        lease, cp.checkpoint_revision, records("a"), None, "p1", attempts_used=3
    )
    assert result.checkpoint.attempts_used == 3
    with pytest.raises(InvalidArgument, match="never goes back"):
        await store.transition(
            lease, result.checkpoint.checkpoint_revision, "ready", attempts_used=1
        )
    loaded = await store.load_checkpoint("job-1")
    assert (loaded.attempts_used, loaded.deadline_at) == (3, deadline)


# ---------------------------------------------------------------- state transitions


async def test_state_machine_allows_the_documented_moves(store: Store) -> None:
    """ready → running → awaiting_human → ready → running → reconciling → stopped works."""
    lease, cp = await running_job(store)
    cp = await store.transition(
        lease, cp.checkpoint_revision, "awaiting_human", pause_reason="login expired"
    )
    assert cp.pause_reason == "login expired"
    cp = await store.transition(lease, cp.checkpoint_revision, "ready")
    assert cp.pause_reason is None
    cp = await store.transition(lease, cp.checkpoint_revision, "running")
    cp = await store.transition(lease, cp.checkpoint_revision, "reconciling")
    cp = await store.transition(lease, cp.checkpoint_revision, "stopped", pause_reason="denied")
    assert (cp.state, cp.checkpoint_revision) == ("stopped", 6)
    changes = await store.events(kind="job_state_changed")
    assert [(e.data["from"], e.data["to"]) for e in changes][-1] == ("reconciling", "stopped")


async def test_terminal_states_never_change(store: Store) -> None:
    """done, failed and stopped are final: any further transition is InvalidTransition."""
    lease, cp = await running_job(store)
    cp = await store.transition(lease, cp.checkpoint_revision, "done")
    before = await snapshot(store)
    targets: tuple[JobState, ...] = ("ready", "running", "failed")
    for target in targets:
        with pytest.raises(InvalidTransition):
            await store.transition(lease, cp.checkpoint_revision, target)
    assert await snapshot(store) == before


async def test_awaiting_human_requires_a_reason(store: Store) -> None:
    """A pause without a reason a person can act on is refused."""
    lease, cp = await running_job(store)
    with pytest.raises(InvalidArgument, match="pause_reason"):
        await store.transition(lease, cp.checkpoint_revision, "awaiting_human")


async def test_ready_cannot_jump_to_done(store: Store) -> None:
    """A job must run before it is done: ready → done is InvalidTransition."""
    await store.submit_job(JobContract(job_id="j"))
    lease = await store.claim("j", "w1", TTL)
    with pytest.raises(InvalidTransition):
        await store.transition(lease, 0, "done")


# ---------------------------------------------------------------- artifacts


async def test_artifact_is_verified_then_referenced_by_the_commit(store: Store) -> None:
    """put_artifact returns a verified ref; the checkpoint then names it and its digest."""
    lease, cp = await running_job(store)
    ref = await store.put_artifact(b'{"rows": [1, 2]}', name="results/page-1.json")
    assert ref.digest.startswith("sha256:")
    assert ref.size == 16
    result = await store.commit_page(
        lease, cp.checkpoint_revision, records("a"), "p2", "p1", artifact=ref
    )
    assert result.checkpoint.accepted_artifact == "results/page-1.json"
    assert result.checkpoint.artifact_digest == ref.digest
    assert await store.read_artifact(ref.digest) == b'{"rows": [1, 2]}'


async def test_commit_refuses_an_artifact_that_was_never_written(store: Store) -> None:
    """Referencing an unwritten artifact raises ArtifactNotFound and writes nothing."""
    from session_keeper.jobs import ArtifactRef

    lease, cp = await running_job(store)
    before = await snapshot(store)
    bogus = ArtifactRef(name="x.json", digest="sha256:" + "0" * 64, size=3)
    with pytest.raises(ArtifactNotFound):
        await store.commit_page(
            lease, cp.checkpoint_revision, records("a"), "p2", "p1", artifact=bogus
        )
    assert await snapshot(store) == before
    with pytest.raises(ArtifactNotFound):
        await store.read_artifact(bogus.digest)


async def test_a_page_artifact_is_written_verified_and_referenced_by_its_own_commit(
    store: Store, clock: FakeClock
) -> None:
    """A PageArtifact is stored by the commit itself, named by it, and never collectable."""
    lease, cp = await running_job(store)
    body = b'{"rows": [1, 2]}'
    result = await store.commit_page(
        lease,
        cp.checkpoint_revision,
        records("a"),
        "p2",
        "p1",
        artifact=PageArtifact(name="results/page-1.json", data=body),
    )
    ref = result.artifact
    assert ref is not None
    assert (ref.name, ref.size, ref.digest.startswith("sha256:")) == (
        "results/page-1.json", 16, True,
    )  # fmt: skip
    assert result.checkpoint.accepted_artifact == "results/page-1.json"
    assert result.checkpoint.artifact_digest == ref.digest
    assert (await store.events(newest_first=True, limit=1))[0].artifact == ref.digest
    assert await stored_artifacts(store) == [(ref.digest, True)]
    # The same bytes again (a page repeated after a crash) are one artifact, still whole.
    again = await store.commit_page(
        lease,
        result.checkpoint.checkpoint_revision,
        records("a"),
        None,
        "p1",
        artifact=PageArtifact(name="results/page-1.json", data=body),
    )
    assert again.artifact == ref
    assert await stored_artifacts(store) == [(ref.digest, True)]
    clock.advance(timedelta(days=30))
    assert await store.collect_unreferenced_artifacts(older_than=timedelta(0)) == 0
    assert await store.read_artifact(ref.digest) == body


async def test_a_fenced_commit_writes_neither_its_page_artifact_nor_its_checkpoint(
    store: Store, clock: FakeClock
) -> None:
    """A stale lease's page commit, artifact included, is refused whole: nothing stored."""
    old, cp = await running_job(store)
    clock.advance(TTL)
    await store.claim("job-1", "w2", TTL)
    before = await snapshot(store)
    page = PageArtifact(name="results/p1.json", data=b"the fenced worker's evidence")
    with pytest.raises(StaleLeaseError):
        await store.commit_page(
            old, cp.checkpoint_revision, records("a"), "p2", "p1", artifact=page
        )
    assert await snapshot(store) == before
    assert await stored_artifacts(store) == []


async def test_a_damaged_artifact_under_the_same_digest_fails_the_page_commit(
    store: Store,
) -> None:
    """A stored row whose bytes no longer match its digest is never named by a checkpoint."""
    lease, cp = await running_job(store)
    page = PageArtifact(name="results/p1.json", data=b"page one")
    # The bytes a first commit would have stored, then damaged on disk.
    first = await store.commit_page(
        lease, cp.checkpoint_revision, records("a"), "p2", "p1", artifact=page
    )
    assert first.artifact is not None
    digest = first.artifact.digest

    def damage() -> StoreOperation[None]:
        yield StoreStatement(
            "damage", "UPDATE artifacts SET data = ? WHERE digest = ?", (b"page onf", digest)
        )

    await run_store_operation(store, damage)
    before = await snapshot(store)
    with pytest.raises(StoreCorrupt, match="read back differently"):
        await store.commit_page(
            lease, first.checkpoint.checkpoint_revision, records("b"), "p3", "p2", artifact=page
        )
    assert await snapshot(store) == before


async def test_a_page_artifact_of_the_wrong_type_is_refused_before_any_write(
    store: Store,
) -> None:
    """Non-bytes artifact data, or an artifact of another type, is a typed error."""
    lease, cp = await running_job(store)
    with pytest.raises(InvalidArgumentType):
        PageArtifact(name="x.json", data="text, not bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        PageArtifact(name=" ", data=b"x")
    before = await snapshot(store)
    with pytest.raises(InvalidArgumentType):
        await store.commit_page(
            lease,
            cp.checkpoint_revision,
            records("a"),
            "p2",
            "p1",
            artifact=b"raw",  # type: ignore[arg-type]
        )
    assert await snapshot(store) == before
    assert await stored_artifacts(store) == []


async def test_only_old_unreferenced_artifacts_are_collected(
    store: Store, clock: FakeClock
) -> None:
    """Collection deletes unreferenced artifacts past the grace, keeps referenced and recent."""
    lease, cp = await running_job(store)
    kept = await store.put_artifact(b"referenced", name="a")
    orphan = await store.put_artifact(b"orphan", name="b")
    await store.commit_page(lease, cp.checkpoint_revision, records("a"), None, "p1", artifact=kept)
    clock.advance(timedelta(hours=2))
    fresh = await store.put_artifact(b"just written", name="c")
    assert await store.collect_unreferenced_artifacts(older_than=timedelta(hours=1)) == 1
    with pytest.raises(ArtifactNotFound):
        await store.read_artifact(orphan.digest)
    assert await store.read_artifact(kept.digest) == b"referenced"
    assert await store.read_artifact(fresh.digest) == b"just written"


# ---------------------------------------------------------------- external writes


async def test_external_write_lifecycle(store: Store) -> None:
    """intent → unknown → reconciled is recorded; a second intent returns the first record."""
    lease, _ = await running_job(store)
    intent = await store.record_write_intent(lease, "submit-order-7", {"order": 7})
    assert intent.status == "intent"
    again = await store.record_write_intent(lease, "submit-order-7", {"order": 8})
    assert again.status == "intent"
    assert again.intent == {"order": 7}
    unknown = await store.resolve_write(lease, "submit-order-7", "unknown")
    assert unknown.status == "unknown"
    # An unknown outcome is never silently retried: a second intent still reports it.
    assert (await store.record_write_intent(lease, "submit-order-7", {})).status == "unknown"
    settled = await store.resolve_write(
        lease, "submit-order-7", "reconciled", outcome={"found": True}
    )
    assert (settled.status, settled.outcome) == ("reconciled", {"found": True})
    [stored] = await store.external_writes("job-1")
    assert stored.status == "reconciled"
    assert stored.outcome == {"found": True}


async def test_external_write_moves_only_forward(store: Store) -> None:
    """Confirmed is final; resolving a key with no intent is InvalidTransition."""
    lease, _ = await running_job(store)
    await store.record_write_intent(lease, "k", {})
    await store.resolve_write(lease, "k", "confirmed")
    with pytest.raises(InvalidTransition):
        await store.resolve_write(lease, "k", "unknown")
    with pytest.raises(InvalidTransition):
        await store.resolve_write(lease, "missing", "confirmed")
    with pytest.raises(InvalidArgument):
        await store.resolve_write(lease, "k", "intent")


# ---------------------------------------------------------------- keeper state


async def test_keeper_state_round_trips_and_replaces_atomically(store: Store) -> None:
    """save_keeper_state replaces the whole document; load returns what was saved."""
    assert await store.load_keeper_state("keeper") is None
    first = {
        "generation": 1,
        "generations": [{"generation": 1, "started_at": "2026-10-13T09:00:00+00:00"}],
        "logins": [
            {
                "site": "billing.example",
                "owner": "billing",
                "account": "ana",
                "generation": 1,
                "cookies": [{"name": "sid", "fingerprint": "hmac-abc"}],
            }
        ],
    }
    await store.save_keeper_state("keeper", first)
    assert await store.load_keeper_state("keeper") == first
    await store.save_keeper_state("keeper", {"generation": 2})
    assert await store.load_keeper_state("keeper") == {"generation": 2}
    assert await store.keeper_ids() == ["keeper"]


async def test_keeper_state_with_a_secret_value_is_refused(store: Store) -> None:
    """A document carrying a cookie value or a password is refused, unchanged on disk."""
    await store.save_keeper_state("keeper", {"generation": 1})
    leaky = {"logins": [{"site": "x", "cookies": [{"name": "sid", "value": "s3cr3t"}]}]}
    with pytest.raises(InvalidArgument) as info:
        await store.save_keeper_state("keeper", leaky)
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(InvalidArgument):
        await store.save_keeper_state("keeper", {"grants": [{"site": "x", "password": "p"}]})
    with pytest.raises(InvalidArgument):
        await store.save_keeper_state("keeper", {"x": object()})
    assert await store.load_keeper_state("keeper") == {"generation": 1}
    # Ids that merely look like secret words are not secrets.
    await store.save_keeper_state("keeper", {"seen": {"password": 1, "value": 2}})
    assert await store.load_keeper_state("keeper") == {"seen": {"password": 1, "value": 2}}


# ---------------------------------------------------------------- profile leases


async def test_a_profile_lease_is_exclusive_until_released_and_its_token_grows(
    store: Store, clock: FakeClock
) -> None:
    """One holder per profile: others (and the holder itself) get ProfileHeld; each
    acquisition after a release carries a larger token."""
    first = await store.acquire_profile("alice", "pool-a", TTL)
    assert (first.profile, first.owner, first.token) == ("alice", "pool-a", 1)
    assert first.expires_at == clock.now() + TTL
    clock.advance(TTL - timedelta(seconds=1))
    with pytest.raises(ProfileHeld, match="pool-a"):
        await store.acquire_profile("alice", "pool-b", TTL)
    with pytest.raises(ProfileHeld):
        await store.acquire_profile("alice", "pool-a", TTL)
    assert isinstance(ProfileHeld("x"), LeaseHeldError)
    # Another profile is independent.
    assert (await store.acquire_profile("bob", "pool-b", TTL)).token == 1
    await store.release_profile(first)
    assert await store.profile_lease("alice") is None
    second = await store.acquire_profile("alice", "pool-b", TTL)
    assert second.token == first.token + 1
    assert await store.profile_lease("alice") == second


async def test_an_expired_profile_holder_is_fenced_and_its_late_writes_refused(
    store: Store, clock: FakeClock
) -> None:
    """After expiry another holder takes the profile over; the old lease can neither
    renew, release, nor write the keeper's document (nothing written)."""
    old = await store.acquire_profile("alice", "pool-a", TTL)
    await store.save_keeper_state_fenced(old, "profile:alice", {"generation": 1})
    clock.advance(TTL)
    new = await store.acquire_profile("alice", "pool-b", TTL)
    assert new.token == old.token + 1
    events_before = len(await store.events())
    with pytest.raises(ProfileLeaseLost):
        await store.save_keeper_state_fenced(old, "profile:alice", {"generation": 2})
    with pytest.raises(ProfileLeaseLost):
        await store.renew_profile(old, TTL)
    with pytest.raises(ProfileLeaseLost):
        await store.release_profile(old)
    assert isinstance(ProfileLeaseLost("x"), StaleLeaseError)
    assert await store.load_keeper_state("profile:alice") == {"generation": 1}
    assert len(await store.events()) == events_before
    await store.save_keeper_state_fenced(new, "profile:alice", {"generation": 2})
    assert await store.load_keeper_state("profile:alice") == {"generation": 2}


async def test_an_expired_profile_lease_writes_nothing_even_if_nobody_took_over(
    store: Store, clock: FakeClock
) -> None:
    """Expiry alone fences writes and renewal; the expired holder may still give it back."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    clock.advance(TTL)
    with pytest.raises(ProfileLeaseLost, match="expired"):
        await store.save_keeper_state_fenced(lease, "profile:alice", {"generation": 1})
    with pytest.raises(ProfileLeaseLost, match="expired"):
        await store.renew_profile(lease, TTL)
    assert await store.load_keeper_state("profile:alice") is None
    await store.release_profile(lease)
    assert await store.profile_lease("alice") is None


async def test_renewing_a_profile_lease_moves_its_expiry_and_keeps_its_token(
    store: Store, clock: FakeClock
) -> None:
    """renew_profile() keeps a current lease alive past its first expiry."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    clock.advance(TTL - timedelta(seconds=5))
    renewed = await store.renew_profile(lease, TTL)
    assert (renewed.token, renewed.expires_at) == (lease.token, clock.now() + TTL)
    clock.advance(TTL - timedelta(seconds=5))
    await store.save_keeper_state_fenced(renewed, "profile:alice", {"generation": 1})
    with pytest.raises(ProfileHeld):
        await store.acquire_profile("alice", "pool-b", TTL)


async def test_profile_lease_events_say_who_held_which_profile_when(
    store: Store, clock: FakeClock
) -> None:
    """Acquire, release and takeover are events naming profile, owner and token."""
    a = await store.acquire_profile("alice", "pool-a", TTL)
    await store.release_profile(a)
    await store.acquire_profile("alice", "pool-b", TTL)
    clock.advance(TTL)
    await store.acquire_profile("alice", "pool-c", TTL)
    events = [e for e in await store.events() if e.kind.startswith("profile_")]
    assert [(e.kind, e.lease_owner, dict(e.data).get("token")) for e in events] == [
        ("profile_acquired", "pool-a", 1),
        ("profile_released", "pool-a", 1),
        ("profile_acquired", "pool-b", 2),
        ("profile_acquired", "pool-c", 3),
    ]
    assert all(e.data["profile"] == "alice" for e in events)
    assert events[-1].data["took_over_from"] == "pool-b"
    assert "took_over_from" not in events[2].data


async def test_bad_profile_lease_arguments_change_nothing(store: Store) -> None:
    """Typed errors for a bad profile, owner, ttl or lease; no row, no event."""
    with pytest.raises(InvalidArgument):
        await store.acquire_profile("", "pool-a", TTL)
    with pytest.raises(InvalidArgumentType):
        await store.acquire_profile(7, "pool-a", TTL)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await store.acquire_profile("alice", "pool-a", timedelta(0))
    with pytest.raises(InvalidArgumentType):
        await store.renew_profile("alice", TTL)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType):
        await store.release_profile(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType):
        await store.save_keeper_state_fenced("lease", "k", {})  # type: ignore[arg-type]
    assert await store.profile_lease("alice") is None
    assert await store.events() == []
    assert await store.keeper_ids() == []


async def test_concurrent_acquirers_never_share_a_profile(store: Store) -> None:
    """Many acquirers at once: exactly one gets each profile, the others ProfileHeld."""

    async def try_acquire(owner: str) -> str | None:
        try:
            await store.acquire_profile("alice", owner, TTL)
        except ProfileHeld:
            return None
        return owner

    winners = [w for w in await asyncio.gather(*(try_acquire(f"p{i}") for i in range(8))) if w]
    assert len(winners) == 1
    assert (await store.profile_lease("alice")).owner == winners[0]  # type: ignore[union-attr]


def _query(maker: StoreMaker, sql: str) -> list[tuple[object, ...]]:
    """Rows of ``sql`` read straight from the maker's database (not through the store)."""
    if maker.kind == "sqlite":
        import sqlite3

        conn = sqlite3.connect(maker.location)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(maker.location) as pg:
        return [tuple(r) for r in pg.execute(sql.encode()).fetchall()]


async def test_declared_projections_are_stored_and_replaced_with_the_document(
    maker: StoreMaker, store: Store
) -> None:
    """The rows a caller declares land in the projection tables; the next save replaces them."""
    doc = {"format": "anything", "generation": 1}
    rows: dict[str, list[dict[str, object]]] = {
        "keeper_generations": [{"generation": 1, "cause": "crashed"}, {"generation": 2}],
        "keeper_tabs": [{"conversation": "billing", "body": "{}"}],
    }
    await store.save_keeper_state("keeper", doc, projections=rows)
    sql = "SELECT keeper_id, generation, cause FROM keeper_generations ORDER BY generation"
    assert _query(maker, sql) == [("keeper", 1, "crashed"), ("keeper", 2, None)]
    assert _query(maker, "SELECT conversation FROM keeper_tabs") == [("billing",)]
    await store.save_keeper_state("keeper", doc, projections={"keeper_generations": []})
    assert _query(maker, sql) == []
    assert _query(maker, "SELECT conversation FROM keeper_tabs") == []
    # The store reads none of the document's fields: nothing is projected unless declared.
    await store.save_keeper_state("keeper", {"generations": [{"generation": 7}]})
    assert _query(maker, sql) == []


@pytest.mark.parametrize(
    ("projections", "error"),
    [
        ({"jobs": [{"job_id": "x"}]}, InvalidArgument),
        ({"keeper_tabs": [{"conversation": "a", "body": "{}", "colour": "red"}]}, InvalidArgument),
        ({"keeper_tabs": [{"conversation": "a"}]}, InvalidArgument),
        (
            {"keeper_grants": [{"grant_key": "0", "body": "{}"}, {"grant_key": "0", "body": "{}"}]},
            InvalidArgument,
        ),
        ({"keeper_grants": [{"grant_key": "0", "body": {"nested": 1}}]}, InvalidArgumentType),
        ({"keeper_grants": [{"grant_key": True, "body": "{}"}]}, InvalidArgumentType),
        ({"keeper_grants": [{"grant_key": 1.5, "body": "{}"}]}, InvalidArgumentType),
        ({"keeper_grants": [{"grant_key": "0", "body": 7}]}, InvalidArgumentType),
        ({"keeper_grants": "rows"}, InvalidArgumentType),
        ({"keeper_grants": ["row"]}, InvalidArgumentType),
        (["keeper_grants"], InvalidArgumentType),
    ],
)
async def test_projection_rows_that_do_not_fit_their_table_change_nothing(
    maker: StoreMaker, store: Store, projections: object, error: type[Exception]
) -> None:
    """An unknown table or column, a missing value, a repeated key or a non-scalar value is
    refused with a typed error before anything is written."""
    rows = {"keeper_grants": [{"grant_key": "0", "body": "{}"}]}
    await store.save_keeper_state("keeper", {"generation": 1}, projections=rows)
    with pytest.raises(error):
        await store.save_keeper_state(
            "keeper",
            {"generation": 2},
            projections=projections,  # type: ignore[arg-type]
        )
    assert await store.load_keeper_state("keeper") == {"generation": 1}
    assert _query(maker, "SELECT grant_key, body FROM keeper_grants") == [("0", "{}")]


# ---------------------------------------------------------------- events


async def test_events_are_appended_read_back_and_logged(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """append_event assigns increasing ids, events() filters, and each event is logged."""
    at = datetime(2026, 10, 13, 9, 0, tzinfo=UTC)
    with caplog.at_level(logging.INFO, logger="session_keeper.events"):
        for i in range(5):
            await store.append_event(
                Event(
                    kind="rate_limited" if i % 2 else "step_failed",
                    at=at,
                    job_id="j" if i < 3 else None,
                    attempt=i,
                    failure_class="transient" if i % 2 == 0 else None,
                    elapsed_s=1.5,
                    remaining_budget_s=60.0,
                    data={"i": i},
                )
            )
    everything = await store.events()
    ids = [e.id for e in everything if e.id is not None]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5
    assert [e.data["i"] for e in everything] == [0, 1, 2, 3, 4]
    assert [e.attempt for e in await store.events(job_id="j")] == [0, 1, 2]
    assert [e.attempt for e in await store.events(since_id=ids[2])] == [3, 4]
    assert [e.attempt for e in await store.events(newest_first=True, limit=2)] == [4, 3]
    assert [e.attempt for e in await store.events(kind="rate_limited")] == [1, 3]
    first = everything[0]
    assert (first.at, first.failure_class, first.elapsed_s) == (at, "transient", 1.5)
    logged = [r for r in caplog.records if r.name == "session_keeper.events"]
    assert len(logged) == 5
    assert '"kind": "step_failed"' in logged[0].getMessage()


async def test_a_batch_of_events_is_appended_in_order_in_one_transaction(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """append_events stores a batch in order with increasing ids and logs each; a batch
    holding a non-Event is refused with a typed error and writes none of it."""
    at = datetime(2026, 10, 13, 9, 0, tzinfo=UTC)
    await store.append_event(Event(kind="job_submitted", at=at))
    batch = [Event(kind="audit" if i % 2 else "audit_head", at=at, data={"i": i}) for i in range(4)]
    with caplog.at_level(logging.INFO, logger="session_keeper.events"):
        stored = await store.append_events(batch)
    assert [e.data["i"] for e in stored] == [0, 1, 2, 3]
    ids = [e.id for e in stored if e.id is not None]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [(e.id, e.data["i"]) for e in (await store.events())[1:]] == list(
        zip(ids, range(4), strict=True)
    )
    assert len([r for r in caplog.records if r.name == "session_keeper.events"]) == 4
    with pytest.raises(InvalidArgumentType):
        await store.append_events([Event(kind="guard_block", at=at), "not an event"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentType):
        await store.append_events(Event(kind="guard_block", at=at))  # type: ignore[arg-type]
    assert len(await store.events()) == 5
    assert await store.append_events([]) == []
    # More than one INSERT's worth: still in order, every one stored.
    many = await store.append_events(
        [Event(kind="job_on_profile", at=at, data={"i": i}) for i in range(1200)]
    )
    assert [e.data["i"] for e in await store.events(kind="job_on_profile", limit=2000)] == list(
        range(1200)
    )
    assert [e.id for e in many] == [
        e.id for e in await store.events(kind="job_on_profile", limit=2000)
    ]


# ---------------------------------------------------------------- durability and concurrency


async def test_everything_survives_closing_and_reopening(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """A reopened store has the same jobs, leases, checkpoints, results and events."""
    async with maker.open(clock) as store:
        lease, cp = await running_job(store)
        await store.commit_page(lease, cp.checkpoint_revision, records("a", "b"), "p2", "p1")
        await store.save_keeper_state("k", {"generation": 3})
        before = await snapshot(store)
    async with maker.open(clock) as store:
        assert await snapshot(store) == before
        assert await store.load_keeper_state("k") == {"generation": 3}


async def test_many_async_writers_lose_nothing(store: Store) -> None:
    """Twenty coroutines committing ten pages each: every page and record is durable."""
    jobs = [f"job-{i:02d}" for i in range(20)]

    async def work(job_id: str) -> None:
        lease, cp = await running_job(store, job_id=job_id)
        revision = cp.checkpoint_revision
        for page in range(10):
            ids = [f"{job_id}-{page}-{n}" for n in range(10)]
            result = await store.commit_page(
                lease, revision, records(*ids), f"page-{page + 1}", f"page-{page}"
            )
            revision = result.checkpoint.checkpoint_revision

    await asyncio.gather(*(work(j) for j in jobs))
    for job_id in jobs:
        assert await store.count_results(job_id) == 100
        assert (await store.load_checkpoint(job_id)).next_cursor == "page-10"


async def test_concurrent_claimers_never_share_a_job(store: Store) -> None:
    """Thirty claim_next_ready calls racing for ten jobs: each job is handed out once."""
    for i in range(10):
        await store.submit_job(JobContract(job_id=f"j{i}"))
    got = await asyncio.gather(*(store.claim_next_ready(f"w{i}", TTL) for i in range(30)))
    claimed = [g.job_id for g in got if g is not None]
    assert sorted(claimed) == [f"j{i}" for i in range(10)]


async def test_closed_store_refuses_calls(maker: StoreMaker, clock: FakeClock) -> None:
    """After close() a store raises StoreError instead of reopening silently."""
    from session_keeper.errors import StoreError

    store = maker.make(clock)
    async with store:
        pass
    with pytest.raises(StoreError):
        await store.load_keeper_state("k")
    with pytest.raises(StoreError):
        await store.open()


# ---------------------------------------------------------------- durable steps' write intents

#: An idempotency key as a durable step derives it: workflow id, step id, write name.
IDEM = "run-1f2e:3:refund"


async def _intent_rows(store: Store) -> list[tuple[object, ...]]:
    def select() -> StoreOperation[list[tuple[object, ...]]]:
        rows = yield StoreStatement(
            "select", "SELECT key, profile, lease_token FROM write_intents ORDER BY key"
        )
        return rows

    return await run_store_operation(store, select, write=False)


async def test_only_the_first_intent_to_submit_a_write_is_first(
    store: Store, clock: FakeClock
) -> None:
    """intend_write() says first for a key no one recorded, never again for it (its first
    recorder's time kept); another key is first in its turn."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    made = clock.now()
    first = await store.intend_write(lease, TTL, IDEM)
    assert (first.key, first.first, first.recorded_at) == (IDEM, True, made)
    clock.advance(timedelta(seconds=5))
    again = await store.intend_write(first.lease, TTL, IDEM)
    assert (again.first, again.recorded_at) == (False, made)
    other = await store.intend_write(again.lease, TTL, "run-1f2e:4:refund")
    assert (other.first, other.recorded_at) == (True, clock.now())


async def test_an_intent_renews_the_profile_lease_in_the_same_transaction(
    store: Store, clock: FakeClock
) -> None:
    """The returned lease (same token) runs a full ttl from the intent, as the store says."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    clock.advance(TTL - timedelta(seconds=1))
    intent = await store.intend_write(lease, TTL, IDEM)
    assert (intent.lease.token, intent.lease.expires_at) == (lease.token, clock.now() + TTL)
    assert await store.profile_lease("alice") == intent.lease
    clock.advance(TTL - timedelta(seconds=1))
    with pytest.raises(ProfileHeld):
        await store.acquire_profile("alice", "pool-b", TTL)


async def test_an_intent_outlives_its_holder_and_the_next_holder_is_not_first(
    store: Store, clock: FakeClock
) -> None:
    """A holder that recorded an intent and died: whoever holds the profile next (the
    store reopened, another pool) finds the intent and must read back first."""
    old = await store.acquire_profile("alice", "pool-a", TTL)
    await store.intend_write(old, TTL, IDEM)
    clock.advance(TTL)
    new = await store.acquire_profile("alice", "pool-b", TTL)
    assert (await store.intend_write(new, TTL, IDEM)).first is False
    assert await _intent_rows(store) == [(IDEM, "alice", old.token)]


async def test_a_fenced_holder_records_no_intent_and_renews_nothing(
    store: Store, clock: FakeClock
) -> None:
    """A lease taken over (or only expired) refuses the intent with ProfileLeaseLost:
    nothing is recorded, nothing renewed, so the current holder's intent is the first."""
    old = await store.acquire_profile("alice", "pool-a", TTL)
    clock.advance(TTL)
    with pytest.raises(ProfileLeaseLost, match="expired"):
        await store.intend_write(old, TTL, IDEM)
    new = await store.acquire_profile("alice", "pool-b", TTL)
    with pytest.raises(ProfileLeaseLost, match="stale"):
        await store.intend_write(old, TTL, IDEM)
    assert await _intent_rows(store) == []
    assert await store.profile_lease("alice") == new
    assert (await store.intend_write(new, TTL, IDEM)).first is True


async def test_bad_intent_arguments_raise_typed_errors_and_record_nothing(store: Store) -> None:
    """A lease that is not a ProfileLease, a bad ttl or an empty key is refused before
    the store is touched."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    with pytest.raises(InvalidArgumentType):
        await store.intend_write("lease", TTL, IDEM)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await store.intend_write(lease, timedelta(0), IDEM)
    with pytest.raises(InvalidArgument):
        await store.intend_write(lease, TTL, " ")
    with pytest.raises(InvalidArgumentType):
        await store.intend_write(lease, TTL, 3)  # type: ignore[arg-type]
    assert await _intent_rows(store) == []
    assert await store.profile_lease("alice") == lease


async def test_an_intent_is_durable_across_reopening_the_store(
    maker: StoreMaker, clock: FakeClock
) -> None:
    """An intent recorded, then the store closed (a process gone): reopened, it is there."""
    async with maker.open(clock) as store:
        lease = await store.acquire_profile("alice", "pool-a", TTL)
        await store.intend_write(lease, TTL, IDEM)
    async with maker.open(clock) as store:
        assert (await store.intend_write(lease, TTL, IDEM)).first is False


async def test_an_intent_row_holds_its_key_profile_and_token_and_nothing_else(
    store: Store,
) -> None:
    """The row is the derived idempotency key, the profile and the fencing token (a
    counter) with its time: no column for a cookie, password or token value."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    await store.intend_write(lease, TTL, IDEM)

    def everything() -> StoreOperation[list[tuple[object, ...]]]:
        rows = yield StoreStatement("select", "SELECT * FROM write_intents")
        return rows

    (row,) = await run_store_operation(store, everything, write=False)
    assert row[:3] == (IDEM, "alice", lease.token) and len(row) == 4


async def test_an_intent_and_its_lease_renewal_are_one_transaction(
    store: Store, clock: FakeClock
) -> None:
    """The intent is written in the transaction that renews the lease (one commit: no
    round trip of its own), and a failure at the intent's row keeps neither."""
    lease = await store.acquire_profile("alice", "pool-a", TTL)
    transactions: list[list[str]] = [[]]

    def hook(label: str) -> None:
        if label == "COMMITTED":
            transactions.append([])
        elif label != "COMMIT":
            transactions[-1].append(label)

    watch_store_statements(store, hook)
    try:
        renewed = (await store.intend_write(lease, TTL, IDEM)).lease
    finally:
        watch_store_statements(store, None)
    assert [t for t in transactions if t] == [
        ["lock_profile", "renew_profile", "insert_write_intent"]
    ]

    class Crash(Exception):
        pass

    def crash(label: str) -> None:
        if label == "insert_write_intent":
            raise Crash

    clock.advance(timedelta(seconds=10))
    watch_store_statements(store, crash)
    try:
        with pytest.raises(Crash):
            await store.intend_write(renewed, TTL, "run-1f2e:4:refund")
    finally:
        watch_store_statements(store, None)
    assert await store.profile_lease("alice") == renewed
    assert await _intent_rows(store) == [(IDEM, "alice", lease.token)]
