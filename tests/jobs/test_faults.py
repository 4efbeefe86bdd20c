"""The seed's fault-injection matrix, ten trials per fault, on the fake world.

Every trial ends with an independent validation against the catalogue's ground truth:
0 lost, 0 duplicated, 0 false completions, and the expected final state.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from session_keeper import Accepted, BrowserGoneError, LoginRequired, RunOutcome, StepContext
from session_keeper.testing import FakePage

from .conftest import PAGES, PER_PAGE, FakeCatalogue, World, contract, identity, target, truth

TRIALS = 10


class ControllerCrash(BaseException):
    """The controller process dies here: nothing after this line runs, no lease is released."""


@attrs.frozen
class Verdict:
    """What an independent validator says about the stored results."""

    lost: int
    duplicated: int
    false_completion: bool
    state: str


async def validate(world: World, outcome_state: str) -> Verdict:
    """Compare the stored results with the ground truth, independently of the loop."""
    stored = await world.store.results("audit")
    ids = [r.source_record_id for r in stored]
    expected = truth()
    committed_pages = {expected[i]["page"] for i in ids}
    # Only whole committed pages count: every record of a committed page must be there.
    should_have = {rid for rid, d in expected.items() if d["page"] in committed_pages}
    lost = len(should_have - set(ids))
    if outcome_state == "done":
        lost = len(set(expected) - set(ids))
    for r in stored:
        assert dict(r.data) == {k: v for k, v in expected[r.source_record_id].items()}
    cp = await world.store.load_checkpoint("audit")
    return Verdict(
        lost=lost,
        duplicated=len(ids) - len(set(ids)),
        false_completion=cp.state == "done" and set(ids) != set(expected),
        state=cp.state,
    )


def page_of(trial: int) -> int:
    """Which page a trial injects its fault at: spread over the job."""
    return trial % (PAGES - 1) + 1


async def run(world: World, cat: FakeCatalogue, worker: str, **kw: Any) -> RunOutcome:
    """One run of the audit job by ``worker``."""
    return await world.loop(worker, **kw).run(
        "audit", cat.step, target=target, expect_identity=identity
    )


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_controller_stops_after_extraction_before_commit(world: World, trial: int) -> None:
    """Old checkpoint remains; the page is repeated without losing or duplicating records."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()
    at = page_of(trial)

    async def crash() -> None:
        if cat.calls == at:
            raise ControllerCrash

    with pytest.raises(ControllerCrash):
        await run(world, cat, "w1", fault_hooks={"after_extract": crash})
    cp = await world.store.load_checkpoint("audit")
    assert cp.next_cursor == (f"page-{at}" if at > 1 else "page-1")
    world.clock.advance(timedelta(seconds=31))  # the dead controller's lease expires
    out = await run(world, cat, "w2")
    v = await validate(world, out.state)
    assert (v.lost, v.duplicated, v.false_completion, v.state) == (0, 0, False, "done")
    assert out.repeated_records == 0


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_commit_succeeds_but_the_acknowledgement_is_lost(world: World, trial: int) -> None:
    """Reload finds the committed revision; the cursor is not rolled back; nothing repeats."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()
    at = page_of(trial)

    async def lose_ack() -> None:
        if cat.calls == at:
            raise ControllerCrash

    with pytest.raises(ControllerCrash):
        await run(world, cat, "w1", fault_hooks={"after_commit": lose_ack})
    cp = await world.store.load_checkpoint("audit")
    assert cp.last_committed_step == f"page-{at}" and cp.next_cursor == f"page-{at + 1}"
    assert await world.store.count_results("audit") == at * PER_PAGE
    world.clock.advance(timedelta(seconds=31))
    out = await run(world, cat, "w2")
    v = await validate(world, out.state)
    assert (v.lost, v.duplicated, v.false_completion, v.state) == (0, 0, False, "done")
    assert cat.calls == PAGES  # no page was extracted twice


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_unexpected_navigation_during_the_next_step(world: World, trial: int) -> None:
    """Fresh observation detects the wrong page and returns only to the verified target."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()
    at = page_of(trial)
    wander = [
        "https://catalogue.example/items?page=99",
        "https://docs.example/elsewhere?page=1",
    ][trial % 2]

    async def wander_next() -> None:
        if cat.calls == at:
            cat.wander_next, cat.wander_to = 1, wander

    out = await run(world, cat, "w1", fault_hooks={"after_commit": wander_next})
    v = await validate(world, out.state)
    assert (v.lost, v.duplicated, v.false_completion, v.state) == (0, 0, False, "done")
    failures = await world.store.events(job_id="audit", kind="step_failed")
    assert [e.failure_class for e in failures] == ["changed_page"]
    committed = await world.store.events(job_id="audit", kind="page_committed")
    assert [e.page_identity for e in committed] == [identity(f"page-{n}") for n in range(1, 6)]


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_login_expires_and_a_human_takes_over(world: World, trial: int) -> None:
    """The job pauses, dispatches nothing while paused, and revalidates after an explicit resume."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    cat = FakeCatalogue()
    at = page_of(trial)

    async def expire() -> None:
        if cat.calls == at:
            cat.raise_next.append(LoginRequired("the site shows its sign-in page"))

    out = await run(world, cat, "w1", fault_hooks={"after_commit": expire})
    assert out.state == "awaiting_human" and out.next_cursor == f"page-{at + 1}"
    calls, launches = cat.calls, world.backend.launches
    assert (await run(world, cat, "w1")).state == "awaiting_human"
    assert (cat.calls, world.backend.launches) == (calls, launches)  # nothing dispatched
    world.clock.advance(timedelta(minutes=trial + 1))
    await world.sign_in()  # the human signs in again
    assert (await loop.resume("audit", decided_by="operator")).state == "ready"
    out = await run(world, cat, "w1")
    v = await validate(world, out.state)
    assert (v.lost, v.duplicated, v.false_completion, v.state) == (0, 0, False, "done")


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_budget_expires_with_partial_work_and_a_resume_point(
    world: World, trial: int
) -> None:
    """Stopped with partial accepted artifacts and an accurate resume point, never done."""
    await world.sign_in()
    deadline = world.clock.now() + timedelta(minutes=10)
    await world.loop().submit(
        contract(deadline_at=deadline) if trial % 2 else contract(no_progress_limit_s=60.0)
    )
    cat = FakeCatalogue()
    at = page_of(trial)

    async def stall() -> None:
        if cat.calls == at:
            world.clock.advance(timedelta(minutes=11))

    out = await run(world, cat, "w1", fault_hooks={"after_commit": stall})
    assert out.state == "stopped" and out.next_cursor == f"page-{at + 1}"
    assert f"page-{at + 1}" in (out.reason or "")
    v = await validate(world, out.state)
    assert (v.lost, v.duplicated, v.false_completion) == (0, 0, False)
    assert await world.store.count_results("audit") == at * PER_PAGE
    cp = await world.store.load_checkpoint("audit")
    assert cp.accepted_artifact is not None and cp.artifact_digest is not None


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_browser_dies_mid_step(world: World, trial: int) -> None:
    """A browser crash inside a step: the login is gone, so the job pauses; resumed, it finishes."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    cat = FakeCatalogue()
    at = page_of(trial) + 1
    original = cat.step

    async def step_with_crash(ctx: StepContext[FakePage]) -> Accepted:
        if cat.calls + 1 == at and world.backend.launches == 1:
            await world.backend.crash()
            await ctx.page.goto(target(ctx.cursor))  # raises: the browser is gone
        return await original(ctx)

    with pytest.raises(BrowserGoneError):
        await step_with_crash_probe()
    out = await world.loop("w1").run(
        "audit", step_with_crash, target=target, expect_identity=identity
    )
    assert out.state == "awaiting_human" and "catalogue.example" in (out.reason or "")
    await world.sign_in()
    await loop.resume("audit", decided_by="operator")
    out = await world.loop("w1").run(
        "audit", step_with_crash, target=target, expect_identity=identity
    )
    v = await validate(world, out.state)
    assert (v.lost, v.duplicated, v.false_completion, v.state) == (0, 0, False, "done")


async def step_with_crash_probe() -> None:
    """A page of a dead fake browser raises BrowserGoneError, as the loop expects."""
    from session_keeper.testing import FakeBackend

    backend = FakeBackend()
    session = await backend.launch()
    page = await session.open_page("c")
    await backend.crash()
    await page.goto("https://x.example/")


@pytest.mark.parametrize("trial", range(TRIALS))
async def test_expired_lease_holder_cannot_commit_after_a_takeover(
    world: World, trial: int
) -> None:
    """A worker whose lease expired is fenced off; the replacement's work stands alone."""
    await world.sign_in()
    await world.loop().submit(contract())
    slow, fast = FakeCatalogue(), FakeCatalogue()
    at = page_of(trial)
    takeover: list[RunOutcome] = []

    async def stall_then_let_w2_take_over() -> None:
        if slow.calls == at and not takeover:
            world.clock.advance(timedelta(seconds=31))  # w1's lease runs out mid-step
            takeover.append(await run(world, fast, "w2"))

    out = await run(world, slow, "w1", fault_hooks={"after_extract": stall_then_let_w2_take_over})
    assert out.lease_lost and out.pages_committed == at - 1
    assert takeover[0].state == "done"
    v = await validate(world, "done")
    assert (v.lost, v.duplicated, v.false_completion, v.state) == (0, 0, False, "done")
    assert await world.store.count_results("audit") == PAGES * PER_PAGE
