"""A fake world for job-loop tests: FakeBackend, FakeClock, a real SqliteStore, a fake catalogue."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from session_keeper import (
    Accepted,
    Grant,
    JobContract,
    JobLoop,
    SessionKeeper,
    SqliteStore,
    StepContext,
)
from session_keeper.testing import FakeBackend, FakeClock, FakePage

SITE = "catalogue.example"
PAGES = 5
PER_PAGE = 3


def truth() -> dict[str, dict[str, str]]:
    """Every record of the fake catalogue."""
    return {
        f"R{p}-{i}": {"name": f"item {p}.{i}", "page": str(p)}
        for p in range(1, PAGES + 1)
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
            for rid, data in truth().items()
            if data["page"] == str(page_no)
        ]
        nxt = f"page-{page_no + 1}" if page_no < PAGES else None
        return ctx.accept(records, nxt, page_identity=f"catalogue page {page_no}")


@attrs.define
class World:
    """Everything a job-loop test touches."""

    clock: FakeClock
    backend: FakeBackend
    keeper: SessionKeeper[FakePage]
    store: SqliteStore
    sleeps: list[float]
    path: Path

    async def sign_in(self, conversation: str = "job:audit", *, persistent: bool = False) -> None:
        """The human signs the job's conversation in to the catalogue."""
        await self.keeper.ensure(conversation)
        await self.backend.sign_in(SITE, persistent=persistent)
        await self.keeper.record_login(conversation, SITE, account="reader")

    def loop(self, worker: str = "w1", **kw: Any) -> JobLoop[FakePage]:
        """A job loop on this world, sleeping on the fake clock."""
        kw.setdefault("lease_ttl", timedelta(seconds=30))
        kw.setdefault("sleep", self.sleep)
        return JobLoop(self.keeper, self.store, worker, **kw)

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


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    """A signed-out world; call ``world.sign_in()`` to give the job its login."""
    clock = FakeClock()
    backend = FakeBackend()
    async with SqliteStore(tmp_path / "jobs.db", clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            store=store,
            grants=[Grant("job:audit", SITE, actions={"read"})],
            idle_timeout=timedelta(hours=1),
        )
        async with keeper:
            yield World(clock, backend, keeper, store, [], tmp_path / "jobs.db")


RunFn = Callable[..., Any]
