"""PoolJobLoop: job workers on many machines, each over its own pool of profiles.

Each worker claims the next job with ``Store.claim_next_ready`` (``FOR UPDATE SKIP
LOCKED`` on PostgreSQL: concurrent workers get different jobs), routes the job's
conversation to a profile of its own :class:`~session_keeper.KeeperPool` (by the
contract's site and account alias), and runs it there with a :class:`JobLoop` under
the profile's lease, so two workers never drive one profile. A job whose profile
another worker holds is given back at once, untouched, for a later claim.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic

from session_keeper._browser.backend import PageT
from session_keeper._model.events import EventKind
from session_keeper._model.grants import check_name
from session_keeper.errors import InvalidArgument
from session_keeper.jobs._context import Step
from session_keeper.jobs._loop import JobLoop
from session_keeper.jobs._origins import conversation_of
from session_keeper.jobs._outcome import RunOutcome
from session_keeper.stores import Event, Store

if TYPE_CHECKING:
    from session_keeper.pool._pool import KeeperPool

#: Logged when a worker starts a job on a profile (``data["profile"]``, ``data["token"]``).
JOB_ON_PROFILE: EventKind = "job_on_profile"


class PoolJobLoop(Generic[PageT]):
    """Claims and runs jobs on the profiles of ``pool`` (see the module).

    ``loop_options`` are :class:`JobLoop`'s keyword arguments (``backoff_base``,
    ``max_recoveries``, ``guard``...). With ``release_profile_after_job`` (default) the
    profile is closed and its lease given back after each job, so the next job for
    that profile may go to any worker.

    Raises :class:`InvalidArgument` for a non-positive ``lease_ttl``.
    """

    def __init__(
        self,
        pool: KeeperPool[PageT],
        store: Store,
        worker_id: str,
        *,
        lease_ttl: timedelta = timedelta(seconds=60),
        release_profile_after_job: bool = True,
        **loop_options: Any,
    ) -> None:
        self._pool = pool
        self._store = store
        self._worker_id = check_name(worker_id, "worker_id")
        if lease_ttl <= timedelta(0):
            raise InvalidArgument("lease_ttl must be positive")
        self._lease_ttl = lease_ttl
        self._release = bool(release_profile_after_job)
        self._loop_options = loop_options

    @property
    def worker_id(self) -> str:
        """The name this worker's job leases are held under."""
        return self._worker_id

    async def run_next(
        self,
        step: Step[PageT],
        *,
        target: Callable[[str | None], str] | None = None,
        expect_identity: Callable[[str | None], str] | None = None,
    ) -> RunOutcome | None:
        """Claim the next claimable job and run it on its profile; ``None`` when no job
        is claimable.

        Raises :class:`~session_keeper.ProfileHeld` (the job given back, unchanged)
        when another holder leases the job's profile: wait a little and call again.
        Otherwise raises what :meth:`JobLoop.run` raises.
        """
        lease = await self._store.claim_next_ready(self._worker_id, self._lease_ttl)
        if lease is None:
            return None
        started = False
        try:
            contract = (await self._store.load_job(lease.job_id)).contract
            conversation = conversation_of(contract)
            async with self._pool.hold(
                conversation, site=contract.site, account=contract.account_alias
            ) as keeper:
                profile = self._pool.profile_of(conversation)
                held = await self._store.profile_lease(profile) if profile else None
                await self._store.append_event(
                    Event(
                        kind=JOB_ON_PROFILE,
                        at=keeper.clock.now(),
                        job_id=lease.job_id,
                        lease_owner=self._worker_id,
                        data={
                            "profile": profile,
                            "profile_owner": held.owner if held else None,
                            "token": held.token if held else None,
                        },
                    )
                )
                loop = JobLoop(
                    keeper,
                    self._store,
                    self._worker_id,
                    lease_ttl=self._lease_ttl,
                    **self._loop_options,
                )
                started = True  # from here on the run releases the lease itself
                outcome = await loop.run_claimed(
                    lease, step, target=target, expect_identity=expect_identity
                )
        except Exception:
            if not started:
                # Nothing ran (its profile is held elsewhere, or could not be opened):
                # give the job back now rather than leave it locked until expiry.
                await self._store.release(lease)
            raise
        if self._release and profile is not None:
            await self._pool.close_profile(profile)
        return outcome
