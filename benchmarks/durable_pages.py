"""A job's pages/s on the embedded JobLoop (SQLite) vs Temporal vs DBOS, side by side in one run.

    python benchmarks/durable_pages.py [--rounds 3]

Every arm reads the same 24 catalogue pages (local test site behind a login, real
Chromium, one ``goto`` and one ``evaluate`` per page) through a SessionKeeper on SQLite:

- *jobloop*: ``JobLoop.run`` of the catalogue audit (lease, ``ensure()``, identity and
  field validation, a fenced commit per page);
- *temporal*: the ``CatalogueAudit`` workflow of ``demos/temporal_audit.py`` on a dev
  server (``temporal server start-dev``, loopback), one ``WorkflowBrowser`` step per
  page on a ``BrowserWorker`` in this process;
- *dbos*: the same walk as a DBOS workflow (system database a SQLite file), one
  ``WorkflowBrowser`` step per page on a ``BrowserWorker`` in this process.

An arm is one function (an async context manager yielding "run one job, return
pages/s"), listed in :data:`ARMS`. Rounds alternate the arms' order. Prints per-round
figures, a ``BENCH`` record per engine (row 28: its pages/s over the JobLoop's, per
round), then ``RESULT <arm>_pages_per_s=... ratio_<arm>=...`` (each arm against the
JobLoop).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs
from playwright.async_api import Page

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dbos import DBOS
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from benchmarks._report import emit
from demos._temporal_audit_flow import AUDIT_QUEUE, CatalogueAudit
from demos._temporal_audit_flow import CONVERSATION as TEMPORAL_CONVERSATION
from demos._temporal_dev import connect, dev_server
from demos.catalogue_audit import (
    CONVERSATION,
    SITE,
    catalogue_step,
    contract,
    expect_identity,
    human_signs_in,
    make_target,
)
from demos.sites import CATALOGUE_PAGES, CATALOGUE_PASSWORD, DemoSites
from demos.temporal_audit import READ_PAGE_JS, STEPS
from session_keeper import Durability, Grant, PlaywrightBackend, SessionKeeper
from session_keeper.errors import LoginRequired
from session_keeper.integrations import dbos as on_dbos
from session_keeper.integrations.temporal import BrowserWorker
from session_keeper.jobs import JobLoop
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore

#: Runs one job of every catalogue page; returns pages/s.
Round = Callable[[], Awaitable[float]]
Arm = Callable[[DemoSites, Path], contextlib.AbstractAsyncContextManager[Round]]


@contextlib.asynccontextmanager
async def jobloop_arm(sites: DemoSites, tmp: Path) -> AsyncIterator[Round]:
    """The embedded JobLoop on SQLite: one keeper, one signed-in profile."""
    base = sites.url(SITE, "").rstrip("/")
    async with SqliteStore(tmp / "jobloop.db") as store:
        backend = PlaywrightBackend(tmp / "jobloop", host_resolver_rules=sites.host_resolver_rules)
        keeper = SessionKeeper(
            backend,
            durability=Durability(store=store),
            grants=[Grant(CONVERSATION, SITE, actions={"read"})],
        )
        async with keeper:
            await human_signs_in(keeper, base)
            loop: JobLoop[Page] = JobLoop(keeper, store, "bench-worker")

            async def one() -> float:
                job_id = f"bench-{uuid.uuid4().hex[:8]}"
                await store.submit_job(
                    attrs.evolve(contract(), job_id=job_id, extra={"conversation": CONVERSATION})
                )
                started = time.perf_counter()
                out = await loop.run(
                    job_id,
                    catalogue_step,
                    target=make_target(base),
                    expect_identity=expect_identity,
                )
                elapsed = time.perf_counter() - started
                if out.state != "done" or out.new_records != CATALOGUE_PAGES * 10:
                    raise RuntimeError(f"the JobLoop ended {out.state}, {out.new_records} records")
                return CATALOGUE_PAGES / elapsed

            yield one


@contextlib.asynccontextmanager
async def signed_in_pool(
    sites: DemoSites, where: Path, conversation: str
) -> AsyncIterator[KeeperPool[Page]]:
    """A one-profile pool on SQLite under ``where``, ``conversation`` signed in to the
    catalogue (the engines' arms: their workers lease the profile from it)."""
    base = sites.url(SITE, "").rstrip("/")
    await asyncio.to_thread(where.mkdir)
    backend = PlaywrightBackend(where / "profile", host_resolver_rules=sites.host_resolver_rules)
    async with (
        SqliteStore(where / "keeper.db") as store,
        KeeperPool({"p0": backend}, store=store, owner="bench") as pool,
    ):
        async with pool.hold(conversation) as keeper:
            await keeper.ensure(conversation)
            page = await keeper.unguarded_page(conversation, f"{base}/login")
            await page.fill("input[name=password]", CATALOGUE_PASSWORD)
            async with page.expect_navigation():
                await page.click("button[type=submit]")
            await keeper.record_login(conversation, SITE, account="approved-reader")
        yield pool


@contextlib.asynccontextmanager
async def temporal_arm(sites: DemoSites, tmp: Path) -> AsyncIterator[Round]:
    """Temporal: the demo's audit workflow, a BrowserWorker over a one-profile pool."""
    base = sites.url(SITE, "").rstrip("/")
    with dev_server() as address:
        client = await connect(address)
        async with signed_in_pool(sites, tmp / "temporal", TEMPORAL_CONVERSATION) as pool:
            browser = BrowserWorker(pool, worker_id="bench", queue=AUDIT_QUEUE, steps=STEPS)
            async with (
                Worker(
                    client,
                    task_queue=AUDIT_QUEUE,
                    workflows=[CatalogueAudit],
                    activities=browser.claim_activities(),
                    workflow_runner=UnsandboxedWorkflowRunner(),
                ),
                Worker(client, task_queue=browser.own_queue, activities=browser.step_activities()),
            ):

                async def one() -> float:
                    started = time.perf_counter()
                    out = await client.execute_workflow(
                        CatalogueAudit.run,
                        {"base": base, "pages": CATALOGUE_PAGES},
                        id=f"bench-{uuid.uuid4().hex[:8]}",
                        task_queue=AUDIT_QUEUE,
                    )
                    elapsed = time.perf_counter() - started
                    if len(set(out["records"])) != CATALOGUE_PAGES * 10:
                        raise RuntimeError("the Temporal audit did not read every record")
                    return CATALOGUE_PAGES / elapsed

                yield one


DBOS_STEPS = on_dbos.BrowserSteps()
DBOS_CONVERSATION = "catalogue-auditor"


@DBOS_STEPS.step("audit_page", sites=(SITE,))
async def dbos_audit_page(step: on_dbos.BrowserStep[Page], url: str) -> list[str]:
    """One catalogue page's record ids (the Temporal demo's step, as a DBOS step)."""
    page = await step.page(url)
    seen = await page.evaluate(READ_PAGE_JS)
    if seen["signin"]:
        raise LoginRequired("the catalogue shows its sign-in page")
    rows: list[str] = seen["rows"]
    return rows


@DBOS.workflow()
async def dbos_catalogue_audit(job: dict[str, object]) -> list[str]:
    """Read every catalogue page, one browser step each."""
    browser = on_dbos.WorkflowBrowser(DBOS_CONVERSATION)
    records: list[str] = []
    for page in range(1, int(str(job["pages"])) + 1):
        result = await browser.step(dbos_audit_page, f"{job['base']}/items?page={page}")
        records.extend(result.value)
    return records


@contextlib.asynccontextmanager
async def dbos_arm(sites: DemoSites, tmp: Path) -> AsyncIterator[Round]:
    """DBOS: the same walk as a workflow, a BrowserWorker over a one-profile pool."""
    base = sites.url(SITE, "").rstrip("/")
    async with signed_in_pool(sites, tmp / "dbos", DBOS_CONVERSATION) as pool:
        with on_dbos.BrowserWorker(pool, worker_id="bench", steps=DBOS_STEPS):
            DBOS(
                config={
                    "name": "bench-durable",
                    "system_database_url": f"sqlite:///{tmp}/dbos.sqlite",
                    "log_level": "WARNING",
                }
            )
            DBOS.launch()
            try:

                async def one() -> float:
                    started = time.perf_counter()
                    records = await dbos_catalogue_audit({"base": base, "pages": CATALOGUE_PAGES})
                    elapsed = time.perf_counter() - started
                    if len(set(records)) != CATALOGUE_PAGES * 10:
                        raise RuntimeError("the DBOS audit did not read every record")
                    return CATALOGUE_PAGES / elapsed

                yield one
            finally:
                DBOS.destroy()


#: The arms, the first the baseline every ratio is against.
ARMS: dict[str, Arm] = {"jobloop": jobloop_arm, "temporal": temporal_arm, "dbos": dbos_arm}


async def main(rounds: int) -> dict[str, list[float]]:
    """Warm every arm once, then ``rounds`` rounds, the arms' order alternating."""
    figures: dict[str, list[float]] = {name: [] for name in ARMS}
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp_name, DemoSites() as sites:
        async with contextlib.AsyncExitStack() as stack:
            runs = {
                n: await stack.enter_async_context(a(sites, Path(tmp_name)))
                for n, a in ARMS.items()
            }
            for run in runs.values():
                await run()  # warm-up: launches, first connections, page cache
            for i in range(rounds):
                order = list(runs) if i % 2 == 0 else list(reversed(runs))
                for name in order:
                    figures[name].append(await runs[name]())
                print(
                    f"round {i + 1}: "
                    + ", ".join(f"{n} {figures[n][-1]:.1f} pages/s" for n in runs),
                    flush=True,
                )
    return figures


#: What each engine arm's row says, against the JobLoop's pages/s in the same rounds.
COMPARED = {
    "temporal": "a job's pages/s: Temporal (dev server, one activity per page) vs JobLoop",
    "dbos": "a job's pages/s: DBOS (SQLite, one step per page) vs JobLoop",
}


def report(figures: dict[str, list[float]]) -> None:
    """Emit row 28's BENCH record per engine (its pages/s over the JobLoop's, per round:
    no goal, the row says when to move) and print the RESULT line."""
    baseline = next(iter(figures))
    base = statistics.median(figures[baseline])
    for name, values in figures.items():
        if name == baseline:
            continue
        emit(
            "28",
            compared=COMPARED[name],
            ratios=[v / b for v, b in zip(values, figures[baseline], strict=True)],
            goal=None,
            direction=">=",
            detail=f"{name} {statistics.median(values):.1f} pages/s, {baseline} {base:.1f}"
            f" pages/s (medians of {len(values)} rounds, {CATALOGUE_PAGES} pages each)",
        )
    parts = [f"{n}_pages_per_s={statistics.median(v):.1f}" for n, v in figures.items()]
    parts += [
        f"ratio_{n}={statistics.median(v) / base:.2f}" for n, v in figures.items() if n != baseline
    ]
    print("RESULT " + " ".join(parts))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    report(asyncio.run(main(parser.parse_args().rounds)))
