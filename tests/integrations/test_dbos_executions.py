"""A DBOS workflow run again in the process already running it (a recovery request for
its own executor): the browser worker's remembered recovery count is not the new
execution's. On a real DBOS (SQLite system database), real Chromium and LocalSites.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS, SetWorkflowID

from demos.sites import DemoSites
from session_keeper.integrations.dbos import (
    BrowserStep,
    BrowserSteps,
    BrowserWorker,
    WorkflowBrowser,
)
from session_keeper.jobs import Readback
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from tests.conftest import BackendFactory

pytestmark = [pytest.mark.dbos, pytest.mark.chromium]

STEPS = BrowserSteps()


class Destination:
    """The outside world the step writes to: every submit it received, by key; the first
    waits at ``gate`` (its execution is still in the step when the workflow runs again),
    and ``tasks`` holds the task of each execution that reached the submit."""

    def __init__(self) -> None:
        self.submits: list[str] = []
        self.gate = asyncio.Event()
        self.tasks: list[asyncio.Task[Any]] = []


DEST: list[Destination] = []


@STEPS.step("dbos_exec_write")
async def gated_write(step: BrowserStep[Any], url: str) -> str:
    """One write under the step's idempotency key, on ``url``."""
    dest = DEST[-1]

    async def submit(page: Any, key: str) -> dict[str, object]:
        dest.submits.append(key)
        task = asyncio.current_task()
        assert task is not None
        dest.tasks.append(task)
        if len(dest.submits) == 1:
            await dest.gate.wait()
        return {"how": "submitted"}

    async def readback(page: Any, key: str) -> Readback:
        if key in dest.submits:
            return Readback(status="applied", outcome={"how": "readback"})
        return Readback(status="absent")

    outcome = await step.write("w", submit, readback, url=url)
    return str(outcome["how"])


@DBOS.workflow()
async def write_once(url: str) -> str:
    """One browser step that writes."""
    return (await WorkflowBrowser("exec-agent").step(gated_write, url)).value  # type: ignore[no-any-return]


@pytest.fixture
async def dbos_worker(tmp_path: Path, playwright_backend: BackendFactory) -> AsyncIterator[None]:
    """DBOS on a fresh SQLite system database, this process's BrowserWorker serving."""
    DEST.append(Destination())
    async with (
        SqliteStore(tmp_path / "keeper.db") as store,
        KeeperPool({"p0": playwright_backend()}, store=store, owner="w1", max_open=1) as pool,
    ):
        with BrowserWorker(pool, worker_id="w1", steps=STEPS):
            DBOS(
                config={
                    "name": "sk-dbos-executions",
                    "system_database_url": f"sqlite:///{tmp_path / 'dbos.sqlite'}",
                    "log_level": "CRITICAL",
                }
            )
            DBOS.launch()
            try:
                yield
            finally:
                DEST[-1].gate.set()
                await asyncio.wait(DEST[-1].tasks, timeout=30)
                DBOS.destroy()


async def test_a_workflow_recovered_in_its_own_process_reads_its_recovery_count_again(
    dbos_worker: None, sites: DemoSites
) -> None:
    """The first execution submits and is still in its step when DBOS runs the workflow
    again in the same process: the new execution's step is a recovered one (its count
    read again, not remembered from the first), so its write reads back and finds the
    submit, never submitting a second time."""
    dest = DEST[-1]
    with SetWorkflowID(f"exec-{uuid.uuid4().hex[:8]}"):
        handle = await DBOS.start_workflow_async(write_once, sites.url("docs.example", "/guide"))
    deadline = asyncio.get_running_loop().time() + 90
    while not dest.submits:
        assert asyncio.get_running_loop().time() < deadline, "the first submit never came"
        await asyncio.sleep(0.05)
    # What DBOS does when asked to recover an executor's pending workflows (its own here):
    # the workflow is queued again and runs anew in this process, the first execution
    # still in its step.
    await asyncio.to_thread(DBOS._recover_pending_workflows, ["local"])
    # The start's handle waits for the first execution's task, held at the gate: the
    # outcome is read from DBOS's record.
    while True:
        status = await DBOS.get_workflow_status_async(handle.workflow_id)
        assert status is not None
        if status.status in ("SUCCESS", "ERROR"):
            break
        assert asyncio.get_running_loop().time() < deadline, "the workflow never ended"
        await asyncio.sleep(0.05)
    assert (status.status, status.recovery_attempts) == ("SUCCESS", 2), status.error
    assert status.output == "readback"
    assert len(dest.submits) == 1
