"""A browser step on Temporal: the integration vs the same Playwright work in a bare activity.

Both run on one Temporal dev server (``temporal server start-dev``, in memory, loopback)
and one worker process, on the same Chromium build, against the same loopback page.
Each step is a ``goto`` of the page and one ``evaluate``:

- *integration*: ``WorkflowBrowser.step`` → a ``BrowserWorker`` activity on the worker's
  own queue (profile lease held by its ``KeeperPool`` on SQLite, ``ensure()`` with the
  step's turn, heartbeats, the tab marked verified and the keeper's state saved);
- *bare*: ``workflow.execute_activity`` of an activity that drives a page of its own
  long-lived Playwright browser keeping its profile on disk, as the keeper's does;
- *floor*: the bare activity plus one durable SQLite commit (what recording a step's turn
  costs);
- *no profile*: the bare activity on a browser that keeps nothing (see
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
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

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
from demos._temporal_dev import connect, dev_server
from session_keeper import PlaywrightBackend, find_chromium
from session_keeper.integrations.temporal import (
    BrowserStep,
    BrowserSteps,
    BrowserWorker,
    WorkflowBrowser,
)
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore

STEPS = BrowserSteps()
CONVERSATION = "bench"


@STEPS.step("kept_nav")
async def kept_nav(step: BrowserStep[Any], url: str) -> int:
    """The integration's step: the same goto + evaluate on the conversation's page."""
    page = await step.page(url)
    answer: int = await page.evaluate("1 + 1")
    return answer


@activity.defn(name="bare_nav")
async def bare_nav(url: str) -> int:
    """The same Playwright work with nothing around it."""
    return await bare_work(url)


@activity.defn(name="floor_nav")
async def floor_nav(url: str) -> int:
    """The bare work plus the one durable commit a step's turn costs."""
    return await floor_work(url)


@activity.defn(name="no_profile_nav")
async def no_profile_nav(url: str) -> int:
    """The bare work on a browser that keeps no profile."""
    return await no_profile_work(url)


@workflow.defn
class KeptSteps:
    @workflow.run
    async def run(self, plan: dict[str, Any]) -> int:
        browser = WorkflowBrowser(CONVERSATION, queue=plan["queue"])
        for _ in range(plan["steps"]):
            await browser.step("kept_nav", plan["url"])
        return int(plan["steps"])


@workflow.defn
class BareSteps:
    @workflow.run
    async def run(self, plan: dict[str, Any]) -> int:
        for _ in range(plan["steps"]):
            await workflow.execute_activity(
                plan.get("activity", "bare_nav"),
                plan["url"],
                task_queue=plan["bare_queue"],
                start_to_close_timeout=timedelta(minutes=1),
            )
        return int(plan["steps"])


@workflow.defn
class FloorSteps(BareSteps):
    """The bare workflow running the floor's activity."""

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> int:
        return await super().run({**plan, "activity": "floor_nav"})


@workflow.defn
class NoProfileSteps(BareSteps):
    """The bare workflow running the no-profile activity."""

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> int:
        return await super().run({**plan, "activity": "no_profile_nav"})


async def run(address: str, url: str, rounds: int, steps: int) -> dict[str, list[float]]:
    """Per-round ms per step, by arm (integration, bare, floor, no profile)."""
    client = await connect(address)
    queue, bare_queue = f"bench-{uuid.uuid4().hex[:6]}", f"bare-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as tmp:
        backend = PlaywrightBackend(Path(tmp) / "kept", executable_path=find_chromium())
        async with (
            bare_browser(Path(tmp)),
            SqliteStore(Path(tmp) / "keeper.db") as store,
            KeeperPool({"p0": backend}, store=store, owner="w1", max_open=1) as pool,
        ):
            worker = BrowserWorker(pool, worker_id="w1", queue=queue, steps=STEPS)
            runner = UnsandboxedWorkflowRunner()  # same runner for both kinds
            async with (
                Worker(
                    client,
                    task_queue=queue,
                    workflows=[KeptSteps, BareSteps, FloorSteps, NoProfileSteps],
                    activities=worker.claim_activities(),
                    workflow_runner=runner,
                ),
                Worker(client, task_queue=worker.own_queue, activities=worker.step_activities()),
                Worker(
                    client, task_queue=bare_queue, activities=[bare_nav, floor_nav, no_profile_nav]
                ),
            ):
                plan = {"queue": queue, "bare_queue": bare_queue, "url": url}

                def timed(kind: Any) -> Timed:
                    async def one(n: int) -> float:
                        start = time.perf_counter()
                        await client.execute_workflow(
                            kind.run,
                            {**plan, "steps": n},
                            id=f"{kind.__name__}-{uuid.uuid4().hex[:8]}",
                            task_queue=queue,
                        )
                        return (time.perf_counter() - start) * 1000 / n

                    return one

                arms = {
                    "integration": KeptSteps,
                    "bare": BareSteps,
                    "floor": FloorSteps,
                    "no_profile": NoProfileSteps,
                }
                return await rotate({k: timed(v) for k, v in arms.items()}, rounds, steps)


def main() -> None:
    """Run, print the BENCH record and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    with one_page() as url, dev_server() as address:
        ms = asyncio.run(run(address, url, args.rounds, args.steps))
    report(
        "26",
        "browser step on Temporal: integration vs bare Playwright activity",
        ms,
        f"rounds={args.rounds} steps={args.steps}",
    )


if __name__ == "__main__":
    main()
