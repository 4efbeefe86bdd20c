"""A durable step's write, engine aside: the intent in the Store, not the engine's count of
attempts, decides whether it may submit unread (fake browser, SQLite store).

The real engines' guarantees are ``test_dbos.py`` (a resume after a cancel) and
``test_temporal.py`` (a reset); these pin the rule itself, fast.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper.errors import ProfileLeaseLost, WriteOutcomeUnknown
from session_keeper.integrations._steps import BrowserStep
from session_keeper.jobs import Readback
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

CONVERSATION = "billing-agent"
URL = "https://billing.example/invoices"
TTL = timedelta(seconds=30)


class Billing:
    """A destination that counts what it was sent and answers readbacks from it."""

    def __init__(self) -> None:
        self.posts: list[str] = []
        self.readbacks = 0

    async def submit(self, page: Any, key: str) -> Mapping[str, object]:
        self.posts.append(key)
        return {"refund_id": f"R-{len(self.posts)}", "how": "submitted"}

    async def readback(self, page: Any, key: str) -> Readback:
        self.readbacks += 1
        if key in self.posts:
            return Readback(status="applied", outcome={"refund_id": "R-1", "how": "readback"})
        return Readback(status="absent")


@pytest.fixture
def clock() -> FakeClock:
    """The clock the store (lease expiry), the pool and the browser read."""
    return FakeClock()


@pytest.fixture
async def pool(tmp_path: Path, clock: FakeClock) -> AsyncIterator[KeeperPool[Any]]:
    """A one-profile pool on a fake browser, leasing in a SQLite store."""
    async with (
        SqliteStore(tmp_path / "k.db", clock=clock) as store,
        KeeperPool(
            {"p0": FakeBackend(clock=clock)}, store=store, owner="w1", lease_ttl=TTL, clock=clock
        ) as opened,
    ):
        yield opened


def _step(pool: KeeperPool[Any], keeper: Any, facts: Any, *, fresh: bool) -> BrowserStep[Any]:
    """Step 3 of workflow ``run-1`` on ``keeper``, whose writes confirm through ``pool``."""
    return BrowserStep(
        keeper,
        facts,
        CONVERSATION,
        worker_id="w1",
        workflow_id="run-1",
        step_id="3",
        fresh=fresh,
        confirm_write=lambda idem: pool.confirm_write(CONVERSATION, idem),
    )


async def _write(
    pool: KeeperPool[Any], billing: Billing, *, fresh: bool, idempotent: bool = True
) -> Mapping[str, object]:
    """Write ``refund`` as step 3 of workflow ``run-1``, an attempt ``fresh`` or not."""
    async with pool.hold(CONVERSATION) as keeper:
        facts = await keeper.ensure(CONVERSATION, turn="run-1/3")
        await keeper.unguarded_page(CONVERSATION, URL)
        step = _step(pool, keeper, facts, fresh=fresh)
        return await step.write(
            "refund", billing.submit, billing.readback, url=URL, idempotent=idempotent
        )


async def test_an_attempt_its_engine_calls_first_reads_back_when_an_intent_is_recorded(
    pool: KeeperPool[Any],
) -> None:
    """The first attempt submits unread; a second one the engine also calls first (its
    count started again) finds the intent, reads back and returns what was applied."""
    billing = Billing()
    assert (await _write(pool, billing, fresh=True))["how"] == "submitted"
    assert billing.readbacks == 0
    assert (await _write(pool, billing, fresh=True))["how"] == "readback"
    assert billing.posts == ["run-1:3:refund"] and billing.readbacks == 1


async def test_an_intent_whose_write_never_left_is_read_back_then_submitted_once(
    pool: KeeperPool[Any],
) -> None:
    """An intent recorded but nothing sent (the attempt died between the two): the next
    attempt reads ``absent`` and submits under the same key, once; a destination that
    does not deduplicate is a write for a person to reconcile instead."""
    billing = Billing()
    assert await pool.ensure(CONVERSATION) is not None
    assert await pool.confirm_write(CONVERSATION, "run-1:3:refund") is True
    with pytest.raises(WriteOutcomeUnknown):
        await _write(pool, billing, fresh=True, idempotent=False)
    assert billing.posts == []
    assert (await _write(pool, billing, fresh=True))["how"] == "submitted"
    assert billing.posts == ["run-1:3:refund"] and billing.readbacks == 2


async def test_a_step_whose_lease_lapsed_records_no_intent_and_sends_nothing(
    pool: KeeperPool[Any], clock: FakeClock
) -> None:
    """A fenced attempt (ProfileLeaseLost) leaves no intent behind: the next holder's
    attempt is the first, submits unread, once."""
    billing = Billing()
    async with pool.hold(CONVERSATION) as keeper:
        facts = await keeper.ensure(CONVERSATION, turn="run-1/3")
        await keeper.unguarded_page(CONVERSATION, URL)
        step = _step(pool, keeper, facts, fresh=True)
        clock.advance(TTL)  # the process stalled past its lease
        with pytest.raises(ProfileLeaseLost):
            await step.write("refund", billing.submit, billing.readback, url=URL)
    assert billing.posts == [] and billing.readbacks == 0
    assert (await _write(pool, billing, fresh=True))["how"] == "submitted"
    assert billing.readbacks == 0
