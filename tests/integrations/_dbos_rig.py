"""DBOS for the tests: launched in the test's process (:func:`dbos_rig`), or as the
recovery tests' application processes (``_dbos_process.py``: start one, read what it
prints, wait for what the test sites' logs show)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from demos.sites import DemoSites
from session_keeper import PlaywrightBackend
from session_keeper.integrations.dbos import BrowserWorker, send_sign_in, waiting_for_sign_in
from tests.integrations._dbos_steps import STEPS, browser_run
from tests.integrations._pool_rig import BILLING, CONVERSATION, PoolRig, beside, one_profile_pool

__all__ = [
    "BILLING",
    "CONVERSATION",
    "Rig",
    "answer_sign_ins",
    "dbos_rig",
    "person",
    "spawn",
    "until",
    "wait_line",
]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_dbos_process.py")


class Rig(PoolRig):
    """DBOS launched in this process, its browser steps served by a one-profile pool."""

    async def start(self, steps: list[list[Any]]) -> WorkflowHandleAsync[Any]:
        """Start a ``browser_run`` of ``steps``."""
        plan = {"conversation": CONVERSATION, "steps": steps}
        with SetWorkflowID(f"run-{uuid.uuid4().hex[:8]}"):
            return await DBOS.start_workflow_async(browser_run, plan)


@contextlib.asynccontextmanager
async def dbos_rig(
    system_database: str,
    db: Path,
    backend: PlaywrightBackend,
    *,
    lease_ttl: timedelta = timedelta(seconds=60),
) -> AsyncIterator[Rig]:
    """DBOS launched on ``system_database`` in this process, with a BrowserWorker ``w1``
    serving its browser steps over a one-profile pool leased in the SQLite store ``db``."""
    async with one_profile_pool(db, backend, lease_ttl) as pool:
        with BrowserWorker(pool, worker_id="w1", steps=STEPS):
            DBOS(
                config={
                    "name": "sk-dbos-tests",
                    "system_database_url": system_database,
                    "log_level": "ERROR",
                }
            )
            DBOS.launch()
            try:
                yield Rig(pool, db)
            finally:
                DBOS.destroy()


@contextlib.asynccontextmanager
async def person(rig: Rig, sites: DemoSites, workflow_id: str) -> AsyncIterator[list[float]]:
    """A person who, whenever the workflow waits for a sign-in (each wait once), signs in
    through the process's browser (no turn of the workflow's) and tells the workflow.
    Yields the times (``perf_counter``) each sign-in was asked for."""
    asked: list[float] = []

    async def signs_in(wait: Mapping[str, Any]) -> None:
        asked.append(time.perf_counter())
        await rig.sign_in_once_free(sites)

    async with beside(answer_sign_ins(workflow_id, signs_in, poll=0.1)):
        yield asked


async def answer_sign_ins(
    workflow_id: str, signs_in: Callable[[Mapping[str, Any]], Awaitable[None]], *, poll: float
) -> None:
    """Forever, each sign-in wait of ``workflow_id`` once: a person signs in
    (``signs_in(wait)``), then the workflow is told (``send_sign_in``); every ``poll`` s."""
    answered: set[str] = set()
    while True:
        for wait in await waiting_for_sign_in(workflow_id):
            if wait["wait"] in answered:
                continue  # told already: the workflow has not taken the message yet
            answered.add(wait["wait"])
            await signs_in(wait)
            await send_sign_in(workflow_id, wait["conversation"], wait["site"])
        await asyncio.sleep(poll)


def spawn(args: list[str]) -> subprocess.Popen[str]:
    """An application machine: the script in its own interpreter and process group."""
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its Chromium dies with it, as on a machine that died
    )


def wait_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 120) -> str:
    """The rest of the first stdout line starting with ``prefix`` (stderr on failure)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
        if not line and proc.poll() is not None:
            break
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    raise AssertionError(f"no {prefix!r} line:\n{err[-3000:]}")


def until(check: Callable[[], bool], what: str, timeout: float = 90) -> None:
    """Poll ``check`` every 20 ms until true (a failure names ``what``)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)
