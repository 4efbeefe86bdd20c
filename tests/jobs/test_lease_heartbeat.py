"""The lease heartbeat: a long step keeps its lease; a lost lease abandons the step safely."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from session_keeper.jobs import Accepted, RunOutcome, StepContext
from session_keeper.jobs._outcome import RUN_STATES
from session_keeper.testing import FakePage

from .conftest import PAGES, PER_PAGE, FakeCatalogue, World, contract, identity, target

TTL = timedelta(seconds=30)


async def test_a_step_longer_than_the_lease_keeps_its_lease_and_commits_once(world: World) -> None:
    """A healthy worker's 100 s step under a 30 s lease is never fenced off nor repeated."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()

    async def slow_step(ctx: StepContext[FakePage]) -> Accepted:
        if ctx.cursor == "page-2":
            await world.timers.advance(100)  # more than three lease lifetimes
        return await cat.step(ctx)

    loop = world.loop(lease_ttl=TTL)
    out = await loop.run("audit", slow_step, target=target, expect_identity=identity)
    assert (out.state, out.lease_lost, out.attempts_used) == ("done", False, 0)
    assert cat.calls == PAGES  # no step ran twice
    assert await world.store.events(job_id="audit", kind="lease_lost") == []
    commits = await world.store.events(job_id="audit", kind="page_committed")
    assert [e.step for e in commits] == [f"page-{n}" for n in range(1, PAGES + 1)]
    assert world.timers.fired >= 100 // 10  # a beat every ttl/3 = 10 s


async def test_a_heartbeat_that_finds_the_lease_lost_abandons_the_step(world: World) -> None:
    """A stalled worker whose lease was taken over: its step is cancelled, nothing committed."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()
    cancelled: list[str | None] = []

    async def stalls_on_page_3(ctx: StepContext[FakePage]) -> Accepted:
        if ctx.cursor == "page-3":
            world.timers.frozen = True  # the process stalls: no heartbeat fires
            await world.timers.advance(31)  # ... past the lease
            await world.store.claim("audit", "w2", TTL)  # another worker takes the job
            world.timers.frozen = False
            try:
                await world.timers.advance(30)  # the next beat finds the lease gone
            except asyncio.CancelledError:
                cancelled.append(ctx.cursor)
                raise
            raise AssertionError("the step went on after its lease was lost")
        return await cat.step(ctx)

    out = await world.loop(lease_ttl=TTL).run(
        "audit", stalls_on_page_3, target=target, expect_identity=identity
    )
    assert cancelled == ["page-3"]
    assert out.lease_lost and out.state == "ready" and out.state in RUN_STATES
    assert out.pages_committed == 2 and await world.store.count_results("audit") == 2 * PER_PAGE
    cp = await world.store.load_checkpoint("audit")
    assert cp.next_cursor == "page-3"  # w1 wrote nothing after the takeover
    (lost,) = await world.store.events(job_id="audit", kind="lease_lost")
    assert "StaleLeaseError" in str(lost.data["error"])
    job = await world.store.load_job("audit")
    assert job.lease is not None and job.lease.owner == "w2"


async def test_a_run_whose_lease_keeps_expiring_ends_ready_with_every_cause_recorded(
    world: World,
) -> None:
    """Never ``running``: a run that cannot keep its lease gives the job back as ready, and
    the events name the step error each lost lease interrupted."""
    await world.sign_in()
    await world.loop().submit(contract())
    world.timers.frozen = True  # the heartbeat never gets to run

    async def slow_and_broken(ctx: StepContext[FakePage]) -> Accepted:
        await world.timers.advance(31)
        raise KeyError("surprise")

    out: RunOutcome = await world.loop(lease_ttl=TTL).run(
        "audit", slow_and_broken, target=target, expect_identity=identity
    )
    assert out.state == "ready" and out.lease_lost and "giving the job up" in (out.reason or "")
    cp = await world.store.load_checkpoint("audit")
    assert cp.state == "ready"
    lost = await world.store.events(job_id="audit", kind="lease_lost")
    assert len(lost) == 4 and all(e.data["cause"] == "KeyError: 'surprise'" for e in lost)
    assert all("StaleLeaseError" in str(e.data["error"]) for e in lost)
    job = await world.store.load_job("audit")
    assert job.lease is None  # released, not held until it expires
