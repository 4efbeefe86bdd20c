"""PoolJobLoop on one machine (SQLite, fake browsers): the edges of claiming a job for
a profile — nothing to claim, a profile held elsewhere, another worker's lease."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper import SessionKeeper
from session_keeper.errors import InvalidArgument, ProfileHeld
from session_keeper.jobs import JobContract, JobLoop, PoolJobLoop
from session_keeper.pool import KeeperPool, SiteRouting
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

from .conftest import FakeCatalogue, target

TTL = timedelta(seconds=30)


def pool_for(store: SqliteStore, clock: FakeClock, owner: str) -> KeeperPool[FakePage]:
    """A pool with one profile, p0, for account acct."""
    return KeeperPool(
        {"p0": FakeBackend(clock=clock)},
        store=store,
        owner=owner,
        policy=SiteRouting(accounts={"acct": "p0"}),
        max_open=1,
        lease_ttl=TTL,
        clock=clock,
    )


async def test_a_job_whose_profile_is_held_elsewhere_is_given_back_untouched(
    tmp_path: Path,
) -> None:
    """run_next() with the job's profile leased by another pool raises ProfileHeld, and
    the job is ready and unleased again (its checkpoint unchanged); with nothing
    claimable it returns None."""
    clock = FakeClock()
    async with (
        SqliteStore(tmp_path / "s.db", clock=clock) as store,
        pool_for(store, clock, "machine-a") as a,
        pool_for(store, clock, "machine-b") as b,
    ):
        worker = PoolJobLoop(b, store, "worker-b", lease_ttl=TTL)
        assert await worker.run_next(FakeCatalogue().step, target=target) is None
        await store.submit_job(JobContract(job_id="j", account_alias="acct", start_cursor="page-1"))
        before = (await store.load_job("j")).checkpoint
        await a.ensure("someone", account="acct")  # machine-a holds p0
        with pytest.raises(ProfileHeld):
            await worker.run_next(FakeCatalogue().step, target=target)
        job = await store.load_job("j")
        assert job.lease is None and job.checkpoint == before
        assert await a.close_profile("p0")
        outcome = await worker.run_next(FakeCatalogue().step, target=target)
        assert outcome is not None and outcome.state == "done"
        assert b.stats().open_profiles == ()  # given back after the job
        assert await store.profile_lease("p0") is None


async def test_run_claimed_refuses_another_workers_lease(tmp_path: Path) -> None:
    """JobLoop.run_claimed() with a lease this worker does not own: InvalidArgument, and
    the job is left as it was."""
    clock = FakeClock()
    async with (
        SqliteStore(tmp_path / "s.db", clock=clock) as store,
        SessionKeeper(FakeBackend(clock=clock), clock=clock) as keeper,
    ):
        await store.submit_job(JobContract(job_id="j", start_cursor="page-1"))
        lease = await store.claim("j", "someone-else", TTL)
        loop = JobLoop(keeper, store, "me")
        with pytest.raises(InvalidArgument, match="someone-else"):
            await loop.run_claimed(lease, FakeCatalogue().step, target=target)
        assert (await store.load_job("j")).lease == lease
