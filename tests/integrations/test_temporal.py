"""Browser steps on a real Temporal dev server, real Chromium and LocalSites.

Workers here run in the test's process (the SIGKILL failover, in
``test_temporal_failover.py``, runs them as processes).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ActivityError, ApplicationError

from demos.sites import DemoSites
from session_keeper import PlaywrightBackend
from session_keeper.integrations.temporal import REFUSED, SIGN_IN_QUERY, SIGN_IN_SIGNAL
from tests.conftest import BackendFactory, sigkill
from tests.integrations._temporal_rig import BILLING, CONVERSATION, Rig, browser_rig, eventually

pytestmark = [pytest.mark.chromium, pytest.mark.temporal]


@pytest.fixture
async def rig(
    temporal_server: str, tmp_path: Path, playwright_backend: BackendFactory
) -> AsyncIterator[Rig]:
    """A browser worker (shared and own queue) in this process, on a fresh queue."""
    async with browser_rig(temporal_server, tmp_path / "keeper.db", playwright_backend()) as r:
        yield r


async def test_browser_steps_run_on_the_worker_holding_the_browser_and_a_new_step_hears_nothing_old(
    rig: Rig, sites: DemoSites
) -> None:
    """Two steps go to the worker's own queue; each is told its own facts, the second
    (a new activity id, so a new turn) not the first's news again."""
    await rig.sign_in(sites)
    url = sites.url(BILLING, "/invoices")
    handle = await rig.start([["read_invoices", url], ["read_invoices", url]])
    out = await handle.result()
    assert out["values"] == [["INV-1001", "INV-1002", "INV-1003"]] * 2
    assert out["workers"] == ["w1", "w1"] and out["failovers"] == 0
    first, second = out["facts"]
    assert first["conversation"] == second["conversation"] == CONVERSATION
    assert not second["restarted"] and second["lost"] == []


async def test_a_step_the_keeper_refused_fails_the_workflow_once_never_retried(
    rig: Rig,
) -> None:
    """A navigation the keeper's rules refuse is an answer, not a breakage: the activity
    fails non-retryable with type REFUSED after one attempt, whatever the retry policy."""
    from tests.integrations._temporal_steps import REFUSED_ATTEMPTS

    REFUSED_ATTEMPTS.clear()
    handle = await rig.start([["refused_visit", "chrome://version"]])
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == REFUSED and cause.cause.non_retryable
    assert REFUSED_ATTEMPTS == [1]


async def test_a_retried_attempt_is_told_the_same_restart_and_the_next_step_is_not(
    rig: Rig, sites: DemoSites
) -> None:
    """Chromium is SIGKILLed between steps: the next step's first attempt fails after it
    was told the restart; its retry (same workflow id + activity id) is told it again;
    the step after (a new activity id) hears nothing old."""
    docs = sites.url("docs.example", "/guide")
    async with rig.pool.hold(CONVERSATION) as keeper:
        await keeper.ensure(CONVERSATION)
        await keeper.tab(CONVERSATION, docs)
        keeper.mark_verified(CONVERSATION)
        backend = keeper.backend
        assert isinstance(backend, PlaywrightBackend)
        await sigkill(backend.current)
    handle = await rig.start([["flaky_visit", docs], ["flaky_visit", docs]])
    out = await handle.result()
    assert out["values"] == [2, 2]  # each step's first attempt failed and was retried
    told, after = out["facts"]
    assert told["restarted"] is True
    assert [f"{x['kind']}:{x['name']}" for x in told["lost"]] == [f"tab:{CONVERSATION}"]
    assert after["restarted"] is False and after["lost"] == []
    assert out["told"] == [told]


async def test_a_lost_login_becomes_a_wait_for_a_person_answered_by_the_sign_in_signal(
    rig: Rig, sites: DemoSites
) -> None:
    """Billing signs the agent out server-side: the step fails non-retryably, the workflow
    waits (its query says for what); a signal with nobody signed in does not end the wait
    for real (the re-run step re-checks), a recorded sign-in then a signal does."""
    await rig.sign_in(sites)
    sites.expire_sessions(BILLING)
    url = sites.url(BILLING, "/invoices")
    handle = await rig.start([["read_invoices", url]])

    async def waiting() -> list[dict[str, str]]:
        asked: list[dict[str, str]] = await handle.query(SIGN_IN_QUERY)
        return asked

    await eventually(waiting, "the workflow waits for a sign-in")
    assert await waiting() == [{"conversation": CONVERSATION, "site": BILLING}]
    async with rig.pool.hold(CONVERSATION) as keeper:
        assert BILLING in {x.name for x in keeper.lost_logins()}  # reported signed out

    # A signal is a hint: nobody signed in, so the re-run step asks again.
    await handle.signal(SIGN_IN_SIGNAL, {"conversation": CONVERSATION, "site": BILLING})
    await eventually(lambda: _sign_ins_asked(handle, 2), "the re-run step asks for a sign-in again")
    await rig.sign_in(sites)
    await handle.signal(SIGN_IN_SIGNAL, {"conversation": CONVERSATION, "site": BILLING})
    out = await handle.result()
    assert out["values"] == [["INV-1001", "INV-1002", "INV-1003"]]
    assert out["sign_ins"] == [{"conversation": CONVERSATION, "site": BILLING}] * 2
    told = out["facts"][0]
    assert [f"{x['kind']}:{x['name']}" for x in told["lost"]] == [f"login:{BILLING}"]


async def _sign_ins_asked(handle: WorkflowHandle[Any, Any], n: int) -> bool:
    history = [e async for e in handle.fetch_history_events()]
    failed = [e for e in history if e.HasField("activity_task_failed_event_attributes")]
    return len(failed) >= n


async def test_a_write_run_again_by_a_workflow_reset_is_read_back_never_submitted_twice(
    rig: Rig, sites: DemoSites
) -> None:
    """The refund is made, then the workflow is reset to its first workflow task: the new
    run schedules the step under the same activity id as attempt 1, so Temporal calls it
    the write's first, but it finds the intent the first run recorded in the keeper's
    store, reads back and returns billing's refund. Billing's log: one POST, one refund."""
    await rig.sign_in(sites)
    before = sites.refund_count()
    sites.clear_requests()
    handle = await rig.start(
        [["refund", {"url": sites.url(BILLING, "/invoices"), "amount": "2.5"}]]
    )
    first = await handle.result()
    assert first["values"][0]["how"] == "submitted"
    history = [e async for e in handle.fetch_history_events()]
    task_done = next(
        e.event_id for e in history if e.HasField("workflow_task_completed_event_attributes")
    )
    reset = await rig.client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=rig.client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=handle.id),
            reason="run the refund's step again",
            workflow_task_finish_event_id=task_done,
            request_id=uuid.uuid4().hex,
        )
    )
    out = await rig.client.get_workflow_handle(handle.id, run_id=reset.run_id).result()
    (value,) = out["values"]
    assert value == {"refund_id": first["values"][0]["refund_id"], "how": "readback"}
    posts = [r for r in sites.requests(BILLING) if r.method == "POST" and r.path == "/refund"]
    assert [parse_qs(p.query)["idempotency_key"] for p in posts] == [
        [f"{handle.id}:browser-1:refund"]
    ]
    assert sites.refund_count() == before + 1


async def test_a_write_whose_answer_was_lost_is_reconciled_by_readback_never_resubmitted(
    rig: Rig, sites: DemoSites
) -> None:
    """The refund reaches billing but its answer is lost: the step reads back under the
    idempotency key (workflow id + activity id) and returns the refund; billing's own log
    shows one refund request and one refund."""
    await rig.sign_in(sites)
    before = sites.refund_count()
    sites.clear_requests()
    arg = {"url": sites.url(BILLING, "/invoices"), "amount": "7.25", "lose_answer": True}
    handle = await rig.start([["refund", arg]])
    out = await handle.result()
    (value,) = out["values"]
    assert value["how"] == "readback"
    posts = [r for r in sites.requests(BILLING) if r.method == "POST" and r.path == "/refund"]
    assert len(posts) == 1
    assert sites.refund_count() == before + 1
    (post,) = posts
    assert parse_qs(post.query)["idempotency_key"] == [f"{handle.id}:browser-1:refund"]
    with contextlib.suppress(Exception):
        await handle.terminate()
