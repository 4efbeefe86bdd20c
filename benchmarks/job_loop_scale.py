"""Issue 22: the durable job loop is as fast in a keeper that holds 10,000 conversations.

Two keepers on FakeBackends (the library's own cost, no browser), each on its own SQLite
store: one holds only the job's conversation, the other also ``--conversations`` others,
each with a tab and a turn (a chat service's keeper that also runs jobs). Each round
submits a fresh job of ``--pages`` pages to each keeper and runs it to done with a
:class:`JobLoop` (lease, ``ensure()``, identity and field validation, a fenced fsynced
commit and its event, per page); the order flips every round. The figure is pages/s with
the conversations over pages/s without, per round (goal >= 0.9x)::

    RESULT busy_pages_per_s=... empty_pages_per_s=... ratio=... conversations=N

Usage: ``python benchmarks/job_loop_scale.py [--conversations 10000] [--pages 40]
[--rounds 7]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper import Durability, Grant, IdleTimeouts, SessionKeeper
from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakePage

SITE = "catalogue.example"
PER_PAGE = 10
#: How many conversations open their tab at once while the busy keeper is built.
CHUNK = 2000


def target(cursor: str | None) -> str:
    """The URL of a cursor's page."""
    return f"https://{SITE}/items?page={(cursor or 'page-1').removeprefix('page-')}"


def identity(cursor: str | None) -> str:
    """What the page for a cursor calls itself."""
    return f"catalogue page {(cursor or 'page-1').removeprefix('page-')}"


def contract(job_id: str) -> JobContract:
    """A catalogue job's contract: read the site's pages from the first one on."""
    return JobContract(
        job_id=job_id,
        site=SITE,
        allowed_origins=(f"https://{SITE}",),
        required_fields=("name",),
        start_cursor="page-1",
    )


def catalogue(pages: int) -> Callable[[StepContext[FakePage]], Awaitable[Accepted]]:
    """A step reading ``PER_PAGE`` records off each of ``pages`` pages."""

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        page_no = int(ctx.page.url.rsplit("=", 1)[1])
        records = [
            {"source_record_id": f"R{page_no}-{i}", "name": f"item {page_no}.{i}"}
            for i in range(PER_PAGE)
        ]
        nxt = f"page-{page_no + 1}" if page_no < pages else None
        return ctx.accept(records, nxt, page_identity=f"catalogue page {page_no}")

    return step


class Side:
    """One keeper, its store and its job loop."""

    def __init__(self, name: str, keeper: SessionKeeper[FakePage], store: SqliteStore) -> None:
        self.name, self.keeper, self.store = name, keeper, store
        self.loop = JobLoop(keeper, store, f"w-{name}", lease_ttl=timedelta(seconds=30))
        self.jobs = 0

    async def one_job(self, pages: int) -> float:
        """Submit and run one fresh job to done; its pages per second."""
        self.jobs += 1
        job_id = f"audit-{self.jobs}"
        self.keeper.grant(Grant(f"job:{job_id}", SITE, actions={"read"}))
        await self.loop.submit(contract(job_id))
        start = time.perf_counter()
        out = await self.loop.run(
            job_id,
            catalogue(pages),
            target=target,
            expect_identity=identity,
        )
        elapsed = time.perf_counter() - start
        assert (out.state, out.pages_committed) == ("done", pages), out
        return pages / elapsed


async def _side(name: str, tmp: Path, conversations: int, stack: AsyncExitStack) -> Side:
    backend = FakeBackend()
    store = await stack.enter_async_context(SqliteStore(tmp / f"{name}.db"))
    keeper: SessionKeeper[FakePage] = SessionKeeper(
        backend,
        durability=Durability(store=store),
        idle_timeouts=IdleTimeouts(browser=timedelta(hours=6)),
    )
    await stack.enter_async_context(keeper)
    names = [f"chat-{i}" for i in range(conversations)]
    for lo in range(0, conversations, CHUNK):
        chunk = names[lo : lo + CHUNK]
        await asyncio.gather(*(keeper.ensure(c, turn="t0") for c in chunk))
        await asyncio.gather(
            *(keeper.unguarded_page(c, f"https://docs.example/{c}") for c in chunk)
        )
        await keeper.persist()
    # The site's login, owned by a reader conversation; each job reads under its grant.
    await keeper.ensure("reader")
    await keeper.unguarded_page("reader", f"https://{SITE}/login")
    await backend.sign_in(SITE)
    await keeper.record_login("reader", SITE, account="reader")
    return Side(name, keeper, store)


async def run(conversations: int, pages: int, rounds: int) -> dict[str, list[float]]:
    """Per side (``busy``, ``empty``): pages/s of each round's job."""
    rates: dict[str, list[float]] = {"busy": [], "empty": []}
    with tempfile.TemporaryDirectory(prefix="bench-jobscale-") as tmp:
        async with AsyncExitStack() as stack:
            built = time.perf_counter()
            busy = await _side("busy", Path(tmp), conversations, stack)
            print(f"built {conversations:,} conversations in {time.perf_counter() - built:.1f}s")
            empty = await _side("empty", Path(tmp), 0, stack)
            for side in (busy, empty):  # warm-up, not counted
                await side.one_job(pages)
            for r in range(rounds):
                for side in (busy, empty) if r % 2 == 0 else (empty, busy):
                    rates[side.name].append(await side.one_job(pages))
    return rates


def main() -> None:
    """Run the rounds, emit the BENCH record and print the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rates = asyncio.run(run(args.conversations, args.pages, args.rounds))
    busy, empty = rates["busy"], rates["empty"]
    ratios = [b / e for b, e in zip(busy, empty, strict=True)]
    emit(
        "18",
        compared=f"JobLoop pages/s in a keeper holding {args.conversations:,} conversations vs "
        "none (FakeBackend, SqliteStore)",
        ratios=ratios,
        goal=0.9,
        direction=">=",
        detail=f"busy {statistics.median(busy):.0f} pages/s, empty "
        f"{statistics.median(empty):.0f} pages/s (medians; {args.pages}-page jobs)",
    )
    print(
        f"RESULT busy_pages_per_s={statistics.median(busy):.1f} "
        f"empty_pages_per_s={statistics.median(empty):.1f} "
        f"ratio={statistics.median(ratios):.3f} conversations={args.conversations}"
    )


if __name__ == "__main__":
    main()
