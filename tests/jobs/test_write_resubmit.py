"""An unknown write that a resubmit cannot settle goes to a person."""

from __future__ import annotations

from collections.abc import Mapping

from session_keeper.errors import TransientFailure
from session_keeper.jobs import Accepted, Readback, StepContext
from session_keeper.testing import FakePage

from .conftest import World, contract, identity, target


async def test_an_unknown_write_that_fails_again_after_resubmit_pauses_for_a_person(
    world: World,
) -> None:
    """An unknown write re-submitted after a definite 'absent' and failing again must pause."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    submits: list[int] = []

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        async def submit(page: FakePage) -> Mapping[str, object]:
            submits.append(1)
            raise TransientFailure("connection reset")

        async def readback(page: FakePage) -> Readback:
            return Readback(status="absent")

        await ctx.write("refund-1", {"invoice": "1"}, submit, readback, idempotent=True)
        return ctx.accept([], None, page_identity="catalogue page 1")

    loop = world.loop()
    first = await loop.run("audit", step, target=target, expect_identity=identity)
    assert first.state == "awaiting_human"
    await loop.resume("audit", decided_by="ann")
    second = await loop.run("audit", step, target=target, expect_identity=identity)
    assert second.state == "awaiting_human", (second.state, second.reason)
