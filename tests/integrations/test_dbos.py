"""Browser steps on a real DBOS (its system database on SQLite, then on the tests'
PostgreSQL), real Chromium and LocalSites.

DBOS runs in the test's process here (the SIGKILL recovery, in
``test_dbos_recovery.py``, runs it in processes).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from dbos import DBOS, SetWorkflowID

from demos.sites import DemoSites
from session_keeper import PlaywrightBackend
from session_keeper.errors import InvalidArgument, InvalidArgumentType, UsageError
from session_keeper.integrations.dbos import (
    BrowserSteps,
    BrowserWorker,
    WorkflowBrowser,
    send_sign_in,
    waiting_for_sign_in,
)
from tests.conftest import BackendFactory, sigkill
from tests.integrations._dbos_rig import BILLING, CONVERSATION, Rig, dbos_rig
from tests.integrations._dbos_steps import STEPS, release
from tests.integrations._faults import refund_posts, until

pytestmark = [pytest.mark.dbos]


@pytest.fixture
async def rig(
    system_database: str, tmp_path: Path, playwright_backend: BackendFactory
) -> AsyncIterator[Rig]:
    """DBOS launched on ``system_database`` with this process's BrowserWorker serving."""
    async with dbos_rig(system_database, tmp_path / "keeper.db", playwright_backend()) as made:
        yield made


async def eventually(check: Callable[[], Any], what: str) -> None:
    """Wait until ``await check()`` is truthy, 30 s at most (a failure names ``what``)."""
    deadline = asyncio.get_running_loop().time() + 30
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.1)


def labels(facts: dict[str, Any]) -> list[str]:
    """``kind:name`` of each loss the facts report."""
    return [f"{x['kind']}:{x['name']}" for x in facts["lost"]]


@pytest.mark.chromium
async def test_a_retried_dbos_step_is_told_the_same_restart_and_the_next_step_is_not(
    rig: Rig, sites: DemoSites
) -> None:
    """Chromium is SIGKILLed between steps: the next step's first attempt is told the
    restart and fails; DBOS's retry (same workflow id + step id) is told it again; the
    step after (a new step id, so a new turn) hears nothing old."""
    docs = sites.url("docs.example", "/guide")
    async with rig.pool.hold(CONVERSATION) as keeper:
        await keeper.ensure(CONVERSATION)
        await keeper.tab(CONVERSATION, docs)
        keeper.mark_verified(CONVERSATION)
        backend = keeper.backend
        assert isinstance(backend, PlaywrightBackend)
        await sigkill(backend.current)
    handle = await rig.start([["dbos_flaky_visit", docs], ["dbos_flaky_visit", docs]])
    out = await handle.get_result()
    assert out["values"] == [2, 2]  # each step's first attempt failed and was retried
    told, after = out["facts"]
    assert told["restarted"] is True
    assert labels(told) == [f"tab:{CONVERSATION}"]
    assert after["restarted"] is False and after["lost"] == []
    assert out["told"] == [told]
    assert out["workers"] == ["w1", "w1"]


@pytest.mark.chromium
async def test_a_lost_login_on_dbos_waits_on_recv_until_a_recorded_sign_in_is_sent(
    rig: Rig, sites: DemoSites
) -> None:
    """Billing signs the agent out server-side: the step fails without a retry and the
    workflow waits (its event says for what); a message with nobody signed in does not end
    the wait for real (the re-run step re-checks), a recorded sign-in then a message does,
    and the re-run step is the same turn, told the same facts."""
    await rig.sign_in(sites)
    sites.expire_sessions(BILLING)
    url = sites.url(BILLING, "/invoices")
    handle = await rig.start([["dbos_read_invoices", url]])
    wanted = [{"conversation": CONVERSATION, "site": BILLING}]

    async def waiting() -> bool:
        now = await waiting_for_sign_in(handle.workflow_id)
        return [{k: w[k] for k in ("conversation", "site")} for w in now] == wanted

    await eventually(waiting, "the workflow waits for a sign-in")
    async with rig.pool.hold(CONVERSATION) as keeper:
        assert BILLING in {x.name for x in keeper.lost_logins()}  # reported signed out

    async def failed_runs() -> int:
        steps = await DBOS.list_workflow_steps_async(handle.workflow_id)
        return sum(
            1 for s in steps if s["function_name"].endswith("dbos_read_invoices") and s["error"]
        )

    assert await failed_runs() == 1  # a lost login is not retried
    # A message is a hint: nobody signed in, so the re-run step asks again.
    await send_sign_in(handle.workflow_id, CONVERSATION, BILLING)
    await eventually(lambda: _at_least(failed_runs, 2), "the re-run step asks for a sign-in again")
    await eventually(waiting, "the workflow waits again")
    await rig.sign_in(sites)
    await send_sign_in(handle.workflow_id, CONVERSATION, BILLING)
    out = await handle.get_result()
    assert out["values"] == [["INV-1001", "INV-1002", "INV-1003"]]
    assert out["sign_ins"] == wanted * 2
    assert labels(out["facts"][0]) == [f"login:{BILLING}"]
    assert await waiting_for_sign_in(handle.workflow_id) == []


#: A second conversation on the same profile, for waits side by side.
OTHER = "billing-clerk"


@DBOS.workflow()
async def _side_by_side(url: str) -> list[Any]:
    """Both conversations read billing's invoices at once, each in its WorkflowBrowser."""
    step = STEPS_BY_NAME["dbos_read_invoices"]
    done = await asyncio.gather(
        *(WorkflowBrowser(c).step(step, url) for c in (CONVERSATION, OTHER))
    )
    return [r.value for r in done]


@pytest.mark.chromium
async def test_the_sign_in_waits_of_a_dbos_workflows_conversations_are_listed_together(
    rig: Rig, sites: DemoSites
) -> None:
    """Two conversations of one workflow wait for a sign-in at once: the workflow's one
    event lists both waits (kept by the process's BrowserWorker for all its
    WorkflowBrowsers), a wait answered leaves the other listed, and none is left once
    both are answered."""
    with SetWorkflowID(f"side-{uuid.uuid4().hex[:8]}"):
        handle = await DBOS.start_workflow_async(_side_by_side, sites.url(BILLING, "/invoices"))

    def waiting_for(conversations: set[str]) -> Callable[[], Any]:
        async def check() -> bool:
            now = await waiting_for_sign_in(handle.workflow_id)
            return {w["conversation"] for w in now} == conversations and len(now) == len(
                conversations
            )

        return check

    await eventually(waiting_for({CONVERSATION, OTHER}), "both conversations wait")
    await rig.sign_in(sites)
    await send_sign_in(handle.workflow_id, CONVERSATION, BILLING)
    await eventually(waiting_for({OTHER}), "the other conversation still waits")
    await send_sign_in(handle.workflow_id, OTHER, BILLING)
    assert await handle.get_result() == [["INV-1001", "INV-1002", "INV-1003"]] * 2
    assert await waiting_for_sign_in(handle.workflow_id) == []


async def _at_least(count: Callable[[], Any], n: int) -> bool:
    return bool(await count() >= n)


@pytest.mark.chromium
async def test_a_dbos_write_whose_answer_was_lost_is_reconciled_by_readback_never_resubmitted(
    rig: Rig, sites: DemoSites
) -> None:
    """The refund reaches billing but its answer is lost: the step's next attempt reads
    back under the idempotency key (workflow id + step id) and returns the refund;
    billing's own log shows one refund request and one refund."""
    await rig.sign_in(sites)
    before = sites.refund_count()
    sites.clear_requests()
    arg = {"url": sites.url(BILLING, "/invoices"), "amount": "7.25", "lose_answer": True}
    handle = await rig.start([["dbos_refund", arg]])
    out = await handle.get_result()
    (value,) = out["values"]
    assert value["how"] == "readback"
    posts = [r for r in sites.requests(BILLING) if r.method == "POST" and r.path == "/refund"]
    assert len(posts) == 1
    assert sites.refund_count() == before + 1
    (post,) = posts
    assert parse_qs(post.query)["idempotency_key"] == [f"{handle.workflow_id}:1:refund"]


@pytest.mark.chromium
async def test_a_dbos_write_resumed_after_a_cancel_is_read_back_never_submitted_twice(
    rig: Rig, sites: DemoSites
) -> None:
    """The refund reaches billing, then the workflow is cancelled before DBOS recorded the
    step, and resumed: DBOS counts its recoveries from 0 again, so the resumed step calls
    itself the write's first attempt, but it finds the intent the cancelled one recorded
    in the keeper's store, reads back and returns billing's refund. Billing's own log
    shows one refund POST and one refund."""
    await rig.sign_in(sites)
    before = sites.refund_count()
    sites.clear_requests()
    # The cancelled attempt dwells after billing answered (until the resumed one is done,
    # 8 s at most), so the resumed one runs the step while it is still unrecorded.
    dwell = f"cancelled-{uuid.uuid4().hex[:8]}"
    arg = {
        "url": sites.url(BILLING, "/invoices"),
        "amount": "4.75",
        "pause_after": 8.0,
        "released_by": dwell,
    }
    handle = await rig.start([["dbos_refund", arg]])
    workflow = handle.workflow_id
    await until(
        lambda: sum(refund_posts(sites, BILLING, workflow + ":").values()) >= 1,
        "the refund reached billing",
    )
    await DBOS.cancel_workflow_async(workflow)
    resumed = await DBOS.resume_workflow_async(workflow)
    try:
        out = await asyncio.wait_for(resumed.get_result(), 120)
    finally:
        release(dwell)
    # The cancelled execution ends too (its step wakes, then adopts the recorded outcome).
    await asyncio.wait_for(handle.get_result(), 120)
    (value,) = out["values"]
    assert value["how"] == "readback"
    posts = [r for r in sites.requests(BILLING) if r.method == "POST" and r.path == "/refund"]
    assert [parse_qs(p.query)["idempotency_key"] for p in posts] == [[f"{workflow}:1:refund"]]
    assert sites.refund_count() == before + 1


@pytest.fixture
def bare_dbos(tmp_path: Path) -> Iterator[None]:
    """DBOS launched on a fresh SQLite system database, with no browser worker."""
    DBOS(config={"name": "sk-dbos-bare", "system_database_url": f"sqlite:///{tmp_path}/d.db"})
    DBOS.launch()
    try:
        yield
    finally:
        DBOS.destroy()


@DBOS.workflow()
async def _unserved(url: str) -> Any:
    return (await WorkflowBrowser(CONVERSATION).step(STEPS_BY_NAME["dbos_flaky_visit"], url)).value


STEPS_BY_NAME = {made.name: made for made in STEPS}


async def test_a_browser_step_with_no_worker_in_its_process_fails_at_once_with_a_usage_error(
    bare_dbos: None,
) -> None:
    """No BrowserWorker serves the steps: the workflow fails with a UsageError naming the
    step, not after DBOS's retries (nothing a retry mends)."""
    with SetWorkflowID(f"unserved-{uuid.uuid4().hex[:8]}"):
        handle = await DBOS.start_workflow_async(_unserved, "http://127.0.0.1:9/")
    with pytest.raises(UsageError, match="dbos_flaky_visit"):
        await handle.get_result()
    steps = await DBOS.list_workflow_steps_async(handle.workflow_id)
    assert len(steps) == 1


async def test_bad_dbos_browser_arguments_are_typed_errors(tmp_path: Path) -> None:
    """A pool that is not a KeeperPool, retries that cannot be, a step outside a workflow:
    each a typed error, before anything runs."""
    with pytest.raises(InvalidArgumentType):
        BrowserWorker(object(), worker_id="w", steps=STEPS)  # type: ignore[arg-type]
    steps = BrowserSteps()
    with pytest.raises(InvalidArgument):
        steps.step("x", max_attempts=0)
    with pytest.raises(InvalidArgument):
        steps.step("x", backoff_rate=0.5)
    with pytest.raises(InvalidArgument):
        steps.step("x", interval=timedelta(seconds=-1))
    with pytest.raises(UsageError):
        await WorkflowBrowser(CONVERSATION).step(STEPS_BY_NAME["dbos_flaky_visit"], "x")
    with pytest.raises(InvalidArgumentType):
        await WorkflowBrowser(CONVERSATION).step("dbos_flaky_visit")  # type: ignore[arg-type]
