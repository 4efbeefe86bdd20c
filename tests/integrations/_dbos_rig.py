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
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from demos.sites import DemoSites
from session_keeper import PlaywrightBackend
from session_keeper.errors import ProfileHeld
from session_keeper.integrations.dbos import BrowserWorker, send_sign_in, waiting_for_sign_in
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from tests.integrations._dbos_steps import STEPS, browser_run

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_dbos_process.py")
CONVERSATION = "billing-agent"
BILLING = "billing.example"


class Rig:
    """DBOS launched in this process, its browser steps served by a one-profile pool."""

    def __init__(self, pool: KeeperPool[Any], db: Path) -> None:
        self.pool = pool
        #: The SQLite store the pool leases its profile in.
        self.db = db

    async def start(self, steps: list[list[Any]]) -> WorkflowHandleAsync[Any]:
        """Start a ``browser_run`` of ``steps``."""
        plan = {"conversation": CONVERSATION, "steps": steps}
        with SetWorkflowID(f"run-{uuid.uuid4().hex[:8]}"):
            return await DBOS.start_workflow_async(browser_run, plan)

    async def sign_in(self, sites: DemoSites, *, turn: bool = True) -> None:
        """A person signs the conversation in to billing in the process's browser.

        ``turn=False``: without a turn of its own (``ensure()``), so whatever news the
        conversation has stays for the workflow's next step, as a console sign-in does.
        """
        async with self.pool.hold(CONVERSATION) as keeper:
            if turn:
                await keeper.ensure(CONVERSATION)
            await keeper.begin_login(CONVERSATION, BILLING)
            page = await keeper.unguarded_page(CONVERSATION, sites.url(BILLING, "/login"))
            await page.fill("input[name=username]", "alice")
            await page.fill("input[name=password]", "correct horse")
            await page.click("button[type=submit]")
            await page.wait_for_url("**/invoices")
            await keeper.record_login(CONVERSATION, BILLING, account="alice")

    def chromium(self) -> PlaywrightBackend:
        """The profile's backend (its ``current`` session is the running Chromium)."""
        keeper = self.pool.open_keeper("p0")
        assert keeper is not None, "the profile is not open"
        backend = keeper.backend
        assert isinstance(backend, PlaywrightBackend)
        return backend


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
    async with (
        SqliteStore(db) as store,
        KeeperPool(
            {"p0": backend}, store=store, owner="w1", max_open=1, lease_ttl=lease_ttl
        ) as pool,
    ):
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

    async def answer() -> None:
        answered: set[str] = set()
        while True:
            for wait in await waiting_for_sign_in(workflow_id):
                if wait["wait"] in answered:
                    continue  # told already: the workflow has not taken the message yet
                answered.add(wait["wait"])
                asked.append(time.perf_counter())
                # A fenced profile's retry may still hold the lease: wait for it.
                for _ in range(100):
                    try:
                        await rig.sign_in(sites, turn=False)
                        break
                    except ProfileHeld:
                        await asyncio.sleep(0.2)
                await send_sign_in(workflow_id, wait["conversation"], wait["site"])
            await asyncio.sleep(0.1)

    task = asyncio.create_task(answer())
    try:
        yield asked
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def walked_pages(sites: DemoSites, tag: str) -> list[int]:
    """The guide pages of walk ``tag`` the docs site served, in order (its own log)."""
    out = []
    for r in sites.requests("docs.example"):
        query = parse_qs(r.query)
        if r.path == "/guide" and query.get("walk") == [tag]:
            out.append(int(query["page"][0]))
    return out


def refund_posts(sites: DemoSites, billing: str, workflow_id: str) -> int:
    """The refund POSTs billing received under ``workflow_id``'s idempotency keys."""
    return sum(
        1
        for r in sites.requests(billing)
        if r.method == "POST"
        and r.path == "/refund"
        and parse_qs(r.query).get("idempotency_key", [""])[0].startswith(workflow_id + ":")
    )


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
