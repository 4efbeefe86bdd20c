"""The fault matrix on Temporal: a real dev server, real Chromium, the test sites' own logs.

Each row injects its fault at a point drawn with the session's seed (``FAULT_TRIALS``
trials: a few in CI, 20 under ``make chaos``), lets the workflow finish, and counts
against what the site served or recorded, not what the workflow says of itself:

- **lost**: pages of a walk never read (or missing from the step's result), refunds
  never made;
- **duplicated**: pages the result holds twice, refunds a key got more than once or
  submitted again after one reached the site;
- **told**: how many steps' facts named what the fault took (1 is "told once");
- **stale writes**: requests a worker sent after its profile's lease was taken.

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
from session_keeper.errors import ProfileHeld
from session_keeper.integrations.temporal import SIGN_IN_QUERY, SIGN_IN_SIGNAL
from session_keeper.stores import SqliteStore
from tests._chaos import sample
from tests.conftest import BackendFactory, sigkill
from tests.integrations._faults import (
    Thief,
    ids,
    refund_posts,
    report,
    served,
    told_count,
    until,
    walk_counts,
)
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
#: Pages of a walk: at least 20 fault points in each row's space.
PAGES = 24
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
                # The worker may still hold a fenced profile's retry: wait for the lease.
                for _ in range(100):
                    try:
                        await rig.sign_in(sites, turn=False)
                        break
                    except ProfileHeld:
                        await asyncio.sleep(0.2)
                await handle.signal(SIGN_IN_SIGNAL, {"conversation": CONVERSATION, "site": BILLING})
                while True:  # until the re-run step took the sign-in
                    if not await handle.query(SIGN_IN_QUERY):
                        break
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(answer())
    try:
        yield asked
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


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
    counts = walk_counts(first["read"], served(sites, DOCS, tag), PAGES)
    told = told_count(out["facts"], "tab:auditor")
    other = "w2" if lease.owner == "w1" else "w1"
    report(
        ENGINE, "worker_sigkill", **counts, told=told, stale_writes=0, recover_s=recover_s,
        failovers=out["failovers"], resumed_at=first["start"],
    )  # fmt: skip
    assert counts["lost"] == 0 and counts["duplicated"] == 0, (counts, out)
    assert told == 1 and out["facts"][0]["restarted"] is True, out["facts"]
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
    counts = walk_counts(first["read"], served(sites, DOCS, tag), PAGES)
    told = told_count(out["facts"], f"tab:{CONVERSATION}")
    report(ENGINE, "browser_sigkill", **counts, told=told, stale_writes=0, recover_s=recover_s)
    assert counts["lost"] == 0 and counts["duplicated"] == 0, (counts, out)
    assert told == 1 and out["facts"][0]["restarted"] is True, out["facts"]
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
    counts = walk_counts(first["read"], seen, PAGES)
    told = told_count(out["facts"], f"login:{BILLING}")
    report(
        ENGINE, "server_signout", **counts, told=told, stale_writes=0, recover_s=recover_s,
        sign_ins=len(asked), resumed_at=first["start"],
    )  # fmt: skip
    assert counts["lost"] == 0 and counts["duplicated"] == 0, (counts, out)
    assert len(asked) == 1 and out["sign_ins"] == [{"conversation": CONVERSATION, "site": BILLING}]
    assert told == 1, out["facts"]
    # Resumed from the checkpoint: pages before the one the sign-out met are read once
    # (the page that showed the sign-in page is read again after the sign-in).
    assert first["start"] > 0 and counts["re_read"] <= 1, (seen, first)


# -- write outcome unknown ------------------------------------------------------------

REFUNDS = 10
WRITE_FAULTS = sample(
    "temporal-write", [(i, how) for i in range(REFUNDS) for how in ("answer", "request")]
)


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
    at, how = point
    url = sites.url(BILLING, "/invoices")
    steps = []
    for i in range(REFUNDS):
        arg: dict[str, Any] = {"url": url, "amount": f"{i + 1}.00"}
        if i == at:
            arg["lose_answer" if how == "answer" else "lose_request"] = True
        steps.append(["refund", arg])
    async with browser_rig(temporal_server, tmp_path / "k.db", playwright_backend()) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        handle = await rig.start(steps)
        faulted = time.perf_counter()
        out = await finished(handle)
    posts = refund_posts(sites, BILLING, f"{handle.id}:")
    made = sites.refund_count() - before
    keys = [f"{handle.id}:browser-{i + 1}:refund" for i in range(REFUNDS)]
    counts = {
        "lost": sum(posts[k] == 0 for k in keys) + sum("refund_id" not in v for v in out["values"]),
        "duplicated": sum(max(0, n - 1) for n in posts.values()) + max(0, made - REFUNDS),
        "re_read": 0,
    }
    report(
        ENGINE, "write_unknown", **counts, told=None, stale_writes=0,
        recover_s=time.perf_counter() - faulted, how=out["values"][at]["how"],
    )  # fmt: skip
    assert counts == {"lost": 0, "duplicated": 0, "re_read": 0}, (posts, out["values"])
    assert made == REFUNDS
    assert out["values"][at]["how"] == ("readback" if how == "answer" else "submitted")


# -- lease stolen ---------------------------------------------------------------------

#: The profile lease in the stalled-worker row: long enough that a loaded machine's
#: event-loop lag never fences a worker that did not stall.
LEASE_MS = 8000
STALLS = sample(
    "temporal-lease",
    [
        (where, ms)
        for where in ("page", "write")
        for ms in range(LEASE_MS + 1000, LEASE_MS + 3000, 100)
    ],
)


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
    where, ms = point
    db = tmp_path / "k.db"
    arg = {"url": sites.url(BILLING, "/invoices"), "amount": "3.00", "stall_s": ms / 1000}
    arg.update(stall_at=where, stall_mark=str(tmp_path / "stalled"))
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
    key = f"{handle.id}:browser-1:refund"
    stale = thief.stale_posts(sites, key)
    posts = refund_posts(sites, BILLING, key)[key]
    made = sites.refund_count() - before
    counts = {"lost": int(made == 0), "duplicated": max(0, made - 1) + max(0, posts - 1)}
    told = told_count(out["facts"], f"tab:{CONVERSATION}")
    report(
        ENGINE, "lease_stolen", **counts, re_read=0, told=told, stale_writes=stale, recover_s=None,
        sign_ins=len(asked),
    )  # fmt: skip
    assert stale == 0, "a worker that lost its lease wrote to billing"
    assert counts == {"lost": 0, "duplicated": 0}, (counts, out["values"])
    assert told <= 1, out["facts"]
