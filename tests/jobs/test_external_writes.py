"""External writes: intent before submit, outcome after, reconciled by readback, never blind."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import attrs

from session_keeper import Grant
from session_keeper.errors import TransientFailure
from session_keeper.jobs import Accepted, Readback, RunOutcome, Step, StepContext
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

        async def submit(page: FakePage) -> Mapping[str, object]:
            if crash_after_intent and crash_after_intent.pop(0):
                raise KeyboardInterrupt  # the controller dies between intent and submit
            return await refunds.submit(key)

        async def readback(page: FakePage) -> Readback:
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


FORM = "https://catalogue.example/refunds/new?invoice=INV-1001"
LIST = "https://catalogue.example/refunds?all=1"


async def test_each_write_callable_starts_on_the_writes_own_page(world: World) -> None:
    """A readback that navigated away does not leave submit on that page: both start on url."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    refunds = Refunds()
    seen: list[tuple[str, str]] = []
    crash = [True]

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        key = "refund-INV-1001"
        await ctx.page.goto(FORM)  # the step opens the refund form, then writes

        async def submit(page: FakePage) -> Mapping[str, object]:
            seen.append(("submit", page.url))
            if crash and crash.pop(0):
                raise KeyboardInterrupt  # the controller dies between intent and submit
            return await refunds.submit(key)

        async def readback(page: FakePage) -> Readback:
            seen.append(("readback", page.url))
            await page.goto(LIST)  # reading back means visiting the list of refunds
            return await refunds.readback(key)

        outcome = await ctx.write(key, {"invoice": "INV-1001"}, submit, readback, idempotent=True)
        return ctx.accept(
            [{"source_record_id": "INV-1001", "refund": str(outcome["refund_id"])}],
            None,
            page_identity="catalogue page 1",
        )

    with contextlib.suppress(KeyboardInterrupt):
        await world.loop().run("audit", step, target=target, expect_identity=identity)
    world.clock.advance(60)  # the dead worker's lease expires
    out = await world.loop().run("audit", step, target=target, expect_identity=identity)
    assert out.state == "done", out.reason
    # The intent left by the crash is read back (absent), then submitted once, from the form.
    assert seen == [("submit", FORM), ("readback", FORM), ("submit", FORM)]
    assert refunds.submits == 1


async def test_a_write_starts_on_the_url_it_names(world: World) -> None:
    """With url=, submit starts there even when the step's page shows something else."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    seen: list[str] = []

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        async def submit(page: FakePage) -> Mapping[str, object]:
            seen.append(page.url)
            return {"refund_id": "rf-1"}

        async def readback(page: FakePage) -> Readback:
            raise AssertionError("a fresh intent is submitted without a readback")

        await ctx.write("refund-1", {"invoice": "1"}, submit, readback, url=FORM)
        return ctx.accept([], None, page_identity="catalogue page 1")

    out = await world.loop().run("audit", step, target=target, expect_identity=identity)
    assert out.state == "done", out.reason
    assert seen == [FORM]


async def test_a_playwright_timeout_in_submit_is_read_back_not_a_step_crash(world: World) -> None:
    """Playwright's TimeoutError from submit is an unknown outcome: reconciled by readback."""
    from playwright.async_api import TimeoutError as PlaywrightTimeoutError

    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    refunds = Refunds()

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        async def submit(page: FakePage) -> Mapping[str, object]:
            await refunds.submit("refund-1")  # the server acts, the answer never comes
            raise PlaywrightTimeoutError("Timeout 30000ms exceeded.")

        async def readback(page: FakePage) -> Readback:
            return await refunds.readback("refund-1")

        await ctx.write("refund-1", {"invoice": "1"}, submit, readback)
        return ctx.accept([], None, page_identity="catalogue page 1")

    out = await world.loop().run("audit", step, target=target, expect_identity=identity)
    assert out.state == "done", out.reason
    assert (refunds.submits, out.attempts_used) == (1, 0)
    assert await world.store.events(job_id="audit", kind="step_failed") == []
    (write,) = await world.store.external_writes("audit")
    assert write.status == "reconciled"
