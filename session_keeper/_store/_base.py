"""The public Store methods, shared by both drivers.

A driver supplies :meth:`StoreBase._run` (run one operation from ``_ops`` in one
transaction) plus opening and closing; everything else lives here, so the two
implementations cannot drift apart.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Self, TypeVar

from session_keeper._clock import Clock, SystemClock
from session_keeper._errors import InvalidArgumentType, StoreCorrupt
from session_keeper._store import _ops
from session_keeper._store._events import log_event
from session_keeper._store._records import (
    ArtifactRef,
    Checkpoint,
    CommitResult,
    Event,
    ExternalWrite,
    Job,
    JobContract,
    JobState,
    Lease,
    ResultRecord,
    StoredResult,
    WriteStatus,
)

T = TypeVar("T")

#: Called with a statement label before each statement, before ``COMMIT`` and after
#: it. Tests use it to crash the process at a chosen point; production passes none.
StatementHook = Callable[[str], None]


class StoreBase(abc.ABC):
    """Shared implementation of :class:`~session_keeper.Store` over ``_ops``."""

    def __init__(self, *, clock: Clock | None) -> None:
        if clock is not None and not isinstance(clock, Clock):
            raise InvalidArgumentType("clock must implement the Clock protocol")
        self._clock: Clock = clock if clock is not None else SystemClock()

    @property
    def clock(self) -> Clock:
        """The clock lease expiry and timestamps are read from."""
        return self._clock

    @abc.abstractmethod
    async def _run(self, op: Callable[[], _ops.Op[T]], *, write: bool) -> T:
        """Run ``op()`` in one transaction (retrying it whole on lock contention)."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect and migrate."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Disconnect."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- keeper state

    async def load_keeper_state(self, keeper_id: str) -> dict[str, object] | None:
        """See :meth:`Store.load_keeper_state`."""
        return await self._run(lambda: _ops.load_keeper_state(keeper_id), write=False)

    async def save_keeper_state(self, keeper_id: str, state: Mapping[str, object]) -> None:
        """See :meth:`Store.save_keeper_state`."""
        await self._run(lambda: _ops.save_keeper_state(keeper_id, state, self._clock), write=True)

    async def keeper_ids(self) -> list[str]:
        """See :meth:`Store.keeper_ids`."""
        return await self._run(_ops.keeper_ids, write=False)

    # -- events

    async def append_event(self, event: Event) -> None:
        """See :meth:`Store.append_event`."""
        stored = await self._run(lambda: _ops.append_event(event), write=True)
        log_event(stored)

    async def events(
        self,
        *,
        job_id: str | None = None,
        since_id: int | None = None,
        kind: str | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[Event]:
        """See :meth:`Store.events`."""
        return await self._run(
            lambda: _ops.events(job_id, since_id, kind, limit, newest_first), write=False
        )

    # -- jobs

    async def submit_job(self, contract: JobContract) -> Job:
        """See :meth:`Store.submit_job`."""
        job, event = await self._run(lambda: _ops.submit_job(contract, self._clock), write=True)
        if event is not None:
            log_event(event)
        return job

    async def load_job(self, job_id: str) -> Job:
        """See :meth:`Store.load_job`."""
        return await self._run(lambda: _ops.load_job(job_id), write=False)

    async def load_checkpoint(self, job_id: str) -> Checkpoint:
        """See :meth:`Store.load_checkpoint`."""
        return (await self.load_job(job_id)).checkpoint

    async def jobs(self, *, states: Iterable[JobState] | None = None) -> list[Job]:
        """See :meth:`Store.jobs`."""
        wanted = None if states is None else tuple(states)
        return await self._run(lambda: _ops.list_jobs(wanted), write=False)

    # -- leases

    async def claim(self, job_id: str, owner: str, ttl: timedelta) -> Lease:
        """See :meth:`Store.claim`."""
        lease, event = await self._run(
            lambda: _ops.claim(job_id, owner, ttl, self._clock), write=True
        )
        log_event(event)
        return lease

    async def claim_next_ready(self, owner: str, ttl: timedelta) -> Lease | None:
        """See :meth:`Store.claim_next_ready`."""
        got = await self._run(lambda: _ops.claim_next_ready(owner, ttl, self._clock), write=True)
        if got is None:
            return None
        lease, event = got
        log_event(event)
        return lease

    async def extend(self, lease: Lease, ttl: timedelta) -> Lease:
        """See :meth:`Store.extend`."""
        return await self._run(lambda: _ops.extend(lease, ttl, self._clock), write=True)

    async def release(self, lease: Lease) -> None:
        """See :meth:`Store.release`."""
        event = await self._run(lambda: _ops.release(lease, self._clock), write=True)
        log_event(event)

    # -- job mutations

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
        """See :meth:`Store.transition`."""
        checkpoint, logged = await self._run(
            lambda: _ops.transition(
                lease, expected_revision, state, pause_reason, attempts_used, event, self._clock
            ),
            write=True,
        )
        log_event(logged)
        return checkpoint

    async def commit_page(
        self,
        lease: Lease,
        expected_revision: int,
        records: Sequence[ResultRecord],
        next_cursor: str | None,
        step: str,
        *,
        artifact: ArtifactRef | None = None,
        event: Event | None = None,
        attempts_used: int | None = None,
        state: JobState | None = None,
    ) -> CommitResult:
        """See :meth:`Store.commit_page`."""
        # Checked and serialised here, on the caller's thread: the database thread
        # (and its write lock) only runs SQL, while the next page is being encoded.
        page = _ops.prepare_page(
            lease, expected_revision, records, next_cursor, step, artifact, attempts_used, state
        )
        result, logged = await self._run(
            lambda: _ops.commit_page(page, event, self._clock), write=True
        )
        log_event(logged)
        return result

    async def results(self, job_id: str) -> list[StoredResult]:
        """See :meth:`Store.results`."""
        return await self._run(lambda: _ops.results(job_id), write=False)

    async def count_results(self, job_id: str) -> int:
        """See :meth:`Store.count_results`."""
        return await self._run(lambda: _ops.count_results(job_id), write=False)

    # -- artifacts

    async def put_artifact(self, data: bytes, *, name: str) -> ArtifactRef:
        """See :meth:`Store.put_artifact`."""
        ref_name = _ops._check_str(name, "name")
        digest = await self._run(lambda: _ops.write_artifact(data, self._clock), write=True)
        # Verified in a separate, later transaction: what we read back is what was
        # committed, not what is still sitting in this transaction's buffers.
        stored = await self._run(lambda: _ops.read_artifact(digest), write=False)
        if _ops.digest_of(stored) != digest or len(stored) != len(data):
            raise StoreCorrupt(f"artifact {digest} read back differently")
        return ArtifactRef(name=ref_name, digest=digest, size=len(stored))

    async def read_artifact(self, digest: str) -> bytes:
        """See :meth:`Store.read_artifact`."""
        return await self._run(lambda: _ops.read_artifact(digest), write=False)

    async def collect_unreferenced_artifacts(self, *, older_than: timedelta) -> int:
        """See :meth:`Store.collect_unreferenced_artifacts`."""
        collected = await self._run(
            lambda: _ops.collect_unreferenced_artifacts(older_than, self._clock), write=True
        )
        return len(collected)

    # -- external writes

    async def record_write_intent(
        self, lease: Lease, key: str, intent: Mapping[str, object]
    ) -> ExternalWrite:
        """See :meth:`Store.record_write_intent`."""
        write, event = await self._run(
            lambda: _ops.record_write_intent(lease, key, intent, self._clock), write=True
        )
        if event is not None:
            log_event(event)
        return write

    async def resolve_write(
        self,
        lease: Lease,
        key: str,
        status: WriteStatus,
        *,
        outcome: Mapping[str, object] | None = None,
    ) -> ExternalWrite:
        """See :meth:`Store.resolve_write`."""
        write, event = await self._run(
            lambda: _ops.resolve_write(lease, key, status, outcome, self._clock), write=True
        )
        log_event(event)
        return write

    async def external_writes(self, job_id: str) -> list[ExternalWrite]:
        """See :meth:`Store.external_writes`."""
        return await self._run(lambda: _ops.external_writes(job_id), write=False)
