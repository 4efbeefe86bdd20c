"""One job worker machine, as its own OS process: a PostgresStore, a KeeperPool of its
own (fake or real Chromium browsers over profiles p0..p3), a PoolJobLoop claiming
jobs (SKIP LOCKED).

Run as ``python tests/jobs/_pool_worker_process.py <dsn> <worker_id> <fake|chromium>
<profiles_dir>`` (real Chromium profiles live under ``profiles_dir``): prints
``READY``, waits for a line on stdin, then works until no job is left
unfinished and prints ``DONE <json>`` (jobs it finished, profiles it was refused).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from session_keeper import PlaywrightBackend, find_chromium
from session_keeper.errors import ProfileHeld
from session_keeper.jobs import Accepted, JobState, PoolJobLoop, StepContext
from session_keeper.pool import KeeperPool, SiteRouting
from session_keeper.seams import BrowserBackend
from session_keeper.stores import PostgresStore
from session_keeper.testing import FakeBackend, FakePage, LocalSites, SiteResponse

PROFILES = ("p0", "p1", "p2", "p3")
PAGES = 3
PER_PAGE = 4
UNFINISHED: tuple[JobState, ...] = ("ready", "running", "reconciling")


#: This machine's own local site (a tab navigates only to the web, so not a data: URL).
SITES = LocalSites(
    extra_sites={
        "pages.example": lambda r: SiteResponse(
            status=200,
            headers=(),
            body=f"<title>catalogue</title><p id=n>page={r.arg('n')}</p>",
        )
    }
)


def target(cursor: str | None) -> str:
    """The URL of a cursor's page, on this machine's local site."""
    return SITES.url("pages.example", f"/page?n={_page(cursor)}")


def _page(cursor: str | None) -> str:
    return (cursor or "page-1").removeprefix("page-")


async def step(ctx: StepContext[Any]) -> Accepted:
    """Read one page of the job's catalogue: PER_PAGE records, then the next cursor."""
    if isinstance(ctx.page, FakePage):
        text = "page=" + ctx.page.url.rsplit("n=", 1)[1]
    else:
        text = await ctx.page.inner_text("#n")  # read off the real page
    page_no = int(text.rsplit("=", 1)[1].split("<", 1)[0])
    await asyncio.sleep(0.05)  # the page takes a moment, so workers overlap
    records = [
        {"source_record_id": f"{ctx.job_id}-{page_no}-{i}", "name": f"item {page_no}.{i}"}
        for i in range(PER_PAGE)
    ]
    nxt = f"page-{page_no + 1}" if page_no < PAGES else None
    return ctx.accept(records, nxt, page_identity=f"page {page_no}")


def backends(kind: str, root: Path) -> dict[str, BrowserBackend[Any]]:
    """This machine's browser for each profile: fake, or real Chromium in its own dir."""
    if kind == "fake":
        return {p: FakeBackend() for p in PROFILES}
    chromium = find_chromium()
    return {
        p: PlaywrightBackend(
            root / p, executable_path=chromium, host_resolver_rules=SITES.host_resolver_rules
        )
        for p in PROFILES
    }


async def work(dsn: str, worker_id: str, kind: str, root: Path) -> None:
    done: list[str] = []
    refused = 0
    SITES.start()
    async with PostgresStore(dsn) as store:
        pool = KeeperPool(
            backends(kind, root),
            store=store,
            owner=worker_id,
            policy=SiteRouting(accounts={f"acct-{i}": p for i, p in enumerate(PROFILES)}),
            max_open=2,
            lease_ttl=timedelta(seconds=30),
        )
        async with pool:
            loop = PoolJobLoop(pool, store, worker_id, lease_ttl=timedelta(seconds=30))
            print("READY", flush=True)
            await asyncio.to_thread(sys.stdin.readline)  # "go": all workers start together
            while True:
                try:
                    outcome = await loop.run_next(step, target=target)
                except ProfileHeld:
                    refused += 1
                    await asyncio.sleep(0.02)
                    continue
                if outcome is not None:
                    assert outcome.state == "done", outcome
                    done.append(outcome.job_id)
                    continue
                if not await store.jobs(states=UNFINISHED):
                    break
                await asyncio.sleep(0.05)  # another worker is finishing the last jobs
    print("DONE " + json.dumps({"done": done, "refused": refused}), flush=True)


if __name__ == "__main__":
    asyncio.run(work(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
