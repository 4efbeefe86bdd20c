"""Fault row: the browser SIGKILLed mid-step, on real Chromium, on SQLite and PostgreSQL.

The catalogue audit (24 pages behind a login, DemoSites) runs through a JobLoop on a
PlaywrightBackend. On page ``at`` the step SIGKILLs Chromium's main process from
outside, either before it reads the page or after it read it but before handing the
records over. The login dies with the browser (a session cookie), so the job must
pause for a person; the scripted human signs in again and resumes. The independent
validator compares the store with the site's ground truth and measures duplication.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.async_api import Page

from demos.catalogue_audit import (
    CONVERSATION,
    JOB_ID,
    SITE,
    catalogue_step,
    contract,
    expect_identity,
    human_signs_in,
    make_target,
)
from demos.sites import CATALOGUE_PAGES, DemoSites, catalogue_ground_truth
from session_keeper import Durability, Grant, PlaywrightBackend, SessionKeeper
from session_keeper.jobs import Accepted, JobLoop, StepContext
from session_keeper.stores import PostgresStore, SqliteStore
from session_keeper.testing import TemporaryPostgres
from tests._chaos import record, sample

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.chaos,
    pytest.mark.timeout(300),
]

KILLS = sample(
    "chromium-kill",
    [(at, phase) for at in range(1, CATALOGUE_PAGES + 1) for phase in ("before", "after")],
)


@pytest.mark.parametrize(
    "store_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize("point", KILLS, ids=[f"{at}-{phase}" for at, phase in KILLS])
async def test_browser_sigkilled_mid_step_on_chromium(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    store_kind: str,
    point: tuple[int, str],
) -> None:
    """A real SIGKILL of Chromium inside a step: the job pauses for its login, resumes
    after a sign-in, and ends with every record once, each page committed once."""
    at, phase = point
    if store_kind == "sqlite":
        store: SqliteStore | PostgresStore = SqliteStore(tmp_path / "audit.db")
    else:
        pg: TemporaryPostgres = request.getfixturevalue("pg_server")
        store = PostgresStore(pg.create_database())
    backend: PlaywrightBackend = playwright_backend(tmp_path / "profile")
    base = sites.url(SITE, "").rstrip("/")
    extracted: Counter[str] = Counter()
    killed: list[float] = []

    async def step(ctx: StepContext[Page]) -> Accepted:
        if ctx.cursor == f"page-{at}" and not killed and phase == "before":
            kill(backend, killed)
        accepted = await catalogue_step(ctx)
        if ctx.cursor == f"page-{at}" and not killed:  # read, not yet handed over
            extracted.update(r.source_record_id for r in accepted.records)
            kill(backend, killed)
            await ctx.page.evaluate("1")  # the browser is gone: raises
        extracted.update(r.source_record_id for r in accepted.records)
        return accepted

    async with store:
        keeper = SessionKeeper(
            backend,
            durability=Durability(store=store),
            grants=[Grant(CONVERSATION, SITE, actions={"read"})],
        )
        async with keeper:
            loop = JobLoop(keeper, store, "w1", lease_ttl=timedelta(seconds=30))
            await human_signs_in(keeper, base)
            await loop.submit(contract())
            target = make_target(base)
            out = await loop.run(JOB_ID, step, target=target, expect_identity=expect_identity)
            pauses = 0
            while out.state == "awaiting_human" and pauses < 3:
                pauses += 1
                await human_signs_in(keeper, base)
                await loop.resume(JOB_ID, decided_by="operator")
                out = await loop.run(JOB_ID, step, target=target, expect_identity=expect_identity)
            recover_s = time.perf_counter() - killed[0]
            truth = catalogue_ground_truth()
            stored = await store.results(JOB_ID)
            ids = [r.source_record_id for r in stored]
            commits = await store.events(job_id=JOB_ID, kind="page_committed", limit=10_000)
            already = sum(int(e.data.get("already_present") or 0) for e in commits)  # type: ignore[call-overload]
            per_step = Counter(e.step for e in commits)
            cp = (await store.load_job(JOB_ID)).checkpoint
            verdict = {
                "lost": len(set(truth) - set(ids)),
                "duplicated": already + len(ids) - len(set(ids)),
                "duplicate_commits": sum(n - 1 for n in per_step.values()),
                "re_extracted": sum(n - 1 for n in extracted.values()),
                "false_completion": cp.state == "done" and set(ids) != set(truth),
                "state": cp.state,
            }
            record(
                "test_browser_sigkilled_mid_step_on_chromium",
                store=store_kind, recover_s=recover_s, pauses=pauses, **verdict,
            )  # fmt: skip
            assert verdict == {
                "lost": 0, "duplicated": 0, "duplicate_commits": 0,
                "re_extracted": verdict["re_extracted"], "false_completion": False,
                "state": "done",
            }, (point, out)  # fmt: skip
            for r in stored:
                assert {k: r.data.get(k) for k in ("name", "price")} == {
                    k: truth[r.source_record_id][k] for k in ("name", "price")
                }
            assert killed, "the kill point was never reached"


def kill(backend: PlaywrightBackend, killed: list[float]) -> None:
    """SIGKILL Chromium's main process from outside, as a crash would."""
    assert backend.current is not None and backend.current.pid is not None
    killed.append(time.perf_counter())
    os.kill(backend.current.pid, signal.SIGKILL)
