"""A browser step on DBOS: the integration vs the same Playwright work in a bare DBOS step.

Both run in one process on one DBOS (its system database a SQLite file, or
``--database postgresql://...``), on the same Chromium build, against the same loopback
page. Each step is a ``goto`` of the page and one ``evaluate``:

- *integration*: ``WorkflowBrowser.step`` → a ``BrowserSteps`` DBOS step on the process's
  ``BrowserWorker`` (profile lease held by its ``KeeperPool`` on SQLite, the workflow's
  execution count read from DBOS, ``ensure()`` with the step's turn, the tab marked
  verified and the keeper's state saved);
- *bare*: a ``@DBOS.step()`` that drives a page of its own long-lived Playwright browser
  keeping its profile on disk, as the keeper's does;
- *floor*: the bare step plus one durable SQLite commit (what recording a step's turn
  costs);
- *no profile*: the bare step on a browser that keeps nothing (see
  ``benchmarks/_step_bench.py`` for why it is shown and not a goal).

A round runs one workflow of ``--steps`` steps of each kind (order rotating between
rounds) and divides each workflow's wall time by its steps. Prints ``BENCH`` records
(integration/bare and integration/floor per round, goals ≤ 1.10×; integration/no
profile, no goal) and a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dbos import DBOS, SetWorkflowID

from benchmarks._step_bench import (
    Timed,
    bare_browser,
    bare_work,
    floor_work,
    no_profile_work,
    one_page,
    report,
    rotate,
)
from session_keeper import PlaywrightBackend, find_chromium
from session_keeper.integrations.dbos import (
    BrowserStep,
    BrowserSteps,
    BrowserWorker,
    WorkflowBrowser,
)
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore

STEPS = BrowserSteps()
CONVERSATION = "bench"


@STEPS.step("bench_kept_nav")
async def kept_nav(step: BrowserStep[Any], url: str) -> int:
    """The integration's step: the same goto + evaluate on the conversation's page."""
    page = await step.page(url)
    answer: int = await page.evaluate("1 + 1")
    return answer


@DBOS.step(name="bench_bare_nav")
async def bare_nav(url: str) -> int:
    """The same Playwright work with nothing around it."""
    return await bare_work(url)


@DBOS.step(name="bench_floor_nav")
async def floor_nav(url: str) -> int:
    """The bare work plus the one durable commit a step's turn costs."""
    return await floor_work(url)


@DBOS.step(name="bench_no_profile_nav")
async def no_profile_nav(url: str) -> int:
    """The bare work on a browser that keeps no profile."""
    return await no_profile_work(url)


@DBOS.workflow()
async def kept_steps(url: str, steps: int) -> int:
    browser = WorkflowBrowser(CONVERSATION)
    for _ in range(steps):
        await browser.step(kept_nav, url)
    return steps


@DBOS.workflow()
async def bare_steps(url: str, steps: int) -> int:
    for _ in range(steps):
        await bare_nav(url)
    return steps


@DBOS.workflow()
async def floor_steps(url: str, steps: int) -> int:
    for _ in range(steps):
        await floor_nav(url)
    return steps


@DBOS.workflow()
async def no_profile_steps(url: str, steps: int) -> int:
    for _ in range(steps):
        await no_profile_nav(url)
    return steps


async def run(database: str | None, url: str, rounds: int, steps: int) -> dict[str, list[float]]:
    """Per-round ms per step, by arm (integration, bare, floor, no profile)."""
    with tempfile.TemporaryDirectory(prefix="bench-dbos-") as tmp:
        backend = PlaywrightBackend(Path(tmp) / "kept", executable_path=find_chromium())
        async with (
            bare_browser(Path(tmp)),
            SqliteStore(Path(tmp) / "keeper.db") as store,
            KeeperPool({"p0": backend}, store=store, owner="w1", max_open=1) as pool,
        ):
            with BrowserWorker(pool, worker_id="w1", steps=STEPS):
                system_db = database or f"sqlite:///{tmp}/dbos.sqlite"
                DBOS(
                    config={
                        "name": "bench-dbos-step",
                        "system_database_url": system_db,
                        "log_level": "WARNING",
                    }
                )
                DBOS.launch()
                try:

                    def timed(workflow: Any) -> Timed:
                        async def one(n: int) -> float:
                            start = time.perf_counter()
                            with SetWorkflowID(f"bench-{uuid.uuid4().hex[:10]}"):
                                handle = await DBOS.start_workflow_async(workflow, url, n)
                            await handle.get_result()
                            return (time.perf_counter() - start) * 1000 / n

                        return one

                    arms = {
                        "integration": kept_steps,
                        "bare": bare_steps,
                        "floor": floor_steps,
                        "no_profile": no_profile_steps,
                    }
                    return await rotate({k: timed(v) for k, v in arms.items()}, rounds, steps)
                finally:
                    DBOS.destroy()


def main() -> None:
    """Run, print the BENCH record and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--database", default=None, help="DBOS system database URL")
    args = parser.parse_args()
    with one_page() as url:
        ms = asyncio.run(run(args.database, url, args.rounds, args.steps))
    kind = "postgres" if args.database else "sqlite"
    report(
        "27",
        f"browser step on DBOS ({kind}): integration vs bare Playwright step",
        ms,
        f"rounds={args.rounds} steps={args.steps} database={kind}",
    )


if __name__ == "__main__":
    main()
