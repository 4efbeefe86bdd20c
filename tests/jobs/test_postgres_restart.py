"""PostgreSQL restarted (``pg_ctl stop -m immediate`` + start) under three workers.

Three workers (each its own connection pool, as three processes would have) work on
three jobs of one PostgreSQL server. After worker ``w`` commits page ``at`` the
server is stopped immediately (a crash: no shutdown checkpoint, open transactions
cut) and started again on the same port; the other workers are mid-statement. Every
worker keeps going as a supervisor would: a failed run (a typed store error) is
retried once the dead leases have run out. The validator then checks every job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper.errors import LeaseHeldError, SessionKeeperError, StoreError
from session_keeper.jobs import JobLoop
from session_keeper.stores import PostgresStore
from session_keeper.testing import (
    FakeClock,
    FakePage,
    JobFaultPoint,
    TemporaryPostgres,
    job_loop_testing,
)
from tests._chaos import sample

from .conftest import FakeCatalogue, World, contract, identity, make_world, target
from .test_faults import PAGES, validate

pytestmark = [pytest.mark.chaos, pytest.mark.postgres, pytest.mark.timeout(300)]

JOBS = ("audit-0", "audit-1", "audit-2")
WORKERS = ("w0", "w1", "w2")


@pytest.fixture(scope="module")
def own_pg() -> Iterator[TemporaryPostgres]:
    """A server of this module's own: restarting the session's would cut other tests."""
    with TemporaryPostgres() as pg:
        yield pg


RESTARTS = sample("pg-restart", [(w, at) for w in range(3) for at in range(1, PAGES)])


@pytest.mark.parametrize("point", RESTARTS, ids=[f"w{w}-{at}" for w, at in RESTARTS])
async def test_postgres_restarted_under_three_workers(
    own_pg: TemporaryPostgres, tmp_path: Path, point: tuple[int, int]
) -> None:
    """An immediate stop and start of the server mid-run: every job ends done, each
    record stored once, each page committed once; runs cut off fail with StoreError."""
    who, at = point
    dsn = own_pg.create_database()
    clock = FakeClock()
    store = PostgresStore(dsn, clock=clock)
    async with make_world(store, clock, tmp_path, "postgres", jobs=JOBS) as world:
        # One person signs the first job in; the others read under that login with their
        # own grants (a second sign-in over it would need a grant to write: LoginNotYours).
        await world.sign_in(f"job:{JOBS[0]}")
        for job in JOBS:
            await world.loop().submit(contract(job_id=job))
        cats = {job: FakeCatalogue(pages=PAGES) for job in JOBS}
        errors: list[str] = []
        restarted = asyncio.Event()
        outcomes: dict[str, object] = {}

        async def restart() -> None:
            if not restarted.is_set() and cats[JOBS[who]].calls == at:
                world.fault_at = time.perf_counter()
                await asyncio.to_thread(own_pg.restart, "immediate")
                restarted.set()

        async def worker(index: int) -> None:
            hooks: dict[JobFaultPoint, Callable[[], Awaitable[None]]] | None = (
                {"after_commit": restart} if index == who else None
            )
            async with PostgresStore(dsn, clock=clock) as own:
                # Each worker starts on its own job, then helps with whatever is left.
                order = JOBS[index:] + JOBS[:index]
                # Bounded by wall time, not passes: while the world's own pool reconnects
                # after the restart, every "is it done?" read says no, and a pass over
                # jobs already done takes no time (a loaded machine used up 50 passes).
                deadline = time.monotonic() + 90  # a worker that cannot finish fails the trial
                while time.monotonic() < deadline:
                    left = [j for j in order if not await done(world, j)]
                    if not left:
                        return
                    await asyncio.sleep(0.01)
                    for job in left:
                        try:
                            outcomes[job] = await own_loop(world, own, WORKERS[index], hooks).run(
                                job, cats[job].step, target=target, expect_identity=identity
                            )
                        except LeaseHeldError:
                            await asyncio.sleep(0.01)
                        except StoreError as exc:
                            errors.append(type(exc).__name__)
                            await restarted.wait()
                            clock.advance(timedelta(seconds=31))  # the cut runs' leases lapse
                raise AssertionError(f"{WORKERS[index]} gave up: {outcomes} {errors}")

        await asyncio.gather(*(worker(i) for i in range(3)))
        for job in JOBS:
            v = await validate(world, "done", cats[job], pages=PAGES, job=job, errors=len(errors))
            assert (v.lost, v.duplicated, v.duplicate_commits, v.false_completion, v.state) == (
                0, 0, 0, False, "done",
            ), job  # fmt: skip
            world.fault_at = None  # time to recover is the first job's figure only


async def done(world: World, job: str) -> bool:
    """Whether the job is done (a read that fails during the restart says no)."""
    try:
        return (await world.store.load_checkpoint(job)).state == "done"
    except SessionKeeperError:
        return False


def own_loop(
    world: World,
    store: PostgresStore,
    worker: str,
    hooks: Mapping[JobFaultPoint, Callable[[], Awaitable[None]]] | None,
) -> JobLoop[FakePage]:
    """The world's job loop for ``worker`` on that worker's own store."""
    loop = JobLoop(world.keeper, store, worker, lease_ttl=timedelta(seconds=30))
    job_loop_testing(loop, sleep=world.sleep, heartbeat_sleep=world.timers.sleep, fault_hooks=hooks)
    return loop
