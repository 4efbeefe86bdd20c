"""A controller that loses its lease or dies: budgets still hold, the lease is let go."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest

from session_keeper.errors import LeaseHeldError
from session_keeper.jobs import Accepted, StepContext
from session_keeper.testing import FakePage

from .conftest import FakeCatalogue, World, contract, identity, target


async def test_a_run_that_gives_up_after_repeated_lease_loss_releases_its_lease(
    world: World,
) -> None:
    """After MAX_RECLAIMS the run says it gave the job up, so it must not keep holding it."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()

    async def stalling(ctx: StepContext[FakePage]) -> Accepted:
        world.clock.advance(timedelta(seconds=31))  # longer than the 30 s lease
        return await cat.step(ctx)

    out = await world.loop().run("audit", stalling, target=target, expect_identity=identity)
    assert out.lease_lost and out.state != "done"
    try:
        other = await world.store.claim("audit", "w2", timedelta(seconds=30))
    except LeaseHeldError as exc:  # pragma: no cover - the failure this test shows
        pytest.fail(f"the run gave the job up but still holds its lease: {exc}")
    await world.store.release(other)


async def test_a_step_that_keeps_killing_the_controller_exhausts_the_attempt_budget(
    world: World,
) -> None:
    """Attempts are spent per dispatch: a crash-looping step must not escape max_attempts."""
    await world.sign_in()
    await world.loop().submit(contract(max_attempts=2))
    dispatched: list[int] = []

    async def deadly(ctx: StepContext[FakePage]) -> Accepted:
        dispatched.append(ctx.attempt)
        raise KeyboardInterrupt  # the page takes the controller down (OOM, segfault...)

    for _ in range(4):
        with contextlib.suppress(KeyboardInterrupt):
            await world.loop().run("audit", deadly, target=target, expect_identity=identity)
        world.clock.advance(timedelta(seconds=31))  # the dead controller's lease expires
    assert len(dispatched) <= 2, f"dispatched {len(dispatched)} times with max_attempts=2"


async def test_the_no_progress_limit_is_not_reset_by_a_controller_restart(world: World) -> None:
    """No accepted checkpoint for longer than the limit, across runs: the next run must stop."""
    await world.sign_in()
    await world.loop().submit(contract(no_progress_limit_s=60))
    dispatched: list[int] = []

    async def stuck(ctx: StepContext[FakePage]) -> Accepted:
        dispatched.append(1)
        world.clock.advance(timedelta(seconds=40))  # works a while, accepts nothing...
        raise KeyboardInterrupt  # ...and the controller dies

    for _ in range(4):
        with contextlib.suppress(KeyboardInterrupt):
            await world.loop().run("audit", stuck, target=target, expect_identity=identity)
    assert len(dispatched) <= 2, f"{len(dispatched) * 40}s without progress, limit 60s"
    assert (await world.store.load_checkpoint("audit")).state == "stopped"
