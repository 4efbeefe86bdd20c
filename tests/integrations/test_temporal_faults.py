"""The fault matrix on Temporal: a real dev server, real Chromium, the test sites' own logs.

Each row injects its fault at a point drawn with the session's seed (``FAULT_TRIALS``
trials: a few in CI, 20 under ``make chaos``), lets the workflow finish, and counts
against what the site served or recorded, not what the workflow says of itself
(``_faults.py`` says what each count is and holds each row's counting and assertions).
Each trial appends its counts to ``FAULT_REPORT`` (``row="engine"``) for RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from demos.sites import DemoSites
from session_keeper.integrations.temporal import SIGN_IN_QUERY, SIGN_IN_SIGNAL
from session_keeper.stores import SqliteStore
from tests._chaos import sample
from tests.conftest import BackendFactory, sigkill
from tests.integrations._faults import (
    LEASE_MS,
    PAGES,
    STALL_SPACE,
    WRITE_SPACE,
    Thief,
    ids,
    lease_row,
    refund_steps,
    served,
    stall_arg,
    until,
    walk_row,
    write_row,
)
from tests.integrations._pool_rig import beside
from tests.integrations._temporal_flows import BrowserRun
from tests.integrations._temporal_rig import (
    BILLING,
    CONVERSATION,
    Rig,
    browser_rig,
    ready,
    spawn,
)

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.temporal,
    pytest.mark.slow,
    pytest.mark.chaos,
    pytest.mark.timeout(240),
]

ENGINE = "temporal"
DOCS = "docs.example"


@contextlib.asynccontextmanager
async def person(
    handle: WorkflowHandle[Any, Any], rig: Rig, sites: DemoSites
) -> AsyncIterator[list[float]]:
    """A person who, whenever the workflow waits for a sign-in, signs in through the
    worker's browser (no turn of the workflow's) and sends the signal. Yields the times
    (``perf_counter``) each sign-in was asked for."""
    asked: list[float] = []

    async def answer() -> None:
        while True:
            waiting = await handle.query(SIGN_IN_QUERY)
            if waiting:
                asked.append(time.perf_counter())
                await rig.sign_in_once_free(sites)
                await handle.signal(SIGN_IN_SIGNAL, {"conversation": CONVERSATION, "site": BILLING})
                while True:  # until the re-run step took the sign-in
                    if not await handle.query(SIGN_IN_QUERY):
                        break
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.1)

    async with beside(answer()):
        yield asked


async def finished(handle: WorkflowHandle[Any, Any], within: float = 150) -> dict[str, Any]:
    """The workflow's result; on a timeout, the failures its history holds (to say why)."""
    try:
        out: dict[str, Any] = await asyncio.wait_for(handle.result(), within)
    except TimeoutError:
        failures = [
            str(e.activity_task_failed_event_attributes.failure.message)
            async for e in handle.fetch_history_events()
            if e.HasField("activity_task_failed_event_attributes")
        ]
        raise AssertionError(f"the workflow never finished; step failures: {failures}") from None
    return out


# -- worker SIGKILL mid-step ----------------------------------------------------------

WORKER_KILLS = sample("temporal-worker-kill", range(2, PAGES - 2))


@pytest.mark.parametrize("at", WORKER_KILLS, ids=ids(WORKER_KILLS))
async def test_a_worker_sigkilled_mid_walk_loses_nothing_and_its_successor_is_told_once(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    chromium_path: str,
    workers: list[subprocess.Popen[str]],
    at: int,
) -> None:
    """The worker holding the browser (and its Chromium) is SIGKILLed after the site
    served page ``at``: the other worker takes the profile's lease, resumes from the
    checkpoint; every page read once in the result, the loss told to one step."""
    queue = f"browser-{uuid.uuid4().hex[:8]}"
    common = [str(tmp_path / "k.db"), str(tmp_path / "profile"), sites.host_resolver_rules]
    procs = {w: spawn([temporal_server, queue, w, *common, chromium_path]) for w in ("w1", "w2")}
    workers.extend(procs.values())
    for proc in procs.values():
        ready(proc)
    client = await Client.connect(temporal_server)
    tag = uuid.uuid4().hex[:6]
    walk = {"base": sites.url(DOCS, f"/guide?walk={tag}"), "pages": PAGES, "pause": 0.15}
    after = {"base": sites.url(DOCS, f"/guide?walk={tag}-after"), "pages": 1}
    plan = {
        "conversation": "auditor",
        "queue": queue,
        "steps": [["walk_pages", walk], ["walk_pages", after]],
        "heartbeat_s": 3,
        "worker_timeout_s": 4,
    }
    handle = await client.start_workflow(BrowserRun.run, plan, id=f"walk-{tag}", task_queue=queue)
    await until(lambda: len(served(sites, DOCS, tag)) >= at, "the walk reached the kill point")
    async with SqliteStore(tmp_path / "k.db") as store:
        lease = await store.profile_lease("p0")
    assert lease is not None
    os.killpg(procs[lease.owner].pid, signal.SIGKILL)  # the holder, with its Chromium
    killed_at = time.perf_counter()
    procs[lease.owner].communicate()
    out = await finished(handle)
    recover_s = time.perf_counter() - killed_at
    first = out["values"][0]
    walk_row(
        ENGINE, "worker_sigkill", out, read=first["read"], seen=served(sites, DOCS, tag),
        lost="tab:auditor", recover_s=recover_s, failovers=out["failovers"],
        resumed_at=first["start"],
    )  # fmt: skip
    other = "w2" if lease.owner == "w1" else "w1"
    assert out["facts"][0]["restarted"] is True, out["facts"]
    assert out["failovers"] == 1 and out["workers"] == [other, other]


# -- browser SIGKILL mid-step ---------------------------------------------------------

BROWSER_KILLS = sample("temporal-browser-kill", range(2, PAGES - 2))


@pytest.mark.parametrize("at", BROWSER_KILLS, ids=ids(BROWSER_KILLS))
async def test_chromium_sigkilled_mid_walk_loses_nothing_and_the_retry_is_told_once(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    at: int,
) -> None:
    """Chromium is SIGKILLed after the site served page ``at``: the activity's retry
    relaunches it, is told the restart (the next step is not) and resumes from the
    checkpoint; every page read once in the result."""
    tag = uuid.uuid4().hex[:6]
    walk = {"base": sites.url(DOCS, f"/guide?walk={tag}"), "pages": PAGES, "pause": 0.1}
    after = {"base": sites.url(DOCS, f"/guide?walk={tag}-after"), "pages": 1}
    async with browser_rig(temporal_server, tmp_path / "k.db", playwright_backend()) as rig:
        handle = await rig.start([["walk_pages", walk], ["walk_pages", after]])
        await until(lambda: len(served(sites, DOCS, tag)) >= at, "the walk reached the kill point")
        killed_at = time.perf_counter()
        await sigkill(rig.chromium().current)
        out = await finished(handle)
    recover_s = time.perf_counter() - killed_at
    first = out["values"][0]
    walk_row(
        ENGINE, "browser_sigkill", out, read=first["read"], seen=served(sites, DOCS, tag),
        lost=f"tab:{CONVERSATION}", recover_s=recover_s,
    )  # fmt: skip
    assert out["facts"][0]["restarted"] is True, out["facts"]
    assert out["facts"][1]["restarted"] is False and out["told"] == [out["facts"][0]]
    assert first["attempt"] >= 2  # the engine's retry, not a second layer underneath


# -- server-side sign-out mid-step ----------------------------------------------------

SIGN_OUTS = sample("temporal-sign-out", range(2, PAGES - 2))


@pytest.mark.parametrize("at", SIGN_OUTS, ids=ids(SIGN_OUTS))
async def test_a_server_side_sign_out_mid_walk_waits_for_a_person_then_resumes_where_it_stopped(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    at: int,
) -> None:
    """Billing ends every session after serving page ``at``: the step fails as a lost
    login, the workflow waits for a person; once the sign-in is recorded and signalled
    the step runs again from its checkpoint (pages before it are not read again), the
    loss told to one step; every page read once in the result."""
    tag = uuid.uuid4().hex[:6]
    base = sites.url(BILLING, f"/invoices?walk={tag}")
    walk = {"base": base, "pages": PAGES, "pause": 0.1, "title": "Invoices"}
    after = {"base": sites.url(BILLING, f"/invoices?walk={tag}-after"), "pages": 1}
    async with browser_rig(temporal_server, tmp_path / "k.db", playwright_backend()) as rig:
        await rig.sign_in(sites)
        handle = await rig.start([["walk_pages", walk], ["walk_pages", after]])
        async with person(handle, rig, sites) as asked:
            await until(lambda: len(served(sites, BILLING, tag)) >= at, "the walk reached page")
            signed_out_at = time.perf_counter()
            sites.expire_sessions(BILLING)
            out = await finished(handle)
    recover_s = time.perf_counter() - signed_out_at
    first = out["values"][0]
    seen = served(sites, BILLING, tag)
    counts = walk_row(
        ENGINE, "server_signout", out, read=first["read"], seen=seen, lost=f"login:{BILLING}",
        recover_s=recover_s, sign_ins=len(asked), resumed_at=first["start"],
    )  # fmt: skip
    assert len(asked) == 1 and out["sign_ins"] == [{"conversation": CONVERSATION, "site": BILLING}]
    # Resumed from the checkpoint: pages before the one the sign-out met are read once
    # (the page that showed the sign-in page is read again after the sign-in).
    assert first["start"] > 0 and counts["re_read"] <= 1, (seen, first)


# -- write outcome unknown ------------------------------------------------------------

WRITE_FAULTS = sample("temporal-write", WRITE_SPACE)


@pytest.mark.parametrize("point", WRITE_FAULTS, ids=ids([f"{i}-{h}" for i, h in WRITE_FAULTS]))
async def test_a_write_whose_outcome_is_unknown_is_reconciled_by_readback_never_duplicated(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    point: tuple[int, str],
) -> None:
    """Ten refunds, one per step; refund ``i`` loses its answer after billing made it, or
    its request before it left: the readback under the workflow's idempotency key
    settles it (returned as billing's own refund, or submitted once); billing's log
    shows one POST and one refund per key."""
    steps = refund_steps("refund", sites.url(BILLING, "/invoices"), point)
    async with browser_rig(temporal_server, tmp_path / "k.db", playwright_backend()) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        handle = await rig.start(steps)
        faulted = time.perf_counter()
        out = await finished(handle)
    # Temporal's keys are known: ``<workflow id>:browser-<n>:refund`` for the n-th step.
    keys = [f"{handle.id}:browser-{i + 1}:refund" for i in range(len(steps))]
    write_row(
        ENGINE, out, sites=sites, host=BILLING, prefix=f"{handle.id}:",
        made=sites.refund_count() - before, point=point,
        recover_s=time.perf_counter() - faulted, keys=keys,
    )  # fmt: skip


# -- lease stolen ---------------------------------------------------------------------

STALLS = sample("temporal-lease", STALL_SPACE)


@pytest.mark.parametrize("point", STALLS, ids=ids([f"{w}-{ms}ms" for w, ms in STALLS]))
async def test_a_worker_stalled_past_its_lease_writes_nothing_once_another_holds_it(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    point: tuple[str, int],
) -> None:
    """The worker's process stalls (no renewal, no heartbeat) before a refund's page or
    its submit, past its 8 s profile lease; another holder takes the lease meanwhile.
    The stalled worker sends billing nothing while the other holds it (fencing); the
    refund is made once, after the lease came back, read back first."""
    db = tmp_path / "k.db"
    arg = stall_arg(sites.url(BILLING, "/invoices"), tmp_path, point)
    backend = playwright_backend()
    async with browser_rig(
        temporal_server, db, backend, lease_ttl=timedelta(milliseconds=LEASE_MS)
    ) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        with Thief(db, sites, BILLING, hold_s=2.0) as thief:
            handle = await rig.start([["refund", arg], ["read_invoices", arg["url"]]])
            async with person(handle, rig, sites) as asked:
                out = await finished(handle)
    lease_row(
        ENGINE, out, thief=thief, sites=sites, host=BILLING,
        prefix=f"{handle.id}:browser-1:refund", made=sites.refund_count() - before,
        lost=f"tab:{CONVERSATION}", asked=asked,
    )  # fmt: skip
