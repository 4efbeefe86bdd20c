"""An in-process browser worker on a real Temporal dev server, for the Temporal tests.

:func:`browser_rig` runs one :class:`BrowserWorker` (shared queue and own queue) in the
test's process over a one-profile :class:`KeeperPool` on SQLite; the failover tests run
workers as processes instead (``_temporal_worker.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from session_keeper import PlaywrightBackend
from session_keeper.integrations.temporal import BrowserWorker
from session_keeper.pool import KeeperPool
from tests.integrations._pool_rig import BILLING, CONVERSATION, PoolRig, one_profile_pool
from tests.integrations._temporal_flows import BrowserRun
from tests.integrations._temporal_steps import STEPS

__all__ = ["BILLING", "CONVERSATION", "Rig", "browser_rig", "eventually", "ready", "spawn"]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_temporal_worker.py")


class Rig(PoolRig):
    """A Temporal client and one in-process browser worker over a one-profile pool."""

    def __init__(self, client: Client, pool: KeeperPool[Any], queue: str, db: Path) -> None:
        super().__init__(pool, db)
        self.client = client
        self.queue = queue

    async def start(self, steps: list[list[Any]], **plan: Any) -> WorkflowHandle[Any, Any]:
        """Start a BrowserRun of ``steps`` on this rig's queue (``plan``: its options)."""
        plan = {"conversation": CONVERSATION, "queue": self.queue, "steps": steps, **plan}
        return await self.client.start_workflow(
            BrowserRun.run, plan, id=f"run-{uuid.uuid4().hex[:8]}", task_queue=self.queue
        )


@contextlib.asynccontextmanager
async def browser_rig(
    address: str,
    db: Path,
    backend: PlaywrightBackend,
    *,
    lease_ttl: timedelta = timedelta(seconds=60),
) -> AsyncIterator[Rig]:
    """A browser worker ``w1`` (shared and own queue) in this process, on a fresh queue."""
    client = await Client.connect(address)
    queue = f"browser-{uuid.uuid4().hex[:8]}"
    async with one_profile_pool(db, backend, lease_ttl) as pool:
        worker = BrowserWorker(pool, worker_id="w1", queue=queue, steps=STEPS)
        async with (
            Worker(
                client,
                task_queue=queue,
                workflows=[BrowserRun],
                activities=worker.claim_activities(),
            ),
            Worker(client, task_queue=worker.own_queue, activities=worker.step_activities()),
        ):
            yield Rig(client, pool, queue, db)


async def eventually(check: Callable[[], Any], what: str) -> None:
    """Wait until ``await check()`` is truthy, 30 s at most (a failure names ``what``)."""
    deadline = asyncio.get_running_loop().time() + 30
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


def spawn(args: list[str]) -> subprocess.Popen[str]:
    """A worker machine: ``_temporal_worker.py`` in its own interpreter and process group."""
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its Chromium dies with it, as on a machine that died
    )


def ready(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """The worker's own queue, from its READY line (its stderr on failure)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            return line.split()[1]
        if not line and proc.poll() is not None:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    raise AssertionError(f"the worker never got ready:\n{err[-3000:]}")
