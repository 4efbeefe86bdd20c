"""The seed's fault-injection matrix on the fake world, on SQLite and on PostgreSQL.

Every trial ends with an independent validation against the catalogue's ground truth:
0 lost, 0 duplicated, 0 false completions, and the expected final state. What it
measured (and the wall time from the fault to the validated end state) goes to
``FAULT_REPORT`` for RELIABILITY.md (``make chaos``: 20 trials per fault; CI: a few).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest

from session_keeper.errors import BrowserGoneError, LeaseHeldError, LoginRequired
from session_keeper.jobs import Accepted, RunOutcome, StepContext
from session_keeper.stores import PostgresStore, SqliteStore
from session_keeper.testing import FakeClock, FakePage, JobFaultPoint, TemporaryPostgres
from tests._chaos import SEED, TRIALS, record, sample
from tests._chaos import rng as rng_for
from tests.store.conftest import _empty_pg

from .conftest import PER_PAGE, FakeCatalogue, World, contract, identity, make_world, target, truth

pytestmark = pytest.mark.chaos

#: The fault trials run on a longer catalogue, so that every trial gets its own fault point
#: (at least TRIALS + 2 pages, so that each fault space holds TRIALS distinct points).
PAGES = max(12, TRIALS + 2)
P = TypeVar("P")


def points(name: str, space: Sequence[P]) -> list[P]:
    """TRIALS distinct fault points drawn from ``space`` with this session's seed."""
    return sample(name, space)


@pytest.fixture(scope="session")
def pg_jobs_dsn(pg_server: TemporaryPostgres) -> str:
    """One database for the PostgreSQL fault trials, emptied before each trial."""
    return pg_server.create_database("sk_faults")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    """The fake world on each store: a fresh SQLite file, an emptied PostgreSQL database."""
    clock = FakeClock()
    path = tmp_path / "jobs.db"
    if request.param == "sqlite":
        store: SqliteStore | PostgresStore = SqliteStore(path, clock=clock)
    else:
        dsn = request.getfixturevalue("pg_jobs_dsn")
        _empty_pg(dsn)
        store = PostgresStore(dsn, clock=clock)
    async with make_world(store, clock, path, request.param) as w:
        yield w


def faulted(world: World) -> None:
    """The trial injects its fault now (time to recover counts from here; first call wins)."""
    if world.fault_at is None:
        world.fault_at = time.perf_counter()


def ids(chosen: Sequence[object]) -> list[str]:
    """Trial ids that carry the seed and the fault point."""
    return [f"seed{SEED}-{p}" for p in chosen]


def cat() -> FakeCatalogue:
    """The fault trials' catalogue."""
    return FakeCatalogue(pages=PAGES)


class ControllerCrash(BaseException):
    """The controller process dies here: nothing after this line runs, no lease is released."""


@attrs.frozen
class Verdict:
    """What an independent validator measured in the store, the event log and the site."""

    lost: int
    #: Records a commit found already stored (the store's ``already_present``), plus any
    #: source id stored twice: measured, not assumed from the primary key.
    duplicated: int
    #: Commits beyond the first of any step (page), from the event log.
    duplicate_commits: int
    #: Extractions beyond the first of any source id (repeated work, not duplicated output).
    re_extracted: int
    false_completion: bool
    state: str


async def validate(
    world: World,
    outcome_state: str,
    *cats: FakeCatalogue,
    pages: int = PAGES,
    job: str = "audit",
    **extra: Any,
) -> Verdict:
    """Compare the stored results with the ground truth, independently of the loop
    (``extra`` goes into the trial's report line)."""
    stored = await world.store.results(job)
    ids_ = [r.source_record_id for r in stored]
    expected = truth(pages)
    committed_pages = {expected[i]["page"] for i in ids_}
    # Only whole committed pages count: every record of a committed page must be there.
    should_have = {rid for rid, d in expected.items() if d["page"] in committed_pages}
    lost = len(should_have - set(ids_))
    if outcome_state == "done":
        lost = len(set(expected) - set(ids_))
    for r in stored:
        assert dict(r.data) == {k: v for k, v in expected[r.source_record_id].items()}
    commits = await world.store.events(job_id=job, kind="page_committed")
    per_step = Counter(e.step for e in commits)
    already = sum(int(e.data.get("already_present", 0)) for e in commits)  # type: ignore[call-overload]
    extracted: Counter[str] = Counter()
    for c in cats:
        extracted.update(c.extracted)
    cp = await world.store.load_checkpoint(job)
    verdict = Verdict(
        lost=lost,
        duplicated=already + len(ids_) - len(set(ids_)),
        duplicate_commits=sum(n - 1 for n in per_step.values()),
        re_extracted=sum(n - 1 for n in extracted.values()),
        false_completion=cp.state == "done" and set(ids_) != set(expected),
        state=cp.state,
    )
    recover_s = None if world.fault_at is None else time.perf_counter() - world.fault_at
    print(f"seed={SEED} {verdict} recover_s={recover_s}")  # shown with -s or on failure
    test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
    test = test.split("::")[-1].split("[")[0]
    record(test, store=world.kind, recover_s=recover_s, **extra, **attrs.asdict(verdict))
    return verdict


async def run(world: World, c: FakeCatalogue, worker: str, **kw: Any) -> RunOutcome:
    """One run of the audit job by ``worker``."""
    return await world.loop(worker, **kw).run(
        "audit", c.step, target=target, expect_identity=identity
    )


EXTRACT_CRASHES = points("extract", range(1, PAGES + 1))


@pytest.mark.parametrize("at", EXTRACT_CRASHES, ids=ids(EXTRACT_CRASHES))
async def test_controller_stops_after_extraction_before_commit(world: World, at: int) -> None:
    """Old checkpoint remains; the page is repeated without losing or duplicating records."""
    await world.sign_in()
    await world.loop().submit(contract())
    c = cat()

    async def crash() -> None:
        if c.calls == at:
            faulted(world)
            raise ControllerCrash

    with pytest.raises(ControllerCrash):
        await run(world, c, "w1", fault_hooks={"after_extract": crash})
    cp = await world.store.load_checkpoint("audit")
    assert cp.next_cursor == f"page-{at}"
    world.clock.advance(timedelta(seconds=31))  # the dead controller's lease expires
    out = await run(world, c, "w2")
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    assert v.re_extracted == PER_PAGE  # exactly the crashed page was read twice
    assert out.repeated_records == 0


ACK_LOSSES = points("ack", range(1, PAGES + 1))


@pytest.mark.parametrize("at", ACK_LOSSES, ids=ids(ACK_LOSSES))
async def test_commit_succeeds_but_the_acknowledgement_is_lost(world: World, at: int) -> None:
    """Reload finds the committed revision; the cursor is not rolled back; nothing repeats."""
    await world.sign_in()
    await world.loop().submit(contract())
    c = cat()

    async def lose_ack() -> None:
        if c.calls == at:
            faulted(world)
            raise ControllerCrash

    with pytest.raises(ControllerCrash):
        await run(world, c, "w1", fault_hooks={"after_commit": lose_ack})
    cp = await world.store.load_checkpoint("audit")
    assert cp.last_committed_step == f"page-{at}"
    assert cp.next_cursor == (f"page-{at + 1}" if at < PAGES else None)
    assert await world.store.count_results("audit") == at * PER_PAGE
    world.clock.advance(timedelta(seconds=31))
    out = await run(world, c, "w2")
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    assert v.re_extracted == 0 and c.calls == PAGES  # no page was extracted twice


WANDERS = points(
    "wander",
    [
        (at, to)
        for at in range(1, PAGES)
        for to in ("catalogue.example/items?page=99", "docs.example/elsewhere?page=1")
    ],
)


@pytest.mark.parametrize("point", WANDERS, ids=ids(WANDERS))
async def test_unexpected_navigation_during_the_next_step(
    world: World, point: tuple[int, str]
) -> None:
    """Fresh observation detects the wrong page and returns only to the verified target."""
    at, wander = point
    await world.sign_in()
    await world.loop().submit(contract())
    c = cat()

    async def wander_next() -> None:
        if c.calls == at:
            faulted(world)
            c.wander_next, c.wander_to = 1, f"https://{wander}"

    out = await run(world, c, "w1", fault_hooks={"after_commit": wander_next})
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    failures = await world.store.events(job_id="audit", kind="step_failed")
    assert [e.failure_class for e in failures] == ["changed_page"]
    committed = await world.store.events(job_id="audit", kind="page_committed")
    assert [e.page_identity for e in committed] == [
        identity(f"page-{n}") for n in range(1, PAGES + 1)
    ]


EXPIRIES = points("expire", [(at, wait) for at in range(1, PAGES) for wait in (1, 7, 60)])


@pytest.mark.parametrize("point", EXPIRIES, ids=ids(EXPIRIES))
async def test_login_expires_and_a_human_takes_over(world: World, point: tuple[int, int]) -> None:
    """The job pauses, dispatches nothing while paused, and revalidates after an explicit resume."""
    at, wait_minutes = point
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    c = cat()

    async def expire() -> None:
        if c.calls == at:
            faulted(world)
            c.raise_next.append(LoginRequired("the site shows its sign-in page"))

    out = await run(world, c, "w1", fault_hooks={"after_commit": expire})
    assert out.state == "awaiting_human" and out.next_cursor == f"page-{at + 1}"
    calls, launches = c.calls, world.backend.launches
    assert (await run(world, c, "w1")).state == "awaiting_human"
    assert (c.calls, world.backend.launches) == (calls, launches)  # nothing dispatched
    world.clock.advance(timedelta(minutes=wait_minutes))
    await world.sign_in()  # the human signs in again
    assert (await loop.resume("audit", decided_by="operator")).state == "ready"
    out = await run(world, c, "w1")
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    assert v.re_extracted == 0


STALLS = points(
    "stall", [(at, budget) for at in range(1, PAGES) for budget in ("deadline", "no_progress")]
)


@pytest.mark.parametrize("point", STALLS, ids=ids(STALLS))
async def test_budget_expires_with_partial_work_and_a_resume_point(
    world: World, point: tuple[int, str]
) -> None:
    """Stopped with partial accepted artifacts and an accurate resume point, never done."""
    at, budget = point
    await world.sign_in()
    deadline = world.clock.now() + timedelta(minutes=10)
    await world.loop().submit(
        contract(deadline_at=deadline)
        if budget == "deadline"
        else contract(no_progress_limit_s=60.0)
    )
    c = cat()

    async def stall() -> None:
        if c.calls == at:
            faulted(world)
            world.clock.advance(timedelta(minutes=11))

    out = await run(world, c, "w1", fault_hooks={"after_commit": stall})
    assert out.state == "stopped" and out.next_cursor == f"page-{at + 1}"
    assert f"page-{at + 1}" in (out.reason or "")
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion) == (0, 0, 0, False)
    assert await world.store.count_results("audit") == at * PER_PAGE
    cp = await world.store.load_checkpoint("audit")
    assert cp.accepted_artifact is not None and cp.artifact_digest is not None


BROWSER_DEATHS = points("browser", range(2, PAGES + 1))


@pytest.mark.parametrize("at", BROWSER_DEATHS, ids=ids(BROWSER_DEATHS))
async def test_browser_dies_mid_step(world: World, at: int) -> None:
    """A browser crash inside a step: the login is gone, so the job pauses; resumed, it finishes."""
    await world.sign_in()
    loop = world.loop()
    await loop.submit(contract())
    c = cat()
    original = c.step

    async def step_with_crash(ctx: StepContext[FakePage]) -> Accepted:
        if c.calls + 1 == at and world.backend.launches == 1:
            faulted(world)
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
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    assert v.re_extracted == 0  # the dying step never handed its records over


async def step_with_crash_probe() -> None:
    """A page of a dead fake browser raises BrowserGoneError, as the loop expects."""
    from session_keeper.testing import FakeBackend

    backend = FakeBackend()
    session = await backend.launch()
    page = await session.open_page("c")
    await backend.crash()
    await page.goto("https://x.example/")


TAKEOVERS = points("takeover", range(1, PAGES + 1))


@pytest.mark.parametrize("at", TAKEOVERS, ids=ids(TAKEOVERS))
async def test_expired_lease_holder_cannot_commit_after_a_takeover(world: World, at: int) -> None:
    """A worker whose lease expired is fenced off; the replacement's work stands alone."""
    await world.sign_in()
    await world.loop().submit(contract())
    slow, fast = cat(), cat()
    takeover: list[RunOutcome] = []

    async def stall_then_let_w2_take_over() -> None:
        if slow.calls == at and not takeover:
            faulted(world)
            world.clock.advance(timedelta(seconds=31))  # w1's lease runs out mid-step
            takeover.append(await run(world, fast, "w2"))

    out = await run(world, slow, "w1", fault_hooks={"after_extract": stall_then_let_w2_take_over})
    assert out.lease_lost and out.pages_committed == at - 1 and out.state == "done"
    assert takeover[0].state == "done"
    v = await validate(world, "done", slow, fast)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    # w1's extraction of the page it could not commit is the only repeated read.
    assert v.re_extracted == PER_PAGE
    assert await world.store.count_results("audit") == PAGES * PER_PAGE


async def run_to_done(world: World, c: FakeCatalogue, worker: str) -> RunOutcome:
    """Recovery as an operator does it: run; a job paused for its login is signed in
    again and resumed, then run on (bounded)."""
    out = await run(world, c, worker)
    for _ in range(3):
        if out.state != "awaiting_human":
            break
        await world.sign_in()
        await world.loop(worker).resume("audit", decided_by="operator")
        out = await run(world, c, worker)
    return out


RACES = points("race", [(at, expire) for at in range(1, PAGES) for expire in (False, True)])


@pytest.mark.parametrize("point", RACES, ids=ids(RACES))
async def test_two_workers_racing_for_one_job(world: World, point: tuple[int, bool]) -> None:
    """Two workers run one job at the same time: one owner at a time, each page once."""
    at, expire = point
    await world.sign_in()
    await world.loop().submit(contract())
    a, b = cat(), cat()
    shuffle = rng_for(f"race-{at}-{expire}")
    rival: list[asyncio.Task[RunOutcome | None]] = []

    async def jittered(c: FakeCatalogue, ctx: StepContext[FakePage]) -> Accepted:
        for _ in range(shuffle.randrange(4)):  # a seeded interleaving of the two workers
            await asyncio.sleep(0)
        return await c.step(ctx)

    async def worker(c: FakeCatalogue, name: str, **kw: Any) -> RunOutcome | None:
        try:
            return await world.loop(name, **kw).run(
                "audit", lambda ctx: jittered(c, ctx), target=target, expect_identity=identity
            )
        except LeaseHeldError:
            return None  # lost the race for the lease: a correct answer, nothing done

    async def start_rival() -> None:
        if a.calls == at and not rival:
            faulted(world)
            if expire:  # w1 stalls past its lease: the rival takes over while w1 runs on
                world.clock.advance(timedelta(seconds=31))
            rival.append(asyncio.create_task(worker(b, "w2")))
            await asyncio.sleep(0)

    first = await worker(a, "w1", fault_hooks={"after_extract": start_rival})
    second = await rival[0]
    outcomes = [o for o in (first, second) if o is not None]
    assert outcomes, "neither worker ran the job"
    if not any(o.state == "done" for o in outcomes):
        world.clock.advance(timedelta(seconds=31))
        await run(world, cat(), "w3")
    v = await validate(world, "done", a, b)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
    assert await world.store.count_results("audit") == PAGES * PER_PAGE


SWEEPS = points(
    "sweep",
    [
        (at, point, idle)
        for at in range(1, PAGES)
        for point in ("after_extract", "after_commit")
        for idle in (False, True)
    ],
)


@pytest.mark.parametrize("point", SWEEPS, ids=ids(SWEEPS))
async def test_a_sweep_mid_job(world: World, point: tuple[int, str, bool]) -> None:
    """A sweep inside a step closes nothing in use; one after an idle hour costs a
    re-sign-in, never a record: the job pauses for its login and finishes on resume."""
    at, where, idle = point
    await world.sign_in()
    await world.loop().submit(contract())
    c = cat()
    reports: list[Any] = []

    async def sweep() -> None:
        if c.calls == at and not reports:
            faulted(world)
            if idle:  # the step has held the page for longer than the idle limit
                world.clock.advance(timedelta(hours=1, minutes=1))
            reports.append(await world.keeper.sweep())

    # A two-hour lease: the sweep, not the lease, is the fault under test.
    ttl = timedelta(hours=2)
    hooks: dict[JobFaultPoint, Callable[[], Awaitable[None]]] = {}
    hooks["after_extract" if where == "after_extract" else "after_commit"] = sweep
    out = await world.loop("w1", fault_hooks=hooks, lease_ttl=ttl).run(
        "audit", c.step, target=target, expect_identity=identity
    )
    assert (reports[0].closed_browser is not None) == idle
    if out.state == "awaiting_human":
        await world.sign_in()
        await world.loop("w1", lease_ttl=ttl).resume("audit", decided_by="operator")
        out = await world.loop("w1", lease_ttl=ttl).run(
            "audit", c.step, target=target, expect_identity=identity
        )
    v = await validate(world, out.state, c)
    assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
        0, 0, 0, False, "done",
    )  # fmt: skip
