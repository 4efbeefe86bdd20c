"""JobLoop on the fake world: commits, restart facts, failure classes, budgets, pauses."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from session_keeper.errors import (
    Denied,
    LeaseHeldError,
    LoginRequired,
    LoginStillMissing,
    NavigationBlocked,
    PageChanged,
    RateLimited,
    TransientFailure,
)
from session_keeper.jobs import RunOutcome
from session_keeper.security import BlockRecord
from session_keeper.testing import watch_store_statements
from tests.store._helpers import stored_artifacts

from .conftest import PAGES, PER_PAGE, FakeCatalogue, World, contract, identity, target, truth


async def run(world: World, cat: FakeCatalogue, worker: str = "w1", **kw: Any) -> RunOutcome:
    """Run the audit job once with the fake catalogue."""
    return await world.loop(worker, **kw).run(
        "audit", cat.step, target=target, expect_identity=identity
    )


async def test_job_runs_to_done_with_every_record_once(world: World) -> None:
    """A clean run commits each page once, in order, and ends done with all records."""
    await world.sign_in()
    await world.loop().submit(contract())
    out = await run(world, FakeCatalogue())
    assert (out.state, out.pages_committed, out.new_records) == ("done", PAGES, PAGES * PER_PAGE)
    stored = await world.store.results("audit")
    assert sorted(r.source_record_id for r in stored) == sorted(truth())
    cp = await world.store.load_checkpoint("audit")
    assert cp.state == "done" and cp.next_cursor is None and cp.last_committed_step == "page-5"


async def test_every_commit_event_carries_the_observability_fields(world: World) -> None:
    """page_committed events name job, step, revision, owner, generation, identity, artifact."""
    await world.sign_in()
    await world.loop().submit(contract(deadline_at=world.clock.now() + timedelta(hours=1)))
    await run(world, FakeCatalogue())
    events = await world.store.events(job_id="audit", kind="page_committed")
    assert len(events) == PAGES
    for e in events:
        assert e.step and e.revision is not None and e.lease_owner == "w1"
        assert e.generation == 1 and e.page_identity and e.artifact
        assert e.validation == "passed" and e.elapsed_s is not None
        assert e.remaining_budget_s is not None and e.remaining_budget_s > 0


async def test_lost_login_pauses_for_a_human_naming_site_and_generation(world: World) -> None:
    """A crash that takes the job's login moves it to awaiting_human, with the reason."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()

    async def crash_after_two() -> None:
        if cat.calls == 2:
            await world.backend.crash()

    crashing = world.loop(fault_hooks={"after_commit": crash_after_two})
    out = await crashing.run("audit", cat.step, target=target, expect_identity=identity)
    assert out.state == "awaiting_human"
    assert "catalogue.example" in (out.reason or "") and "browser-1" in (out.reason or "")
    assert out.pages_committed == 2
    pause = (await world.store.events(job_id="audit", kind="human_pause"))[-1]
    assert pause.data["last_revision"] == out.revision - 1
    assert pause.data["target_identity"] == "catalogue page 3"


async def test_nothing_touches_the_browser_while_paused(world: World) -> None:
    """run() on a paused job returns at once: no ensure, no tab, no launch."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    cat = FakeCatalogue(raise_next=[LoginRequired("a challenge page appeared")])
    out = await run(world, cat)
    assert out.state == "awaiting_human"
    launches, calls = world.backend.launches, cat.calls
    await world.backend.crash()
    again = await run(world, cat)
    assert again.state == "awaiting_human"
    assert (world.backend.launches, cat.calls) == (launches, calls)


async def test_resume_after_a_new_sign_in_finishes_without_losing_or_repeating(
    world: World,
) -> None:
    """Crash → pause → human signs in → resume: the job finishes, every record exactly once."""
    await world.sign_in()
    cat = FakeCatalogue()

    async def crash_once() -> None:
        if cat.calls == 3:
            await world.backend.crash()

    loop = world.loop(fault_hooks={"after_commit": crash_once})
    await loop.submit(contract())
    out = await loop.run("audit", cat.step, target=target, expect_identity=identity)
    assert out.state == "awaiting_human"
    with pytest.raises(LoginStillMissing):  # nobody signed in yet: still paused
        await loop.resume("audit", decided_by="ann")
    assert (await world.store.load_checkpoint("audit")).state == "awaiting_human"
    world.clock.advance(timedelta(minutes=5))
    await world.sign_in()
    cp = await loop.resume("audit", decided_by="ann")
    assert cp.state == "ready"
    resumed = await world.store.events(job_id="audit", kind="human_resumed")
    assert resumed[-1].data["human_wait_s"] == pytest.approx(300)
    out = await run(world, cat)
    assert out.state == "done"
    stored = await world.store.results("audit")
    assert sorted(r.source_record_id for r in stored) == sorted(truth())


async def test_lost_tab_reopens_the_checkpoint_target(world: World) -> None:
    """A restart that keeps the login but loses the tab: the job reopens the cursor's page."""
    await world.sign_in(persistent=True)
    cat = FakeCatalogue()
    urls: list[str] = []

    async def note_url_and_close_browser_once() -> None:
        urls.append(world.keeper.current_url("job:audit") or "")
        if cat.calls == 2 and world.backend.current is not None:
            await world.backend.current.close()  # clean close: the persistent login survives

    loop = world.loop(fault_hooks={"after_extract": note_url_and_close_browser_once})
    await loop.submit(contract())
    out = await loop.run("audit", cat.step, target=target, expect_identity=identity)
    assert out.state == "done"
    assert urls == [target(f"page-{n}") for n in range(1, PAGES + 1)]
    restarts = await world.store.events(job_id="audit", kind="browser_restarted")
    assert [e.data["lost_tab_url"] for e in restarts] == [target("page-2")]
    assert sorted(r.source_record_id for r in await world.store.results("audit")) == sorted(truth())


async def test_unclassified_step_errors_are_bounded_then_fail(world: World) -> None:
    """An exception the step did not classify is retried a bounded number of times, then failed."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(raise_next=[KeyError("surprise")] * 10)
    out = await run(world, cat, max_recoveries=2)
    assert out.state == "failed" and "KeyError" in (out.reason or "") and cat.calls == 3


async def test_transient_failures_retry_with_capped_jitter_and_persisted_attempts(
    world: World,
) -> None:
    """Transient failures are retried with full-jitter backoff; attempts survive in the store."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(raise_next=[TransientFailure("503"), TimeoutError(), TransientFailure("x")])
    out = await run(world, cat, backoff_base=timedelta(seconds=1), backoff_cap=timedelta(seconds=3))
    assert out.state == "done" and out.attempts_used == 3
    assert len(world.sleeps) == 3
    assert all(0 <= s <= c for s, c in zip(world.sleeps, (1, 2, 3), strict=True))


async def test_playwright_timeouts_are_transient_and_retried_within_the_attempt_budget(
    world: World,
) -> None:
    """Playwright's own TimeoutError from a step is retried with backoff, never 'unclassified'."""
    from playwright.async_api import TimeoutError as PlaywrightTimeoutError

    await world.sign_in()
    await world.loop().submit(contract(max_attempts=5))
    timeouts = [PlaywrightTimeoutError("Timeout 30000ms exceeded.") for _ in range(4)]
    cat = FakeCatalogue(raise_next=list(timeouts))
    out = await run(world, cat, max_recoveries=2, backoff_base=timedelta(seconds=1))
    assert out.state == "done" and out.attempts_used == 4
    failed = await world.store.events(job_id="audit", kind="step_failed")
    assert [e.failure_class for e in failed] == ["transient"] * 4
    assert all("TimeoutError: Timeout 30000ms exceeded." in str(e.data["error"]) for e in failed)
    assert len(world.sleeps) == 4  # each retry backed off


async def test_attempt_budget_stops_with_partial_work_never_done(world: World) -> None:
    """A spent attempt budget stops the job with its pages kept and the resume point named."""
    await world.sign_in()
    await world.loop().submit(contract(max_attempts=2))
    cat = FakeCatalogue()

    async def fail_from_page_3() -> None:
        if cat.calls >= 2:
            cat.raise_next.extend([TransientFailure("down")] * 5)

    out = await run(world, cat, fault_hooks={"after_commit": fail_from_page_3})
    assert out.state == "stopped" and "attempt budget" in (out.reason or "")
    assert "page-3" in (out.reason or "") and out.next_cursor == "page-3"
    assert await world.store.count_results("audit") == 2 * PER_PAGE


async def test_rate_limit_honours_the_server_delay(world: World) -> None:
    """RateLimited waits exactly retry_after (no jitter, no attempt spent)."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(raise_next=[RateLimited("slow down", retry_after=7.5)])
    out = await run(world, cat)
    assert out.state == "done" and world.sleeps == [7.5] and out.attempts_used == 0


async def test_rate_limit_past_the_deadline_defers_the_job(world: World) -> None:
    """A delay the deadline cannot afford persists the job as ready instead of waiting."""
    await world.sign_in()
    await world.loop().submit(contract(deadline_at=world.clock.now() + timedelta(seconds=60)))
    cat = FakeCatalogue(raise_next=[RateLimited("slow down", retry_after=600)])
    out = await run(world, cat)
    assert out.state == "ready" and "deferred" in (out.reason or "") and world.sleeps == []


async def test_unexpected_navigation_is_detected_and_recovered(world: World) -> None:
    """A step that wandered off gets PageChanged; the loop reopens the target and goes on."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(wander_next=1)
    out = await run(world, cat)
    assert out.state == "done" and out.attempts_used == 1
    failed = await world.store.events(job_id="audit", kind="step_failed")
    assert [e.failure_class for e in failed] == ["changed_page"]


async def test_leaving_the_allowed_origins_is_caught(world: World) -> None:
    """A page outside the contract's origins never gets committed."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(wander_next=1, wander_to="https://evil.example/items?page=1")
    out = await run(world, cat)
    assert out.state == "done"
    assert all("evil" not in (e.page_identity or "") for e in await world.store.events())
    failed = await world.store.events(job_id="audit", kind="step_failed")
    assert [e.failure_class for e in failed] == ["changed_page"]
    assert "left the contract's origins" in str(failed[0].data["error"])


async def test_persistent_wrong_page_stops_after_bounded_recovery(world: World) -> None:
    """If the expected page never comes back, the job stops; it is not marked done."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(raise_next=[PageChanged("modal")] * 10)
    out = await run(world, cat, max_recoveries=2)
    assert out.state == "stopped" and "recoveries" in (out.reason or "")


async def test_explicit_denial_stops(world: World) -> None:
    """Denied stops the job at once and is never retried."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue(raise_next=[Denied("403 forbidden")])
    out = await run(world, cat)
    assert out.state == "stopped" and cat.calls == 1


async def test_a_step_the_guard_refused_pauses_for_a_person_and_is_never_retried(
    world: World,
) -> None:
    """A navigation the Guard blocked is the keeper's answer, not a breakage: the job
    pauses for a person (a grant is what would help), naming the refusal, after one call."""
    await world.sign_in()
    await world.loop().submit(contract())
    block = BlockRecord(
        conversation="c1",
        method="GET",
        origin="https://elsewhere.example",
        path="/",
        rule="grant",
        reason="no grant on elsewhere.example",
    )
    refused = NavigationBlocked("the Guard blocked GET https://elsewhere.example/", block=block)
    cat = FakeCatalogue(raise_next=[refused] * 5)
    out = await run(world, cat)
    assert out.state == "awaiting_human" and cat.calls == 1
    assert (out.reason or "").startswith("refused: the Guard blocked")


async def test_deadline_and_no_progress_limit_stop_the_job(world: World) -> None:
    """A passed deadline stops before any step; so does too long without an accepted page."""
    await world.sign_in()
    await world.loop().submit(contract(deadline_at=world.clock.now() - timedelta(seconds=1)))
    out = await run(world, FakeCatalogue())
    assert out.state == "stopped" and "deadline" in (out.reason or "")


async def test_no_progress_limit(world: World) -> None:
    """Retries that produce no accepted checkpoint for too long stop the job."""
    await world.sign_in()
    await world.loop().submit(contract(no_progress_limit_s=5.0))
    cat = FakeCatalogue(raise_next=[RateLimited("wait", retry_after=3)] * 3)
    out = await run(world, cat)
    assert out.state == "stopped" and "no accepted checkpoint" in (out.reason or "")


async def test_no_grant_is_a_forbidden_action(world: World) -> None:
    """A job conversation without a grant for the site is stopped, not retried elsewhere."""
    await world.sign_in("billing")
    await world.loop().submit(contract(job_id="audit", extra={"conversation": "research"}))
    out = await run(world, FakeCatalogue())
    assert out.state == "stopped" and "forbidden" in (out.reason or "")


async def test_second_worker_cannot_claim_a_held_job(world: World) -> None:
    """Only one worker owns a job: claiming a held lease raises LeaseHeldError."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    await world.store.claim("audit", "other", timedelta(seconds=30))
    with pytest.raises(LeaseHeldError):
        await run(world, FakeCatalogue())


async def test_a_fenced_workers_page_writes_neither_its_artifact_nor_its_checkpoint(
    world: World,
) -> None:
    """Fenced between extracting and committing page 2: no artifact, no checkpoint, stored."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()

    async def another_worker_takes_over() -> None:
        if cat.calls == 2:
            world.clock.advance(timedelta(seconds=31))  # w1's 30 s lease runs out
            await world.store.claim("audit", "w2", timedelta(seconds=30))

    out = await run(world, cat, fault_hooks={"after_extract": another_worker_takes_over})
    assert out.lease_lost and out.pages_committed == 1
    cp = await world.store.load_checkpoint("audit")
    assert (cp.last_committed_step, cp.next_cursor) == ("page-1", "page-2")
    commits = await world.store.events(job_id="audit", kind="page_committed")
    assert [e.step for e in commits] == ["page-1"]
    # The only artifact stored is the one page 1's checkpoint names: page 2's is not
    # left behind by the worker that could not commit it.
    assert await stored_artifacts(world.store) == [(cp.artifact_digest, True)]


async def test_each_page_is_one_durable_commit_holding_its_artifact(world: World) -> None:
    """Every page's artifact is written by the transaction committing the page: one
    COMMIT (one fsync) per page, never a transaction of its own before it."""
    await world.sign_in()
    await world.loop().submit(contract())
    transactions: list[list[str]] = [[]]

    def hook(label: str) -> None:
        if label == "COMMITTED":
            transactions.append([])
        elif label != "COMMIT":
            transactions[-1].append(label)

    watch_store_statements(world.store, hook)
    try:
        out = await run(world, FakeCatalogue())
    finally:
        watch_store_statements(world.store, None)
    assert out.state == "done" and out.pages_committed == PAGES
    with_artifact = [t for t in transactions if any("artifact" in label for label in t)]
    assert len(with_artifact) == PAGES
    assert all("insert_results" in t and "update_checkpoint" in t for t in with_artifact)
    commits = await world.store.events(job_id="audit", kind="page_committed")
    assert len({e.artifact for e in commits}) == PAGES


async def test_expired_human_pause_is_swept_to_stopped(world: World) -> None:
    """A pause nobody answered within pause_ttl is stopped by expire_pauses(), never done."""
    await world.sign_in()
    loop = world.loop(pause_ttl=timedelta(minutes=30))
    await loop.submit(contract())
    await run(
        world,
        FakeCatalogue(raise_next=[LoginRequired("challenge")]),
        pause_ttl=timedelta(minutes=30),
    )
    assert await loop.expire_pauses() == []
    world.clock.advance(timedelta(minutes=31))
    assert await loop.expire_pauses() == ["audit"]
    cp = await world.store.load_checkpoint("audit")
    assert cp.state == "stopped" and "expired" in (cp.pause_reason or "")


async def test_contract_origins_become_the_guards_allowlist(world: World) -> None:
    """With a Guard, the job conversation may not reach origins outside its contract."""
    from session_keeper.security import GuardPolicy

    guard = GuardPolicy(world.keeper)
    await world.sign_in()
    loop = world.loop(guard=guard)
    await loop.submit(contract())
    out = await loop.run("audit", FakeCatalogue().step, target=target, expect_identity=identity)
    assert out.state == "done"
    assert guard.decide("job:audit", "https://catalogue.example/items?page=1", "GET").allowed
    outside = guard.decide("job:audit", "https://evil.example/steal", "GET")
    assert not outside.allowed and outside.rule == "allowlist"


async def test_a_write_job_waits_for_a_person_on_a_login_that_was_not_revalidated(
    world: World,
) -> None:
    """Same cookies after a restart are not proof of the same account: a write job pauses."""
    from session_keeper import Grant

    await world.sign_in(persistent=True)
    world.keeper.grant(Grant("job:audit", "catalogue.example", actions={"write"}))
    loop = world.loop()
    await loop.submit(contract(allowed_actions=("read", "write")))
    assert world.backend.current is not None
    await world.backend.current.close()  # clean close: the persistent login survives
    out = await run(world, FakeCatalogue())
    assert out.state == "awaiting_human" and "re-validated" in (out.reason or "")
    assert (await loop.resume("audit", decided_by="ann")).state == "ready"
    assert (await run(world, FakeCatalogue())).state == "done"


async def test_a_committed_page_is_not_read_back_before_the_next_one(world: World) -> None:
    """The checkpoint a page's fenced commit wrote is where the next page starts: a clean
    run reads its job a fixed number of times, not once more per page."""
    await world.sign_in()
    await world.loop().submit(contract())
    reads: list[str] = []
    watch_store_statements(world.store, lambda label: reads.append(label))
    try:
        out = await run(world, FakeCatalogue())
    finally:
        watch_store_statements(world.store, None)
    assert out.state == "done" and out.pages_committed == PAGES
    assert reads.count("select_job") == 2  # the budgets resumed, the first page
