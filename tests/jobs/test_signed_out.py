"""A job that finds its site signed out tells the keeper and waits for a new login (issue 9)."""

from __future__ import annotations

from typing import Any

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.errors import LoginStillMissing, PageChanged, SignedOut
from session_keeper.jobs import Accepted, JobLoop, RunOutcome, Step, StepContext
from session_keeper.testing import FakePage, job_loop_testing

from .conftest import SITE, FakeCatalogue, World, contract, identity, target, truth

LOGIN_URL = f"https://{SITE}/login*"


async def run(world: World, step: Step[FakePage], **kw: Any) -> RunOutcome:
    """Run the audit job once with ``step``."""
    return await world.loop(**kw).run("audit", step, target=target, expect_identity=identity)


async def test_a_step_that_finds_the_site_signed_out_reports_it_and_pauses(world: World) -> None:
    """SignedOut from a step: awaiting_human, and the keeper's login is lost for everyone."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(raise_next=[SignedOut("the catalogue shows its sign-in form")])
    out = await run(world, cat.step)
    assert out.state == "awaiting_human"
    assert [(x.name, x.cause) for x in world.keeper.lost_logins()] == [(SITE, "signed_out")]
    assert world.keeper.decide("job:audit", SITE, "read", assumes_login=True).outcome != "act"
    pause = (await world.store.events(job_id="audit", kind="human_pause"))[-1]
    assert pause.data["login_site"] == SITE
    turn = await world.keeper.ensure("job:audit")
    assert [(str(x), x.cause) for x in turn.lost] == [(f"login:{SITE}", "signed_out")]


async def test_resume_of_a_job_paused_for_a_login_waits_for_a_login_recorded_after_it(
    world: World,
) -> None:
    """resume() refuses (typed, nothing written) until record_login; then the job finishes."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    cat = FakeCatalogue()

    async def expire_after_two() -> None:
        if cat.calls == 2:
            cat.raise_next.append(SignedOut("session expired on the server"))

    out = await run(world, cat.step, fault_hooks={"after_commit": expire_after_two})
    assert out.state == "awaiting_human"
    before_cp = await world.store.load_checkpoint("audit")
    before_events = len(await world.store.events(job_id="audit"))
    with pytest.raises(LoginStillMissing, match=SITE):
        await loop.resume("audit", decided_by="ann")
    assert await world.store.load_checkpoint("audit") == before_cp
    assert len(await world.store.events(job_id="audit")) == before_events
    assert (await run(world, cat.step)).state == "awaiting_human"
    await world.sign_in()  # the human signs in again
    assert (await loop.resume("audit", decided_by="ann")).state == "ready"
    done = await run(world, cat.step)
    assert done.state == "done"
    stored = await world.store.results("audit")
    assert sorted(r.source_record_id for r in stored) == sorted(truth())


async def test_landing_on_the_contracts_login_url_pauses_for_a_person(world: World) -> None:
    """A step that lands on the sign-in page: awaiting_human (reported), not PageChanged→stopped."""

    async def lands_on_login(ctx: StepContext[FakePage]) -> Accepted:
        await ctx.page.goto(f"https://{SITE}/login?next=/items")
        raise PageChanged("no rows on this page")

    await world.sign_in()
    await world.loop().submit(contract(job_id="audit", login_url=LOGIN_URL))
    out = await run(world, lands_on_login)
    assert out.state == "awaiting_human"
    assert "signed the job out" in (out.reason or "")
    assert [(x.name, x.cause) for x in world.keeper.lost_logins()] == [(SITE, "signed_out")]


async def test_a_step_that_ends_on_the_login_url_commits_nothing(world: World) -> None:
    """Even a step that returns records from the sign-in page is not accepted: it pauses."""

    async def accepts_from_login(ctx: StepContext[FakePage]) -> Accepted:
        await ctx.page.goto(f"https://{SITE}/login")
        return ctx.accept([], "page-2", page_identity=identity(ctx.cursor))

    await world.sign_in()
    await world.loop().submit(contract(login_url=LOGIN_URL))
    out = await run(world, accepts_from_login)
    assert out.state == "awaiting_human"
    assert out.pages_committed == 0
    assert await world.store.events(job_id="audit", kind="page_committed") == []


async def test_a_failed_step_the_sites_probe_explains_is_a_sign_out(world: World) -> None:
    """PageChanged, and the keeper's probe sees nobody signed in: pause and report, not stop."""
    seen: list[str | None] = ["reader"]

    async def probe(page: FakePage) -> str | None:
        return seen[0]

    keeper = SessionKeeper(
        world.backend,
        clock=world.clock,
        durability=Durability(store=world.store, keeper_id="probed"),
        grants=[Grant("job:audit", SITE, actions={"read"})],
        login_settings=LoginSettings(probes={SITE: probe}),
    )

    async def rows_vanished(ctx: StepContext[FakePage]) -> Accepted:
        seen[0] = None  # the server forgot the session: the page shows no rows
        raise PageChanged("no rows on the page")

    async with keeper:
        await keeper.ensure("job:audit")
        await world.backend.sign_in(SITE)
        await keeper.record_login("job:audit", SITE, account="reader")
        loop = JobLoop(keeper, world.store, "w1")
        job_loop_testing(loop, sleep=world.sleep)
        await loop.submit(contract())
        out = await loop.run("audit", rows_vanished, target=target, expect_identity=identity)
        assert out.state == "awaiting_human"
        assert [(x.name, x.cause) for x in keeper.lost_logins()] == [(SITE, "signed_out")]
        with pytest.raises(LoginStillMissing):
            await loop.resume("audit", decided_by="ann")
