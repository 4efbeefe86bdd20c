"""A fake world for job-loop tests: FakeBackend, FakeClock, a real SqliteStore, a fake catalogue."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from session_keeper import Durability, Grant, IdleTimeouts, SessionKeeper
from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
from session_keeper.stores import SqliteStore, Store
from session_keeper.testing import (
    FakeBackend,
    FakeClock,
    FakePage,
    JobFaultPoint,
    job_loop_testing,
)

SITE = "catalogue.example"
PAGES = 5
PER_PAGE = 3


def truth(pages: int = PAGES) -> dict[str, dict[str, str]]:
    """Every record of the fake catalogue (of ``pages`` pages)."""
    return {
        f"R{p}-{i}": {"name": f"item {p}.{i}", "page": str(p)}
        for p in range(1, pages + 1)
        for i in range(PER_PAGE)
    }


def target(cursor: str | None) -> str:
    """The URL of a cursor's page."""
    return f"https://{SITE}/items?page={(cursor or 'page-1').removeprefix('page-')}"


def identity(cursor: str | None) -> str:
    """What the page for a cursor calls itself."""
    return f"catalogue page {(cursor or 'page-1').removeprefix('page-')}"


@attrs.define
class FakeCatalogue:
    """A step over the fake catalogue, with knobs for the faults tests inject."""

    calls: int = 0
    #: Exceptions to raise on the next calls, in order.
    raise_next: list[BaseException] = attrs.field(factory=list)
    #: Navigate somewhere else before observing, on the next N calls.
    wander_next: int = 0
    wander_to: str = "https://catalogue.example/items?page=99"
    #: How many pages the catalogue has.
    pages: int = PAGES
    #: How often each record was extracted (read off a page and handed to the loop).
    extracted: Counter[str] = attrs.field(factory=Counter)

    async def step(self, ctx: StepContext[FakePage]) -> Accepted:
        self.calls += 1
        if self.raise_next:
            raise self.raise_next.pop(0)
        if self.wander_next:
            self.wander_next -= 1
            await ctx.page.goto(self.wander_to)
        page_no = int(ctx.page.url.rsplit("=", 1)[1])
        records = [
            {"source_record_id": rid, **data}
            for rid, data in truth(self.pages).items()
            if data["page"] == str(page_no)
        ]
        self.extracted.update(r["source_record_id"] for r in records)
        nxt = f"page-{page_no + 1}" if page_no < self.pages else None
        return ctx.accept(records, nxt, page_identity=f"catalogue page {page_no}")


@attrs.define
class FakeTimers:
    """Timers on the fake clock, for the lease heartbeat: they fire only in :meth:`advance`.

    ``frozen`` models a stalled process (a GC pause, a blocked event loop): the clock
    moves on but no timer fires.
    """

    clock: FakeClock
    waiting: list[tuple[float, asyncio.Future[None], asyncio.Task[Any]]] = attrs.field(factory=list)
    frozen: bool = False
    fired: int = 0

    async def sleep(self, seconds: float) -> None:
        """Wait until :meth:`advance` moves the fake clock ``seconds`` further."""
        task = asyncio.current_task()
        assert task is not None
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append((self.clock.monotonic() + seconds, fut, task))
        await fut

    async def advance(self, seconds: float) -> None:
        """Move the clock one second at a time, letting every due timer's owner run until
        it sleeps again or ends (so a heartbeat's store call has landed)."""
        whole, rest = divmod(seconds, 1.0)
        for d in [1.0] * int(whole) + ([rest] if rest else []):
            await asyncio.sleep(0)  # a task that is about to sleep gets to register first
            self.clock.advance(d)
            if not self.frozen:
                await self._fire()

    async def _fire(self) -> None:
        now = self.clock.monotonic()
        due = [w for w in self.waiting if w[0] <= now and not w[1].done()]
        self.waiting = [w for w in self.waiting if w[0] > now and not w[1].done()]
        for _, fut, _ in due:
            fut.set_result(None)
            self.fired += 1
        for _, _, task in due:
            # Bounded: a woken owner that neither sleeps again nor ends is a bug to report.
            for _ in range(100_000):
                if task.done() or any(w[2] is task for w in self.waiting):
                    break
                await asyncio.sleep(0)
            else:
                raise AssertionError("a woken timer's owner neither slept again nor ended")


@attrs.define
class World:
    """Everything a job-loop test touches."""

    clock: FakeClock
    backend: FakeBackend
    keeper: SessionKeeper[FakePage]
    store: Store
    sleeps: list[float]
    path: Path
    timers: FakeTimers
    #: Which store the world runs on (``"sqlite"`` or ``"postgres"``).
    kind: str = "sqlite"
    #: ``time.perf_counter()`` when the trial injected its fault (time to recover).
    fault_at: float | None = None

    async def sign_in(self, conversation: str = "job:audit", *, persistent: bool = False) -> None:
        """The human signs the job's conversation in to the catalogue."""
        await self.keeper.ensure(conversation)
        await self.backend.sign_in(SITE, persistent=persistent)
        await self.keeper.record_login(conversation, SITE, account="reader")

    def loop(
        self,
        worker: str = "w1",
        *,
        fault_hooks: Mapping[JobFaultPoint, Callable[[], Awaitable[None]]] | None = None,
        **kw: Any,
    ) -> JobLoop[FakePage]:
        """A job loop on this world, sleeping on the fake clock (its testing mode), with
        ``fault_hooks`` at its crash points; ``kw`` goes to the constructor."""
        kw.setdefault("lease_ttl", timedelta(seconds=30))
        loop = JobLoop(self.keeper, self.store, worker, **kw)
        job_loop_testing(
            loop, sleep=self.sleep, heartbeat_sleep=self.timers.sleep, fault_hooks=fault_hooks
        )
        return loop

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.clock.advance(seconds)


def contract(**kw: Any) -> JobContract:
    """The audit job's contract."""
    kw.setdefault("job_id", "audit")
    kw.setdefault("site", SITE)
    kw.setdefault("allowed_origins", (f"https://{SITE}",))
    kw.setdefault("required_fields", ("name",))
    kw.setdefault("start_cursor", "page-1")
    return JobContract(**kw)


@asynccontextmanager
async def make_world(
    store: Store, clock: FakeClock, path: Path, kind: str, jobs: tuple[str, ...] = ("audit",)
) -> AsyncIterator[World]:
    """A signed-out world on an unopened ``store`` (opened and closed here), with a read
    grant on the catalogue for each of ``jobs``' conversations."""
    backend = FakeBackend()
    async with store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant(f"job:{job}", SITE, actions={"read"}) for job in jobs],
            idle_timeouts=IdleTimeouts(browser=timedelta(hours=1)),
        )
        async with keeper:
            yield World(clock, backend, keeper, store, [], path, FakeTimers(clock), kind)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    """A signed-out world; call ``world.sign_in()`` to give the job its login."""
    clock = FakeClock()
    path = tmp_path / "jobs.db"
    async with make_world(SqliteStore(path, clock=clock), clock, path, "sqlite") as w:
        yield w


RunFn = Callable[..., Any]
