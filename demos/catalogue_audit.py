"""A read-only catalogue audit on real Chromium that survives two kills.

    python demos/catalogue_audit.py

The catalogue (local test site, 24 pages x 10 records, behind a login) is audited
by worker processes driving real Chromium through a SessionKeeper and a JobLoop on a
SQLite store. The run is interrupted twice, for real:

1. the browser process is SIGKILLed mid-job — the login dies with it, the job
   pauses for a human, a human signs in again and resumes it;
2. the worker process itself is SIGKILLed mid-job — a fresh process picks the job
   up from the store once the dead worker's lease has expired.

An independent validator then compares the stored results with the site's ground
truth and *measures* duplication instead of trusting the primary key: records a commit
found already stored (the store's ``already_present``), pages committed more than once
(the event log), and records extracted more than once per source id (every worker logs
what its steps handed over; a re-extraction is repeated work, not duplicated output).
The last line is ``RESULT pages=N records=N lost=0 duplicated=0 duplicate_commits=0
re_extracted=N false_completions=0 validated=true``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from playwright.async_api import Page

# Run as a script (python demos/catalogue_audit.py): the repository root holds `demos`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.sites import CATALOGUE_PAGES, CATALOGUE_PASSWORD, DemoSites, catalogue_ground_truth
from session_keeper import Durability, Grant, PlaywrightBackend, SessionKeeper
from session_keeper.errors import LeaseHeldError, LoginRequired, RateLimited, TransientFailure
from session_keeper.jobs import Accepted, JobContract, JobLoop, RunOutcome, Step, StepContext
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

ROOT = Path(__file__).resolve().parent.parent
SITE = "catalogue.example"
JOB_ID = "catalogue-audit-001"
CONVERSATION = f"job:{JOB_ID}"
LEASE_TTL = timedelta(seconds=4)
KEY_ENV = "SESSION_KEEPER_FINGERPRINT_KEY"


def cursor_page(cursor: str | None) -> int:
    """The page number a cursor names (``page-N``; the start is page 1)."""
    return int((cursor or "page-1").removeprefix("page-"))


def make_target(base: str) -> Callable[[str | None], str]:
    """The URL of a cursor's page on the catalogue at ``base``."""
    return lambda cursor: f"{base}/items?page={cursor_page(cursor)}"


def expect_identity(cursor: str | None) -> str:
    """What the cursor's page must call itself."""
    return f"catalogue page {cursor_page(cursor)}"


#: One round trip reads everything a step needs from a catalogue page.
OBSERVE_JS = """() => ({
    signin: !!document.querySelector('#signin'),
    fault: document.querySelector('#fault')?.textContent ?? null,
    identity: document.querySelector('#page-id')?.textContent ?? null,
    rows: [...document.querySelectorAll('#items tr')].map(r => ({
        source_record_id: r.dataset.id,
        name: r.querySelector('.name').textContent,
        price: r.querySelector('.price').textContent,
    })),
    next: !!document.querySelector('#next'),
})"""


async def observe(page: Page) -> dict[str, Any]:
    """Read a catalogue page in one round trip."""
    seen: dict[str, Any] = await page.evaluate(OBSERVE_JS)
    return seen


async def catalogue_step(ctx: StepContext[Page]) -> Accepted:
    """One bounded interaction: observe the page the loop opened, classify what is wrong."""
    seen = await observe(ctx.page)
    if seen["signin"]:
        raise LoginRequired("the catalogue shows its sign-in page")
    if seen["fault"] is not None:
        if "429" in seen["fault"]:
            raise RateLimited("the catalogue asked us to slow down", retry_after=1.0)
        raise TransientFailure(seen["fault"])
    nxt = f"page-{cursor_page(ctx.cursor) + 1}" if seen["next"] else None
    return ctx.accept(seen["rows"], nxt, page_identity=str(seen["identity"]))


def contract() -> JobContract:
    """The audit's contract: read-only, one site, stable ids, required fields."""
    return JobContract(
        job_id=JOB_ID,
        site=SITE,
        allowed_origins=(f"http://{SITE}",),
        allowed_actions=("read",),
        account_alias="approved-reader",
        input_manifest="catalogue-fixture-v1",
        source_view="fixture-snapshot-v1",
        required_fields=("name", "price"),
        stop_condition="no next page",
        start_cursor="page-1",
        max_attempts=20,
        step_timeout_s=30.0,
    )


# -- the worker process ---------------------------------------------------------------
def logging_extractions(step: Step[Page], log_path: Path) -> Step[Page]:
    """``step``, also appending the source ids it hands over to ``log_path`` (one line each).

    Flushed per line: the kernel keeps what was written even when the worker is SIGKILLed.
    """

    async def step_and_log(ctx: StepContext[Page]) -> Accepted:
        accepted = await step(ctx)
        with log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps([r.source_record_id for r in accepted.records]) + "\n")
        return accepted

    return step_and_log


async def human_signs_in(keeper: SessionKeeper[Page], base: str) -> None:
    """The scripted human: sign the job's conversation in through the login form."""
    await keeper.ensure(CONVERSATION)
    page = await keeper.unguarded_page(CONVERSATION, f"{base}/login")
    await page.fill("input[name=password]", CATALOGUE_PASSWORD)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login(CONVERSATION, SITE, account="approved-reader")


async def worker(args: argparse.Namespace) -> None:
    """Run the job until it finishes or pauses; sign in and resume when told to."""
    backend = PlaywrightBackend(args.profile, host_resolver_rules=args.rules)
    async with SqliteStore(args.db) as store:
        keeper = SessionKeeper(
            backend,
            durability=Durability(store=store, keeper_id=JOB_ID),
            grants=[Grant(CONVERSATION, SITE, actions={"read"})],
        )
        async with keeper:
            loop = JobLoop(keeper, store, args.worker_id, lease_ttl=LEASE_TTL)
            sign_ins = args.sign_ins
            while True:
                job = await store.load_job(JOB_ID)
                if job.checkpoint.state == "awaiting_human":
                    if not sign_ins:
                        break
                    sign_ins -= 1
                    await human_signs_in(keeper, args.base)
                    if await resume(loop) == "awaiting_human":
                        continue
                out = await run(
                    loop, args.base, logging_extractions(catalogue_step, args.extractions)
                )
                if out.state != "awaiting_human" or not sign_ins:
                    break
            job = await store.load_job(JOB_ID)
            cp = job.checkpoint
            print(json.dumps({"state": cp.state, "reason": cp.pause_reason}), flush=True)


async def resume(loop: JobLoop[Page]) -> str:
    """Hand the paused job back, waiting out a dead worker's lease first."""
    while True:
        try:
            return (await loop.resume(JOB_ID, decided_by="operator")).state
        except LeaseHeldError:
            await asyncio.sleep(0.5)


async def run(loop: JobLoop[Page], base: str, step: Step[Page]) -> RunOutcome:
    """Run the job, waiting out a dead worker's lease first."""
    while True:
        try:
            return await loop.run(
                JOB_ID, step, target=make_target(base), expect_identity=expect_identity
            )
        except LeaseHeldError:
            await asyncio.sleep(0.5)


# -- the orchestrator -----------------------------------------------------------------
def start_worker(tmp: Path, sites: LocalSites, worker_id: str) -> subprocess.Popen[str]:
    """A worker in its own process, so that killing it is real."""
    cmd = [
        sys.executable, "-m", "demos.catalogue_audit", "worker",
        "--db", str(tmp / "audit.db"), "--profile", str(tmp / "profile"),
        "--rules", sites.host_resolver_rules, "--base", sites.url(SITE, "").rstrip("/"),
        "--worker-id", worker_id, "--extractions", str(tmp / "extractions.jsonl"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


async def committed_pages(store: SqliteStore) -> int:
    """How many pages the job has committed so far."""
    job = await store.load_job(JOB_ID)
    step = job.checkpoint.last_committed_step
    return cursor_page(step) if step else 0


async def wait_for_pages(store: SqliteStore, n: int, proc: subprocess.Popen[str]) -> None:
    """Wait until ``n`` pages are committed; a worker that ends first is an error."""
    while await committed_pages(store) < n:
        if proc.poll() is not None:
            raise RuntimeError(f"worker ended ({proc.returncode}) before page {n}")
        await asyncio.sleep(0.02)


def browser_pid(profile: Path) -> int:
    """The worker's Chromium main process, from its profile's lock."""
    target = os.readlink(profile / "SingletonLock")
    return int(target.rsplit("-", 1)[1])


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """Wait for a worker and read its last line."""
    out, _ = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"worker exited with {proc.returncode}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def read_extractions(path: Path) -> Counter[str]:
    """How often each source id was handed over by a step, over every worker."""
    extracted: Counter[str] = Counter()
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            extracted.update(json.loads(line))
    return extracted


async def validate(store: SqliteStore, extractions: Path) -> dict[str, Any]:
    """The independent validator: stored results against the site's ground truth, and
    duplication measured from the commits, the event log and the workers' extractions."""
    truth = catalogue_ground_truth()
    stored = await store.results(JOB_ID)
    ids = [r.source_record_id for r in stored]
    wrong = [
        r.source_record_id
        for r in stored
        if r.source_record_id not in truth
        or {k: r.data.get(k) for k in ("name", "price")}
        != {k: truth[r.source_record_id][k] for k in ("name", "price")}
    ]
    job = await store.load_job(JOB_ID)
    lost = len(set(truth) - set(ids))
    done = job.checkpoint.state == "done"
    commits = await store.events(job_id=JOB_ID, kind="page_committed", limit=1_000_000)
    already = sum(int(e.data.get("already_present") or 0) for e in commits)  # type: ignore[call-overload]
    per_step = Counter(e.step for e in commits)
    extracted = read_extractions(extractions)
    duplicated = already + len(ids) - len(set(ids))
    duplicate_commits = sum(n - 1 for n in per_step.values())
    return {
        "pages": await committed_pages(store),
        "records": len(set(ids)),
        "lost": lost,
        "duplicated": duplicated,
        "duplicate_commits": duplicate_commits,
        "re_extracted": sum(n - 1 for n in extracted.values()),
        "wrong": len(wrong),
        "false_completions": int(done and (lost > 0 or bool(wrong))),
        "validated": done
        and lost == 0
        and not wrong
        and duplicated == 0
        and duplicate_commits == 0,
    }


async def orchestrate(out: Callable[[str], None]) -> dict[str, Any]:
    """Run the whole story; return the validator's verdict."""
    os.environ.setdefault(KEY_ENV, os.urandom(32).hex())  # one key for every worker
    with tempfile.TemporaryDirectory(prefix="catalogue-audit-") as tmp_name, DemoSites() as sites:
        tmp = Path(tmp_name)
        async with SqliteStore(tmp / "audit.db") as store:
            await store.submit_job(contract())
            out(
                f"job {JOB_ID}: {CATALOGUE_PAGES} pages behind a login, "
                "worker processes on real Chromium"
            )

            w1 = start_worker(tmp, sites, "worker-1")
            await wait_for_pages(store, 6, w1)
            os.kill(browser_pid(tmp / "profile"), signal.SIGKILL)
            out(f"after page {await committed_pages(store)}: SIGKILL the browser process")
            r1 = finish(w1)
            out(f"worker-1 ended: {r1['state']} ({r1['reason']})")
            if r1["state"] != "awaiting_human":
                raise RuntimeError("the browser kill should have paused the job for a human")

            w2 = start_worker(tmp, sites, "worker-2")
            out("a human signs in again; worker-2 resumes the job")
            await wait_for_pages(store, 14, w2)
            w2.send_signal(signal.SIGKILL)
            w2.wait()
            out(f"after page {await committed_pages(store)}: SIGKILL worker-2 itself")

            w3 = start_worker(tmp, sites, "worker-3")
            out("a fresh process, worker-3, takes the job over once the dead lease expires")
            r3 = finish(w3)
            out(f"worker-3 ended: {r3['state']}")

            verdict = await validate(store, tmp / "extractions.jsonl")
            events = await store.events(job_id=JOB_ID)
            for e in events:
                if e.kind == "human_pause":
                    out(f"  paused at revision {e.revision}: {e.data.get('reason')}")
                elif e.kind == "human_resumed":
                    who, waited = e.data.get("decided_by"), e.data.get("human_wait_s")
                    out(f"  resumed by {who} after {waited:.1f}s of human waiting")
            kinds = [e.kind for e in events]
            out(
                f"events: {kinds.count('page_committed')} commits, "
                f"{kinds.count('human_pause')} human pauses, "
                f"{kinds.count('human_resumed')} resumes, "
                f"{kinds.count('step_failed')} failed steps"
            )
    return verdict


def main(argv: list[str] | None = None) -> int:
    """Orchestrate (default) or run as a worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="role")
    w = sub.add_parser("worker")
    w.add_argument("--db", type=Path, required=True)
    w.add_argument("--profile", type=Path, required=True)
    w.add_argument("--rules", required=True)
    w.add_argument("--base", required=True)
    w.add_argument("--worker-id", required=True)
    w.add_argument("--extractions", type=Path, required=True, help="where steps log their ids")
    w.add_argument("--sign-ins", type=int, default=1, help="how often the human may sign in")
    args = parser.parse_args(argv)
    if args.role == "worker":
        asyncio.run(worker(args))
        return 0
    verdict = asyncio.run(orchestrate(print))
    print(
        f"RESULT pages={verdict['pages']} records={verdict['records']} lost={verdict['lost']} "
        f"duplicated={verdict['duplicated']} duplicate_commits={verdict['duplicate_commits']} "
        f"re_extracted={verdict['re_extracted']} false_completions={verdict['false_completions']} "
        f"validated={str(verdict['validated']).lower()}"
    )
    return 0 if verdict["validated"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
