"""The Store seam: what the keeper and the job loop need from durable storage.

The seam is split by capability (:class:`StoreLifetime`, :class:`KeeperStateStore`,
:class:`ProfileLeaseStore`, :class:`EventStore`, :class:`RetentionStore`,
:class:`JobStore`); :class:`Store` is all of them.

Implementations: :class:`~session_keeper.stores.SqliteStore` (embedded default, one file)
and :class:`~session_keeper.PostgresStore` (many workers, many machines): thin
drivers over one implementation (``_core.SqlStore``), run through one contract
suite, ``tests/store/test_store_contract.py``.

Contract shared by every method:

- Each call is one transaction: it happens completely or not at all. When a call
  raises, nothing was written.
- Errors are checked, and therefore raised, in this order:
  1. arguments (:class:`InvalidArgumentType` / :class:`InvalidArgument` /
     :class:`ContractError`), before the store is touched;
  2. the job exists (:class:`JobNotFound`);
  3. the lease is current: same owner, same fencing token, not expired
     (:class:`StaleLeaseError`);
  4. the stored rows are readable (:class:`StoreCorrupt`,
     :class:`SchemaVersionError` for a checkpoint of an unknown version);
  5. ``expected_revision`` is the job's checkpoint revision (:class:`StaleLeaseError`);
  6. the job's state allows the call (:class:`InvalidTransition`);
  7. referenced things exist (:class:`ArtifactNotFound`).
- Lock contention is waited out inside the store; a caller never sees "database is
  locked". Waiting longer than the store's busy timeout raises :class:`StoreBusy`.
- A broken database (not a store, damaged pages) raises :class:`StoreCorrupt`;
  a store written by a newer schema raises :class:`SchemaVersionError` on open, and
  opening it writes nothing.
- Time (lease expiry, timestamps) is read from the store's injected ``Clock``.
- No cookie value, password or token is ever written: the keeper passes fingerprints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from session_keeper._model.events import EventKind
from session_keeper.stores._records import (
    ArtifactRef,
    Checkpoint,
    CommitResult,
    Event,
    ExternalWrite,
    Job,
    JobContract,
    JobState,
    Lease,
    PageArtifact,
    ProfileLease,
    Pruned,
    ResultRecord,
    StoredResult,
    WriteIntent,
    WriteStatus,
)
from session_keeper.stores._rows import KeeperRows


@runtime_checkable
class StoreLifetime(Protocol):
    """Opening and closing a store: what every capability below shares."""

    async def __aenter__(self) -> Self:
        """Open (and migrate forward) the store. See :meth:`open`."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the store."""
        ...

    async def open(self) -> None:
        """Connect, check the schema version, migrate forward if older.

        Raises :class:`StoreCorrupt` (not a session_keeper store, damaged file) or
        :class:`SchemaVersionError` (newer schema) *before* writing anything.
        """
        ...

    async def close(self) -> None:
        """Release connections and threads. Idempotent. Later calls raise :class:`StoreError`."""
        ...


@runtime_checkable
class KeeperStateStore(StoreLifetime, Protocol):
    """The keepers' own state: saved documents and rows, with their projections."""

    async def load_keeper_state(self, keeper_id: str) -> dict[str, object] | None:
        """The document last saved for ``keeper_id``, or ``None``.

        Raises :class:`StoreCorrupt` if the stored document is not a JSON object.
        """
        ...

    async def save_keeper_state(
        self,
        keeper_id: str,
        state: Mapping[str, object],
        *,
        projections: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
    ) -> None:
        """Atomically replace the JSON document saved under ``keeper_id``.

        The document is opaque: its owner (the vault; the keeper before it saved rows,
        see :meth:`save_keeper_rows`) defines its shape and version. ``projections``
        are the rows the owner declares for the read-only inspection tables
        (``keeper_generations``, ``keeper_logins``, ``keeper_grants``, ``keeper_tabs``:
        table name → rows of column → value, ``keeper_id`` filled in by the store);
        every save replaces all of them.

        Raises, before writing anything: :class:`InvalidArgumentType` /
        :class:`InvalidArgument` if the document is not JSON, if a record in it
        carries a key named like a secret (``password``, ``secret``,
        ``cookie_value``) or a cookie record carries its ``value`` (fingerprints
        only), or if a projection names an unknown table or column, lacks a required
        value, repeats a key, or holds a value of the wrong type for its column.
        """
        ...

    async def save_keeper_state_fenced(
        self,
        fence: ProfileLease,
        keeper_id: str,
        state: Mapping[str, object],
        *,
        projections: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
    ) -> None:
        """:meth:`save_keeper_state`, only while the profile lease ``fence`` is current.

        Checked in the same transaction as the write (same owner and token,
        unexpired): a holder fenced meanwhile gets :class:`ProfileLeaseLost` and
        nothing is written. Raises the argument errors of :meth:`save_keeper_state`
        first (and :class:`InvalidArgumentType` when ``fence`` is not a ProfileLease).
        """
        ...

    async def keeper_ids(self) -> list[str]:
        """Ids of every keeper that saved a document or rows, sorted."""
        ...

    async def save_keeper_rows(
        self,
        keeper_id: str,
        *,
        head: Mapping[str, object],
        upserts: Sequence[tuple[str, str, Mapping[str, object]]] = (),
        deletes: Sequence[tuple[str, str]] = (),
        projections_upsert: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
        projections_delete: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
        replaces_document: bool = False,
        fence: ProfileLease | None = None,
    ) -> None:
        """Write one batch of changes to ``keeper_id``'s rows, in ONE transaction.

        The keeper's state is a head (one JSON object) and rows keyed ``(kind, key)``
        (each a JSON object), all opaque to the store: the keeper owns their format,
        their seals and what the head says about the rows. One call replaces the head,
        upserts ``upserts`` (``(kind, key, body)``), deletes ``deletes`` (``(kind,
        key)``; a missing row is no error), upserts ``projections_upsert`` rows and
        deletes the ``projections_delete`` rows (each given by its key columns) of the
        inspection tables (``keeper_generations`` by ``generation``, ``keeper_logins``
        by ``site``, ``keeper_grants`` by ``grant_key``, ``keeper_tabs`` by
        ``conversation``). ``replaces_document=True`` also deletes the document saved
        under ``keeper_id`` by :meth:`save_keeper_state` (the keeper's format before
        rows: converted once, then rows are authoritative). With ``fence``, the write
        happens only while that profile lease is current, checked in the same
        transaction (:class:`ProfileLeaseLost` otherwise).

        Atomic: every part of the batch is written, or (on any error, a crash at any
        statement) none. Rows are written one statement per batch, not per row.

        Raises, before writing anything: :class:`InvalidArgumentType` /
        :class:`InvalidArgument` if the head or a body is not a JSON object, if a
        written head or row carries a secret (the rule of :meth:`save_keeper_state`,
        applied to what is written), if a row is named twice or both upserted and
        deleted, or a projection row is malformed (the rules of
        :meth:`save_keeper_state`); :class:`InvalidArgumentType` when ``fence`` is not
        a ProfileLease.
        """
        ...

    async def load_keeper_rows(self, keeper_id: str) -> KeeperRows | None:
        """``keeper_id``'s head and every row, or ``None`` if it never saved rows (rows
        whose head is gone come back with an empty head).

        Raises :class:`StoreCorrupt` if the head or a row is not a JSON object.
        """
        ...


@runtime_checkable
class ProfileLeaseStore(StoreLifetime, Protocol):
    """Who uses which browser profile, fenced by a token (the pool)."""

    async def acquire_profile(self, profile: str, owner: str, ttl: timedelta) -> ProfileLease:
        """Lease browser ``profile`` to ``owner`` for ``ttl``, with a new, larger token.

        Raises :class:`ProfileHeld` while another unexpired lease holds it (also for
        the same owner: a holder renews, it does not acquire twice). Taking over an
        expired lease fences its holder. Logs a ``profile_acquired`` event (with
        ``took_over_from`` on a takeover).
        """
        ...

    async def renew_profile(self, lease: ProfileLease, ttl: timedelta) -> ProfileLease:
        """Move an unexpired, current profile lease's expiry to now + ``ttl``.

        Raises :class:`ProfileLeaseLost` when it expired or another holder took it.
        """
        ...

    async def intend_write(self, lease: ProfileLease, ttl: timedelta, key: str) -> WriteIntent:
        """Renew ``lease`` as :meth:`renew_profile` does and, in the same transaction,
        record that its holder is about to submit the external write ``key``.

        ``key`` is the write's idempotency key, derived from its workflow, step and name
        (never a cookie, password or token). A key already recorded is kept as it was
        (the first recorder's profile, token and time). Returns the renewed lease and
        whether this call recorded ``key`` first (:attr:`WriteIntent.first`): only then
        may the holder submit without reading the destination back, whatever its engine
        says about attempts. Raises :class:`ProfileLeaseLost` (nothing recorded, nothing
        renewed) as :meth:`renew_profile` does; argument errors first.
        """
        ...

    async def release_profile(self, lease: ProfileLease) -> None:
        """Give the profile back (allowed after expiry while nobody took it over).

        Raises :class:`ProfileLeaseLost` when another holder took it. Logs a
        ``profile_released`` event.
        """
        ...

    async def profile_lease(self, profile: str) -> ProfileLease | None:
        """The profile's lease not given back (maybe expired), or ``None``."""
        ...


@runtime_checkable
class EventStore(StoreLifetime, Protocol):
    """The append-only event log (job events, Guard blocks, the audit chain)."""

    async def append_event(self, event: Event) -> None:
        """Append ``event`` to the log (the store assigns ``id``) and log it to
        ``logging.getLogger("session_keeper.events")``."""
        ...

    async def append_events(self, events: Sequence[Event]) -> list[Event]:
        """Append ``events`` in order, in one transaction (all or none); return them
        with the ids the store assigned. Logged as :meth:`append_event` logs."""
        ...

    async def events(
        self,
        *,
        job_id: str | None = None,
        since_id: int | None = None,
        kind: EventKind | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[Event]:
        """Events with ``id > since_id`` (all if ``None``), oldest first unless
        ``newest_first``; at most ``limit``."""
        ...


@runtime_checkable
class RetentionStore(StoreLifetime, Protocol):
    """What a store may forget so it stays bounded (the audit chain only below a sealed
    mark, so it still verifies)."""

    async def prune_events(self, *, older_than: timedelta) -> Pruned:
        """Remove events older than ``older_than`` (by ``Event.at``), in one transaction.

        Kept whatever their age: the audit chain (kinds ``audit``, ``audit_head`` and
        ``audit_archive``: see :meth:`archive_audit`) and, for
        each job still stored, the newest event of each kind (the job loop reads
        those). The pass is recorded in the ``event_archive`` table before anything is
        removed; the database refuses any other deletion from the log. Returns what
        was removed. Raises :class:`InvalidArgumentType` / :class:`InvalidArgument`
        for a non-``timedelta`` or negative age, before changing anything.
        """
        ...

    async def archive_audit(
        self, *, older_than: timedelta, mark: Callable[[Event, Event | None], Event]
    ) -> Pruned:
        """Remove the audit chain's oldest part, up to a sealed head, in one transaction.

        The cut is the newest ``audit_head`` event older than ``older_than``: it and
        every ``audit``/``audit_head`` event before it go. ``mark(head, entry)`` is given
        that head and the audit entry just before it (``None`` if there is none) and
        returns the event (kind ``audit_archive``) the chain goes on from; it is written
        in the same transaction, after an ``audit_archive`` row that releases the
        deletion (the database refuses it otherwise). ``mark`` raising (a forged head)
        aborts the pass: nothing changes. Returns how many events went and the cut's
        event id (``Pruned(removed=0)`` when no head is old enough). Use
        :meth:`AuditLog.archive`, which seals the mark; argument errors as
        :meth:`prune_events`.
        """
        ...

    async def prune_results(self, *, older_than: timedelta) -> Pruned:
        """Remove the results of jobs that ended (``done``, ``failed``, ``stopped``)
        more than ``older_than`` ago, in one transaction; returns how many results went.

        The job, its final checkpoint and its external-write records stay, so
        submitting its contract again still returns the ended job (it does not run
        twice). Results of jobs not ended are never removed. Argument errors as
        :meth:`prune_events`.
        """
        ...

    async def prune_write_intents(self, *, older_than: timedelta) -> Pruned:
        """Forget the write intents (:meth:`intend_write`) recorded more than
        ``older_than`` ago, in one transaction; returns how many went.

        A step attempt that comes after its intent was forgotten submits without reading
        back first, as its engine decides: keep intents longer than any workflow may sit
        cancelled, suspended or waiting before its steps run again. Argument errors as
        :meth:`prune_events`.
        """
        ...


@runtime_checkable
class JobStore(StoreLifetime, Protocol):
    """Durable jobs: contracts, checkpoints, fenced leases, results, artifacts and
    external writes."""

    # -- jobs -----------------------------------------------------------------

    async def submit_job(self, contract: JobContract) -> Job:
        """Create the job in ``ready`` at checkpoint revision 0 with a free lease
        (token 0). The checkpoint copies the contract's manifest, account alias,
        source view, start cursor and deadline.

        Submitting an equal contract again returns the stored job unchanged;
        a different contract under the same id raises :class:`ContractError`.
        """
        ...

    async def load_job(self, job_id: str) -> Job:
        """The job with its checkpoint and current lease holder.

        Raises :class:`JobNotFound`; :class:`StoreCorrupt` for a malformed row;
        :class:`SchemaVersionError` for a checkpoint of an unknown version.
        """
        ...

    async def load_checkpoint(self, job_id: str) -> Checkpoint:
        """Shortcut for ``(await load_job(job_id)).checkpoint``; same errors."""
        ...

    async def jobs(self, *, states: Iterable[JobState] | None = None) -> list[Job]:
        """Jobs in submission order, optionally only those in ``states``."""
        ...

    # -- leases ---------------------------------------------------------------

    async def claim(self, job_id: str, owner: str, ttl: timedelta) -> Lease:
        """Take the job's lease until ``clock.now() + ttl``.

        Only when the lease is free or expired, whoever held it (the same owner
        included: a restarted worker waits out its old lease or releases it). The
        fencing token is the previous token + 1, so every earlier lease is stale.
        Any state may be claimed (a loop reads the checkpoint and decides; a
        finished job refuses every transition anyway). Raises :class:`JobNotFound`,
        then :class:`LeaseHeldError`.
        """
        ...

    async def claim_next_ready(self, owner: str, ttl: timedelta) -> Lease | None:
        """Claim the oldest job that is ``ready`` (or ``running``/``reconciling`` with
        an expired or free lease: its worker died), or return ``None``.

        Concurrent callers never get the same job (PostgreSQL: ``FOR UPDATE SKIP
        LOCKED``; SQLite: one writer at a time).
        """
        ...

    async def extend(self, lease: Lease, ttl: timedelta) -> Lease:
        """Renew a current lease to ``clock.now() + ttl``; same token.

        Raises :class:`JobNotFound`, then :class:`StaleLeaseError` (replaced or expired).
        """
        ...

    async def release(self, lease: Lease) -> None:
        """Free the lease. An expired lease nobody replaced may still be released.

        Raises :class:`JobNotFound`, then :class:`StaleLeaseError` if another claim
        replaced it.
        """
        ...

    # -- job mutations (all fenced) ------------------------------------------

    async def transition(
        self,
        lease: Lease,
        expected_revision: int,
        state: JobState,
        *,
        pause_reason: str | None = None,
        attempts_used: int | None = None,
        event: Event | None = None,
    ) -> Checkpoint:
        """Move the job to ``state`` and bump the checkpoint revision.

        ``ready → running → ready | awaiting_human | reconciling | done | failed |
        stopped``; terminal states never change. ``awaiting_human`` needs a
        ``pause_reason``; other states clear it unless one is given.
        ``attempts_used`` may grow, never shrink. Appends ``event`` (default kind
        ``job_state_changed``) with job, revision and owner filled in by the store.
        Errors in the shared order; a forbidden move is :class:`InvalidTransition`.
        """
        ...

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
        """Accept one page, in one transaction.

        Checks (in the shared order) the lease, the revision, that the job is
        ``running``, and that an :class:`ArtifactRef` ``artifact`` was written by
        :meth:`put_artifact`. A :class:`PageArtifact` is written (and read back, its
        sha256 checked: :class:`StoreCorrupt`) in this same transaction, after those
        checks: a fenced or failed commit stores no artifact, a crash stores both or
        neither, and the page pays one durable commit instead of two. Then upserts
        ``records`` keyed ``(job_id, source_record_id)`` (a repeat is counted in
        ``already_present`` and the first version is kept), sets ``next_cursor``,
        ``last_committed_step``, the artifact reference and revision + 1, optionally
        moves to ``state`` (e.g. ``done``), and appends ``event`` (default kind
        ``page_committed``; with the store-filled job, revision, owner, step, artifact
        digest and the new/already-present counts, the event log is the job's
        checkpoint history). A crash at any point leaves either the previous
        checkpoint or this one, never a mix: the cursor never runs ahead of durable
        output. Returns only after the commit is durable (fsynced);
        :attr:`CommitResult.artifact` is the reference the checkpoint holds.
        """
        ...

    async def results(self, job_id: str) -> list[StoredResult]:
        """The job's committed results in commit order."""
        ...

    async def count_results(self, job_id: str) -> int:
        """How many results the job has committed."""
        ...

    # -- artifacts ------------------------------------------------------------

    async def put_artifact(self, data: bytes, *, name: str) -> ArtifactRef:
        """Write ``data`` durably, read it back and check its sha256, then return a
        reference :meth:`commit_page` accepts. Raises :class:`StoreCorrupt` if the
        read-back does not match. A page's own artifact is cheaper and never orphaned
        as a :class:`PageArtifact` given to :meth:`commit_page` (one transaction)."""
        ...

    async def read_artifact(self, digest: str) -> bytes:
        """The artifact's bytes. Raises :class:`ArtifactNotFound`, or
        :class:`StoreCorrupt` if they no longer match the digest."""
        ...

    async def collect_unreferenced_artifacts(self, *, older_than: timedelta) -> int:
        """Delete artifacts that no commit ever referenced and that were written
        more than ``older_than`` ago (the grace protects a put awaiting its commit).
        Returns how many were deleted."""
        ...

    # -- external writes ------------------------------------------------------

    async def record_write_intent(
        self, lease: Lease, key: str, intent: Mapping[str, object]
    ) -> ExternalWrite:
        """Record, before acting, that the job will write ``key`` outside the store.

        If ``(job_id, key)`` already exists it is returned unchanged: check its
        ``status`` and never resubmit an ``intent`` or ``unknown`` blindly.
        """
        ...

    async def resolve_write(
        self,
        lease: Lease,
        key: str,
        status: WriteStatus,
        *,
        outcome: Mapping[str, object] | None = None,
    ) -> ExternalWrite:
        """Move an external write ``intent → confirmed | unknown | reconciled`` or
        ``unknown → confirmed | reconciled``. Raises :class:`InvalidTransition` for
        anything else, including a key with no intent."""
        ...

    async def external_writes(self, job_id: str) -> list[ExternalWrite]:
        """The job's external writes, oldest first."""
        ...


@runtime_checkable
class Store(KeeperStateStore, ProfileLeaseStore, EventStore, RetentionStore, JobStore, Protocol):
    """Durable state for the keeper and the job loop. Use as ``async with store:``.

    The union of the capability protocols above: a store for one purpose implements
    only its part (an event sink only :class:`EventStore`; a keeper without jobs
    :class:`KeeperStateStore` and :class:`EventStore`), and is checked against it.
    """
