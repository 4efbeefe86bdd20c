"""External writes: intent before submit, outcome after, reconciled by readback, never blind."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import attrs

from session_keeper import (
    Accepted,
    Grant,
    Readback,
    RunOutcome,
    Step,
    StepContext,
    TransientFailure,
)
from session_keeper.testing import FakePage

from .conftest import World, contract, identity, target


@attrs.define
class Refunds:
    """A destination with an idempotency key and a readback, like billing.example's refunds."""

    applied: dict[str, dict[str, object]] = attrs.field(factory=dict)
    submits: int = 0
    #: Apply the write but lose the answer (the connection drops after the server acted).
    lose_answer: bool = False
    readback_blind: bool = False

    async def submit(self, key: str) -> Mapping[str, object]:
        self.submits += 1
        self.applied.setdefault(key, {"refund_id": f"rf-{len(self.applied) + 1}"})
        if self.lose_answer:
            self.lose_answer = False
            raise TransientFailure("connection reset after the request was sent")
        return self.applied[key]

    async def readback(self, key: str) -> Readback:
        if self.readback_blind:
            return Readback(status="unknown")
        if key in self.applied:
            return Readback(status="applied", outcome=self.applied[key])
        return Readback(status="absent")


def refund_step(refunds: Refunds, crash_after_intent: list[bool]) -> Step[FakePage]:
    """A one-page job whose step issues one refund through ctx.write."""

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        key = "refund-INV-1001"

        async def submit() -> Mapping[str, object]:
            if crash_after_intent and crash_after_intent.pop(0):
                raise KeyboardInterrupt  # the controller dies between intent and submit
            return await refunds.submit(key)

        async def readback() -> Readback:
            return await refunds.readback(key)

        outcome = await ctx.write(key, {"invoice": "INV-1001"}, submit, readback)
        return ctx.accept(
            [{"source_record_id": "INV-1001", "refund": str(outcome["refund_id"])}],
            None,
            page_identity="catalogue page 1",
        )

    return step


async def run_refund(world: World, refunds: Refunds, crash: list[bool] | None = None) -> RunOutcome:
    loop = world.loop()
    return await loop.run(
        "audit",
        refund_step(refunds, crash if crash is not None else []),
        target=target,
        expect_identity=identity,
    )


async def test_write_happens_once_and_its_outcome_is_recorded(world: World) -> None:
    """A write is submitted once; its intent and confirmed outcome are in the store."""
    await world.sign_in()
    world.keeper.grant(Grant("job:audit", "catalogue.example", actions={"write"}))
    await world.loop().submit(contract(allowed_actions=("read", "write"), required_fields=()))
    refunds = Refunds()
    out = await run_refund(world, refunds)
    assert out.state == "done", out.reason
    assert refunds.submits == 1
    (write,) = await world.store.external_writes("audit")
    assert (write.status, dict(write.outcome or {})) == ("confirmed", {"refund_id": "rf-1"})


async def test_lost_answer_is_reconciled_by_readback_not_resubmitted(world: World) -> None:
    """The server acted but the answer was lost: readback finds it; no second submit."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    refunds = Refunds(lose_answer=True)
    out = await run_refund(world, refunds)
    assert out.state == "done", out.reason
    assert refunds.submits == 1
    (write,) = await world.store.external_writes("audit")
    assert write.status == "reconciled"


async def test_intent_left_by_a_dead_controller_is_reconciled_on_recovery(world: World) -> None:
    """A crash between intent and submit: the next worker reads back before anything else."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    refunds = Refunds()
    with contextlib.suppress(KeyboardInterrupt):
        await run_refund(world, refunds, crash=[True])
    # The destination says it never happened, but it honours no key: a person decides.
    world.clock.advance(60)  # the dead worker's lease expires
    out = await run_refund(world, refunds)
    assert out.state == "awaiting_human" and refunds.submits == 0
    assert "reconcile" in (out.reason or "")


async def test_unknown_readback_hands_the_write_to_a_person(world: World) -> None:
    """Submit failed and readback cannot tell: reconciling, then the job waits for a person."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    refunds = Refunds(lose_answer=True, readback_blind=True)
    out = await run_refund(world, refunds)
    assert out.state == "awaiting_human" and refunds.submits == 1
    kinds = [e.kind for e in await world.store.events(job_id="audit")]
    assert kinds.index("write_unknown") < kinds.index("human_pause")
    (write,) = await world.store.external_writes("audit")
    assert write.status == "unknown"
