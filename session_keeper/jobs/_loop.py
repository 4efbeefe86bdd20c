"""JobLoop: the facade that turns restart facts into safe decisions for long jobs.

It owns the configuration and the collaborators and hands each run what it needs:
:class:`~session_keeper.jobs._run.JobRun` works one job under its lease,
:class:`~session_keeper.jobs._pauses.Pauses` answers resume and expiry, and
:class:`~session_keeper.jobs._writes.ExternalWrites` does a step's external writes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Generic

from session_keeper._browser.backend import PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._model.grants import check_name
from session_keeper._telemetry import Telemetry, instruments_for
from session_keeper._util.log_fields import log_fields
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.jobs._context import Step
from session_keeper.jobs._origins import conversation_of
from session_keeper.jobs._outcome import RunOutcome
from session_keeper.jobs._pauses import Pauses
from session_keeper.jobs._run import JobRun
from session_keeper.jobs._settings import LoopSettings, TestingHooks
from session_keeper.jobs._writes import ExternalWrites
from session_keeper.stores import Store
from session_keeper.stores._records import Checkpoint, Job, JobContract, Lease

if TYPE_CHECKING:
    from session_keeper._guard.guard import Guard
    from session_keeper._guard.policy import GuardPolicy


class JobLoop(Generic[PageT]):
    """Runs checkpointed, leased, fenced jobs on a :class:`SessionKeeper` and a Store.

    While a step runs, its lease is extended every ``lease_ttl / 3`` (a fenced
    ``Store.extend``). Failed attempts wait a full-jitter backoff between 0 and
    ``min(backoff_cap, backoff_base * 2**(attempt-1))``. The settings are fixed at
    construction and readable as attributes (durations as :class:`timedelta`). Tests
    replace the random source, the sleeps and crash points through
    :func:`session_keeper.testing.job_loop_testing`, never through this constructor.

    ``telemetry``: where its spans (a run, each step) and metrics go; default the
    keeper's :attr:`SessionKeeper.telemetry`. Raises :class:`InvalidArgument` for a
    non-positive ``lease_ttl``/``backoff_base`` or a negative ``max_recoveries``.
    """

    def __init__(
        self,
        keeper: SessionKeeper[PageT],
        store: Store,
        worker_id: str,
        *,
        lease_ttl: timedelta = timedelta(seconds=60),
        backoff_base: timedelta = timedelta(milliseconds=500),
        backoff_cap: timedelta = timedelta(seconds=30),
        max_recoveries: int = 2,
        pause_ttl: timedelta = timedelta(hours=24),
        guard: Guard | GuardPolicy | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        worker_id = check_name(worker_id, "worker_id")
        if lease_ttl <= timedelta(0) or backoff_base <= timedelta(0) or max_recoveries < 0:
            raise InvalidArgument(
                "lease_ttl and backoff_base must be positive, max_recoveries >= 0"
            )
        self.keeper = keeper
        self.store = store
        self._settings = LoopSettings(
            worker_id=worker_id,
            lease_ttl=lease_ttl,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            max_recoveries=max_recoveries,
            pause_ttl=pause_ttl,
            instruments=instruments_for(telemetry if telemetry is not None else keeper.telemetry),
        )
        self._guard = guard
        self._writes = ExternalWrites(keeper, store)
        self._pauses = Pauses(keeper, store, self._settings)

    # -- settings (read-only) -----------------------------------------------------------
    @property
    def worker_id(self) -> str:
        """The name this loop's leases are held under."""
        return self._settings.worker_id

    @property
    def lease_ttl(self) -> timedelta:
        """How long a lease lasts without an extension."""
        return self._settings.lease_ttl

    @property
    def backoff_base(self) -> timedelta:
        """The first retry's largest backoff; it doubles per failed attempt."""
        return self._settings.backoff_base

    @property
    def backoff_cap(self) -> timedelta:
        """The largest backoff of any retry."""
        return self._settings.backoff_cap

    @property
    def max_recoveries(self) -> int:
        """Changed-page recoveries (and unclassified failures) tolerated before stopping."""
        return self._settings.max_recoveries

    @property
    def pause_ttl(self) -> timedelta:
        """How long a human pause waits before :meth:`expire_pauses` stops the job."""
        return self._settings.pause_ttl

    # -- public -------------------------------------------------------------------------
    async def submit(self, contract: JobContract) -> Job:
        """Store a job contract (idempotent for an equal contract)."""
        return await self.store.submit_job(contract)

    async def run(
        self,
        job_id: str,
        step: Step[PageT],
        *,
        target: Callable[[str | None], str] | None = None,
        expect_identity: Callable[[str | None], str] | None = None,
    ) -> RunOutcome:
        """Work on ``job_id`` until it is done, paused, stopped or deferred.

        ``target(cursor)`` is the URL the step's page must show (opened before each
        step and after a lost tab); ``expect_identity(cursor)`` is the identity the
        step must report for it. Raises :class:`~session_keeper.LeaseHeldError` when
        another worker holds the job, and :class:`~session_keeper.StoreError` when the
        store fails (inside a step too): no attempt is spent and the job stays resumable.
        """
        s = self._settings
        lease = await self.store.claim(job_id, s.worker_id, s.lease_ttl)
        return await self.run_claimed(lease, step, target=target, expect_identity=expect_identity)

    async def run_claimed(
        self,
        lease: Lease,
        step: Step[PageT],
        *,
        target: Callable[[str | None], str] | None = None,
        expect_identity: Callable[[str | None], str] | None = None,
    ) -> RunOutcome:
        """:meth:`run` for a job this worker already claimed (``Store.claim_next_ready``
        hands out one job per worker with ``SKIP LOCKED``); the lease is released at
        the end as :meth:`run` does. Raises :class:`InvalidArgument` when ``lease`` is
        another worker's, and what :meth:`run` raises.
        """
        s = self._settings
        if not isinstance(lease, Lease):
            raise InvalidArgumentType("lease must be a Lease")
        if lease.owner != s.worker_id:
            raise InvalidArgument(f"the lease belongs to {lease.owner!r}, not this worker")
        job_id = lease.job_id
        if self._guard is not None:
            # The contract's origins become the job conversation's network allowlist.
            contract = (await self.store.load_job(job_id)).contract
            if contract.allowed_origins:
                self._guard.allow_origins(conversation_of(contract), contract.allowed_origins)
        run = JobRun(self.keeper, self.store, s, self._writes, lease, step, target, expect_identity)
        with (
            s.instruments.span("session_keeper.job.run") as span,
            log_fields(job__id=job_id, job__lease_owner=s.worker_id),
        ):
            if span.is_recording():
                span.set_attributes(
                    {"session_keeper.job.id": job_id, "session_keeper.job.lease_owner": s.worker_id}
                )
            try:
                outcome = await run.go()
            except Exception:
                # A bug (ours or the step's): do not leave the job locked until the lease
                # expires. A crash (BaseException, SIGKILL) leaves it to expire, as it must.
                await run.lease.release()
                raise
            # Taken over meanwhile: nothing of ours to release.
            await run.lease.release()
            if span.is_recording():
                span.set_attributes(
                    {
                        "session_keeper.job.outcome": outcome.state,
                        "session_keeper.job.pages_committed": outcome.pages_committed,
                        "session_keeper.job.attempt": outcome.attempts_used,
                        "session_keeper.job.revision": outcome.revision,
                        "session_keeper.job.lease_lost": outcome.lease_lost,
                    }
                )
            return outcome

    async def resume(
        self, job_id: str, *, decided_by: str, cancel: bool = False, note: str | None = None
    ) -> Checkpoint:
        """A person hands a paused job back (or cancels it).

        Re-acquires the lease, re-verifies the job's login through the keeper (a
        login still missing keeps the job paused), then moves it to ``ready`` — the
        next ``run()`` re-opens and re-verifies the target page before any step.
        Waiting time is recorded apart from active time. Raises
        :class:`LoginStillMissing` while a job paused for a login has no login to its
        site recorded since the pause, and :class:`InvalidArgument` when the job is not
        awaiting a human.
        """
        check_name(decided_by, "decided_by")
        return await self._pauses.resume(job_id, decided_by=decided_by, cancel=cancel, note=note)

    async def expire_pauses(self) -> list[str]:
        """Stop every paused job whose human pause expired; return their ids.

        Meant for a periodic sweep (next to ``SessionKeeper.sweep``). A job whose
        lease another worker holds is left for a later sweep.
        """
        return await self._pauses.expire()


def testing_hooks(loop: JobLoop[PageT]) -> TestingHooks:
    """``loop``'s testing-mode hooks, for :func:`session_keeper.testing.job_loop_testing`
    to set (a function of the loop's module, not a public member of the loop)."""
    return loop._settings.hooks
