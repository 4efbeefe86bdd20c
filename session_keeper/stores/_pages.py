"""Store operations that move a job forward: ``transition``, ``commit_page``, results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from session_keeper.errors import (
    ArtifactNotFound,
    InvalidArgument,
    InvalidArgumentType,
    InvalidTransition,
)
from session_keeper.stores._artifacts import write_referenced
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._records import (
    ALLOWED_TRANSITIONS,
    JOB_STATES,
    ArtifactRef,
    Checkpoint,
    CommitResult,
    Event,
    JobState,
    Lease,
    PageArtifact,
    ResultRecord,
    StoredResult,
    dump_json,
)
from session_keeper.stores._sql import (
    Q,
    Step,
    check_attempts,
    check_lease,
    check_revision,
    check_str,
    digest_of,
    load_mapping,
)
from session_keeper.stores._steps import (
    insert_event,
    job_event,
    lock_lease_and_job,
    write_checkpoint,
)


@attrs.frozen(kw_only=True)
class PreparedPage:
    """A page commit's arguments, checked and serialised before any transaction."""

    lease: Lease
    expected_revision: int
    #: The number of records passed (duplicates by source_record_id included).
    record_count: int
    #: True when at least one record was passed.
    has_records: bool
    #: The page as one JSON array of ``[source_record_id, data]`` pairs.
    page_json: str
    next_cursor: str | None
    step: str
    artifact: ArtifactRef | None
    #: The artifact's bytes when the commit writes it (a :class:`PageArtifact`).
    artifact_data: bytes | None
    attempts_used: int | None
    state: JobState


def prepare_page(
    lease: Lease,
    expected_revision: int,
    records: Sequence[ResultRecord],
    next_cursor: str | None,
    step: str,
    artifact: ArtifactRef | PageArtifact | None,
    attempts_used: int | None,
    state: JobState | None,
) -> PreparedPage:
    """Check and serialise a page commit; pure, so it runs on the caller's thread.

    Raises the same typed errors as the commit would, before anything is written.
    """
    check_lease(lease)
    check_revision(expected_revision)
    check_str(step, "step")
    if next_cursor is not None and not isinstance(next_cursor, str):
        raise InvalidArgumentType("next_cursor must be a str or None")
    if isinstance(records, str | bytes) or not isinstance(records, Sequence):
        raise InvalidArgumentType("records must be a sequence of ResultRecord")
    if not all(isinstance(r, ResultRecord) for r in records):
        raise InvalidArgumentType("records must be a sequence of ResultRecord")
    ref: ArtifactRef | None
    data: bytes | None = None
    if isinstance(artifact, PageArtifact):
        # Hashed here, off the database thread (and outside its write lock).
        data = artifact.data
        ref = ArtifactRef(name=artifact.name, digest=digest_of(data), size=len(data))
    elif artifact is None or isinstance(artifact, ArtifactRef):
        ref = artifact
    else:
        raise InvalidArgumentType("artifact must be a PageArtifact, an ArtifactRef or None")
    final_state: JobState = "running" if state is None else state
    if final_state not in ALLOWED_TRANSITIONS["running"]:
        raise InvalidArgument(f"unknown job state {final_state!r}")
    if final_state == "awaiting_human":
        raise InvalidArgument("pause with transition(), which records a pause_reason")
    attempts = check_attempts(attempts_used)
    unique: dict[str, Mapping[str, object]] = {}
    for record in records:
        if record.source_record_id not in unique:
            unique[record.source_record_id] = record.data
    # The whole page travels as one JSON array of [source_record_id, data] pairs: one
    # encode and one bound parameter instead of one per record and six per row.
    # Serialised before the transaction starts, so bad data never half-writes.
    page_json = dump_json([[rid, dict(data)] for rid, data in unique.items()], "record data")
    return PreparedPage(
        lease=lease,
        expected_revision=expected_revision,
        record_count=len(records),
        has_records=bool(unique),
        page_json=page_json,
        next_cursor=next_cursor,
        step=step,
        artifact=ref,
        artifact_data=data,
        attempts_used=attempts,
        state=final_state,
    )


class Pages(Engine):
    """``transition``, ``commit_page``, ``results`` and ``count_results``."""

    @operation(write=True)
    def transition(
        self,
        lease: Lease,
        expected_revision: int,
        state: JobState,
        *,
        pause_reason: str | None = None,
        attempts_used: int | None = None,
        event: Event | None = None,
    ) -> Step[Checkpoint]:
        """See :meth:`Store.transition`."""
        check_lease(lease)
        check_revision(expected_revision)
        if state not in JOB_STATES:
            raise InvalidArgument(f"unknown job state {state!r}")
        if pause_reason is not None and not isinstance(pause_reason, str):
            raise InvalidArgumentType("pause_reason must be a str or None")
        if state == "awaiting_human" and not pause_reason:
            raise InvalidArgument("awaiting_human needs a pause_reason a person can act on")
        attempts = check_attempts(attempts_used)
        now = self._clock.now()
        current = yield from lock_lease_and_job(lease, now, expected_revision)
        if state not in ALLOWED_TRANSITIONS[current.state]:
            raise InvalidTransition(
                f"job {lease.job_id!r} cannot go from {current.state} to {state}"
            )
        if attempts is not None and attempts < current.attempts_used:
            raise InvalidArgument("attempts_used never goes back (the budget would silently reset)")
        new = attrs.evolve(
            current,
            state=state,
            pause_reason=pause_reason,
            attempts_used=current.attempts_used if attempts is None else attempts,
            checkpoint_revision=current.checkpoint_revision + 1,
        )
        yield from write_checkpoint(current, new, now)
        yield from insert_event(
            job_event(
                event,
                "job_state_changed",
                now,
                lease,
                new,
                {"from": current.state, "to": state, "pause_reason": pause_reason},
            )
        )
        return new

    async def commit_page(
        self,
        lease: Lease,
        expected_revision: int,
        records: Sequence[ResultRecord],
        next_cursor: str | None,
        step: str,
        *,
        artifact: ArtifactRef | PageArtifact | None = None,
        event: Event | None = None,
        attempts_used: int | None = None,
        state: JobState | None = None,
    ) -> CommitResult:
        """See :meth:`Store.commit_page`."""
        # Checked and serialised here, on the caller's thread: the database thread
        # (and its write lock) only runs SQL, while the next page is being encoded.
        page = prepare_page(
            lease, expected_revision, records, next_cursor, step, artifact, attempts_used, state
        )
        return await self._perform(
            lambda: self._commit_page(page, event), write=True, name="commit_page"
        )

    def _commit_page(self, page: PreparedPage, event: Event | None) -> Step[CommitResult]:
        """Results, artifact (or its reference), cursor and revision: one transaction."""
        lease, step, artifact = page.lease, page.step, page.artifact
        attempts, next_cursor = page.attempts_used, page.next_cursor
        now = self._clock.now()

        current = yield from lock_lease_and_job(lease, now, page.expected_revision)
        if current.state != "running":
            raise InvalidTransition(
                f"job {lease.job_id!r} is {current.state}; pages are committed only while running"
            )
        if attempts is not None and attempts < current.attempts_used:
            raise InvalidArgument("attempts_used never goes back (the budget would silently reset)")
        if artifact is not None and page.artifact_data is not None:
            # Written only now, past the fence and the state checks: a fenced worker's
            # page stores no artifact, and a crash stores both or neither.
            yield from write_referenced(artifact, page.artifact_data, now)
        elif artifact is not None:
            # Checks the artifact exists and marks it referenced in one statement; on
            # PostgreSQL the row lock also holds off a concurrent collection.
            found = yield Q(
                "reference_artifact",
                "UPDATE artifacts SET referenced_at = ? WHERE digest = ? AND size = ?",
                (now, artifact.digest, artifact.size),
                answer="changes",
            )
            if not found[0][0]:
                raise ArtifactNotFound(
                    f"artifact {artifact.digest} was not written and verified before the commit"
                )

        new_revision = current.checkpoint_revision + 1
        new_records = 0
        if page.has_records:
            inserted = yield Q(
                "insert_results",
                # ("WHERE true" resolves SQLite's INSERT ... SELECT ... ON CONFLICT ambiguity.)
                "INSERT INTO results (job_id, source_record_id, data, revision, ordinal, step) "
                "SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), ?, key, ? "
                "FROM json_each(?) WHERE true "
                "ON CONFLICT (job_id, source_record_id) DO NOTHING",
                (lease.job_id, new_revision, step, page.page_json),
                pg_sql=(
                    "INSERT INTO results (job_id, source_record_id, data, revision, ordinal, step) "
                    "SELECT %s::text, e ->> 0, (e -> 1)::text, %s::bigint, ord - 1, %s::text "
                    "FROM json_array_elements(%s::json) WITH ORDINALITY AS t(e, ord) "
                    "ON CONFLICT (job_id, source_record_id) DO NOTHING"
                ),
                # Rows inserted, not the ones a conflict skipped: the new records.
                answer="changes",
            )
            new_records = int(inserted[0][0])

        new = attrs.evolve(
            current,
            state=page.state,
            last_committed_step=step,
            next_cursor=next_cursor,
            accepted_artifact=None if artifact is None else artifact.name,
            artifact_digest=None if artifact is None else artifact.digest,
            checkpoint_revision=new_revision,
            attempts_used=current.attempts_used if attempts is None else attempts,
            pause_reason=None,
        )
        yield from write_checkpoint(current, new, now)
        already = page.record_count - new_records
        values = job_event(
            event,
            "page_committed",
            now,
            lease,
            new,
            {"new_records": new_records, "already_present": already, "next_cursor": next_cursor},
        )
        # The commit's step and its artifact's digest are the store's facts too.
        values["step"] = step
        values["artifact"] = None if artifact is None else artifact.digest
        logged = yield from insert_event(values)
        assert logged.id is not None
        return CommitResult(
            checkpoint=new,
            new_records=new_records,
            already_present=already,
            event_id=logged.id,
            artifact=artifact,
        )

    @operation(write=False)
    def results(self, job_id: str) -> Step[list[StoredResult]]:
        """See :meth:`Store.results`."""
        check_str(job_id, "job_id")
        rows = yield Q(
            "select_results",
            "SELECT job_id, source_record_id, data, revision, step FROM results "
            "WHERE job_id = ? ORDER BY revision, ordinal",
            (job_id,),
        )
        return [
            StoredResult(
                job_id=r[0],
                source_record_id=r[1],
                data=load_mapping(r[2], f"result {r[1]!r}"),
                revision=int(r[3]),
                step=r[4],
            )
            for r in rows
        ]

    @operation(write=False)
    def count_results(self, job_id: str) -> Step[int]:
        """See :meth:`Store.count_results`."""
        check_str(job_id, "job_id")
        rows = yield Q("count_results", "SELECT COUNT(*) FROM results WHERE job_id = ?", (job_id,))
        return int(rows[0][0])
