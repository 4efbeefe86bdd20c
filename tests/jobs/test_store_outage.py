"""A store outage inside a step (PostgreSQL restarting, a disk filling) is not the step's
failure: the run ends with the store's error and the job stays resumable."""

from __future__ import annotations

from datetime import timedelta

import pytest

from session_keeper.errors import StoreError, UnsavedChanges

from .conftest import FakeCatalogue, World, contract, identity, target


async def test_a_store_outage_during_steps_never_fails_the_job(world: World) -> None:
    """Store errors while stepping spend no attempt and never end the job 'failed'."""
    await world.sign_in()
    await world.loop().submit(contract(max_attempts=2))
    c = FakeCatalogue()
    # What the keeper raises on the turn after its background write hit a dead server,
    # once per failed write while the outage lasts.
    outage = [UnsavedChanges("the keeper's state could not be written (StoreError)")] * 6
    c.raise_next.extend(outage)
    for _ in range(len(outage)):
        with pytest.raises(StoreError):
            await world.loop().run("audit", c.step, target=target, expect_identity=identity)
        cp = await world.store.load_checkpoint("audit")
        assert cp.state not in ("failed", "stopped", "done")
        assert cp.attempts_used == 0
        world.clock.advance(timedelta(seconds=31))  # a lease the failed run kept runs out
    out = await world.loop().run("audit", c.step, target=target, expect_identity=identity)
    assert out.state == "done"
    assert await world.store.count_results("audit") == 15
