"""The fault matrix on DBOS: a real DBOS (its system database on the tests' PostgreSQL),
real Chromium, the test sites' own logs.

The rows the Temporal file (``test_temporal_faults.py``) measures, with DBOS in the
test's process (the process SIGKILL row, recovered by a new process, is
``test_dbos_recovery.py``). A walk is one DBOS step per page: each step's recorded
output is DBOS's checkpoint. Each row injects its fault at a point drawn with the
session's seed (``FAULT_TRIALS`` trials: a few in CI, 20 under ``make chaos``), lets the
workflow finish, and counts against what the site served or recorded, not what the
workflow says of itself (``_faults.py`` says what each count is). Each trial appends
its counts to ``FAULT_REPORT`` (``row="engine"``, ``engine="dbos"``, ``store``: the system
database) for RELIABILITY.md. The rows run on PostgreSQL, DBOS's database for more than
one process; ``DBOS_FAULT_DATABASES=sqlite,postgres`` runs them on a SQLite file too
(they pass there, at about the same cost per trial, so by default they are not doubled).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS, WorkflowHandleAsync

from demos.sites import DemoSites
from tests._chaos import sample
from tests.conftest import BackendFactory, sigkill
from tests.integrations._dbos_rig import BILLING, CONVERSATION, dbos_rig, person
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

#: The system databases the rows run on (``system_database`` in ``conftest.py``).
DATABASES = [
    pytest.param(name, marks=pytest.mark.postgres) if name == "postgres" else name
    for name in os.environ.get("DBOS_FAULT_DATABASES", "postgres").split(",")
]

pytestmark = [
    pytest.mark.parametrize("system_database", DATABASES, indirect=True),
    pytest.mark.chromium,
    pytest.mark.dbos,
    pytest.mark.slow,
    pytest.mark.chaos,
    pytest.mark.timeout(240),
]

ENGINE = "dbos"
#: Pages of a walk: at least 20 fault points in each row's space.
PAGES = 24
DOCS = "docs.example"


def walk(base: str, pause: float, **more: Any) -> list[list[Any]]:
    """A walk of ``PAGES`` pages of ``base``, one ``dbos_read_page`` step each."""
    return [
        ["dbos_read_page", {"base": base, "n": n, "pause": pause, **more}] for n in range(PAGES)
    ]


def database_of(system_database: str) -> str:
    """``sqlite`` or ``postgres``: the kind of DBOS system database the trial ran on."""
    return "sqlite" if system_database.startswith("sqlite") else "postgres"


async def finished(handle: WorkflowHandleAsync[Any], within: float = 150) -> dict[str, Any]:
    """The workflow's result; on a timeout, the errors its steps recorded (to say why)."""
    try:
        out: dict[str, Any] = await asyncio.wait_for(handle.get_result(), within)
    except TimeoutError:
        steps = await DBOS.list_workflow_steps_async(handle.workflow_id)
        failures = [repr(s["error"]) for s in steps if s["error"]]
        raise AssertionError(f"the workflow never finished; step failures: {failures}") from None
    return out


# -- browser SIGKILL mid-step ---------------------------------------------------------

BROWSER_KILLS = sample("dbos-browser-kill", range(2, PAGES - 2))


@pytest.mark.parametrize("at", BROWSER_KILLS, ids=ids(BROWSER_KILLS))
async def test_chromium_sigkilled_mid_walk_on_dbos_loses_nothing_and_one_step_is_told(
    system_database: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    at: int,
) -> None:
    """Chromium is SIGKILLed after the site served page ``at``: the step in flight fails
    and DBOS's retry relaunches it, told the restart and the lost tab (no other step
    is); the steps done before are not run again; every page read once in the result."""
    tag = uuid.uuid4().hex[:6]
    steps = walk(sites.url(DOCS, f"/guide?walk={tag}"), pause=0.05)
    async with dbos_rig(system_database, tmp_path / "k.db", playwright_backend()) as rig:
        handle = await rig.start(steps)
        await until(lambda: len(served(sites, DOCS, tag)) >= at, "the walk reached the kill point")
        killed_at = time.perf_counter()
        await sigkill(rig.chromium().current)
        out = await finished(handle)
    recover_s = time.perf_counter() - killed_at
    read = [v["n"] for v in out["values"]]
    seen = served(sites, DOCS, tag)
    counts = walk_counts(read, seen, PAGES)
    told = told_count(out["facts"], f"tab:{CONVERSATION}")
    report(
        ENGINE, "browser_sigkill", **counts, told=told, stale_writes=0, recover_s=recover_s,
        store=database_of(system_database),
        retried=sum(v["attempt"] > 1 for v in out["values"]),
    )  # fmt: skip
    assert counts["lost"] == 0 and counts["duplicated"] == 0, (counts, out)
    assert told == 1 and len(out["told"]) == 1 and out["told"][0]["restarted"] is True, out
    # Resumed where it stopped: the pages before the one in flight (``at - 1`` or ``at``)
    # are read once, but the lost tab reopening at its last verified page may read the
    # one before it again.
    assert counts["re_read"] <= 2 and all(seen.count(n) == 1 for n in range(at - 2)), seen


# -- server-side sign-out mid-step ----------------------------------------------------

SIGN_OUTS = sample("dbos-sign-out", range(2, PAGES - 2))


@pytest.mark.parametrize("at", SIGN_OUTS, ids=ids(SIGN_OUTS))
async def test_a_server_side_sign_out_mid_walk_on_dbos_waits_for_a_person_then_resumes(
    system_database: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    at: int,
) -> None:
    """Billing ends every session after serving page ``at``: the step that meets the
    sign-in page fails as a lost login and the workflow waits on ``recv``; once a person
    signed in (recorded) and said so, the step runs again, the loss told to it alone;
    pages before it are not read again; every page read once in the result."""
    tag = uuid.uuid4().hex[:6]
    steps = walk(sites.url(BILLING, f"/invoices?walk={tag}"), pause=0.05, title="Invoices")
    async with dbos_rig(system_database, tmp_path / "k.db", playwright_backend()) as rig:
        await rig.sign_in(sites)
        handle = await rig.start(steps)
        async with person(rig, sites, handle.workflow_id) as asked:
            await until(lambda: len(served(sites, BILLING, tag)) >= at, "the walk reached page")
            signed_out_at = time.perf_counter()
            sites.expire_sessions(BILLING)
            out = await finished(handle)
    recover_s = time.perf_counter() - signed_out_at
    read = [v["n"] for v in out["values"]]
    seen = served(sites, BILLING, tag)
    counts = walk_counts(read, seen, PAGES)
    told = told_count(out["facts"], f"login:{BILLING}")
    report(
        ENGINE, "server_signout", **counts, told=told, stale_writes=0, recover_s=recover_s,
        store=database_of(system_database), sign_ins=len(asked),
    )  # fmt: skip
    assert counts["lost"] == 0 and counts["duplicated"] == 0, (counts, out)
    assert len(asked) == 1 and out["sign_ins"] == [{"conversation": CONVERSATION, "site": BILLING}]
    assert told == 1, out["facts"]
    # Resumed where it stopped: only the page that showed the sign-in page (``at - 1``
    # at the earliest) is read again.
    assert counts["re_read"] <= 1 and all(seen.count(n) == 1 for n in range(at - 1)), seen


# -- write outcome unknown ------------------------------------------------------------

REFUNDS = 10
WRITE_FAULTS = sample(
    "dbos-write", [(i, how) for i in range(REFUNDS) for how in ("answer", "request")]
)


@pytest.mark.parametrize("point", WRITE_FAULTS, ids=ids([f"{i}-{h}" for i, h in WRITE_FAULTS]))
async def test_a_dbos_write_whose_outcome_is_unknown_is_reconciled_by_readback_never_twice(
    system_database: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    point: tuple[int, str],
) -> None:
    """Ten refunds, one per step; refund ``i`` loses its answer after billing made it, or
    its request before it left: DBOS's retry reads back under the workflow's idempotency
    key (workflow id + step id) and returns billing's own refund, or submits it once;
    billing's log shows one POST and one refund per key."""
    at, how = point
    url = sites.url(BILLING, "/invoices")
    steps = []
    for i in range(REFUNDS):
        arg: dict[str, Any] = {"url": url, "amount": f"{i + 1}.00"}
        if i == at:
            arg["lose_answer" if how == "answer" else "lose_request"] = True
        steps.append(["dbos_refund", arg])
    async with dbos_rig(system_database, tmp_path / "k.db", playwright_backend()) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        handle = await rig.start(steps)
        faulted = time.perf_counter()
        out = await finished(handle)
    posts = refund_posts(sites, BILLING, f"{handle.workflow_id}:")
    made = sites.refund_count() - before
    counts = {
        "lost": REFUNDS - len(posts) + sum("refund_id" not in v for v in out["values"]),
        "duplicated": sum(max(0, n - 1) for n in posts.values()) + max(0, made - REFUNDS),
        "re_read": 0,
    }
    report(
        ENGINE, "write_unknown", **counts, told=None, stale_writes=0,
        recover_s=time.perf_counter() - faulted, store=database_of(system_database),
        how=out["values"][at]["how"],
    )  # fmt: skip
    assert counts == {"lost": 0, "duplicated": 0, "re_read": 0}, (posts, out["values"])
    assert made == REFUNDS
    assert out["values"][at]["how"] == ("readback" if how == "answer" else "submitted")


# -- lease stolen ---------------------------------------------------------------------

#: The profile lease in the stalled-process row: long enough that a loaded machine's
#: event-loop lag never fences a process that did not stall.
LEASE_MS = 8000
STALLS = sample(
    "dbos-lease",
    [
        (where, ms)
        for where in ("page", "write")
        for ms in range(LEASE_MS + 1000, LEASE_MS + 3000, 100)
    ],
)


@pytest.mark.parametrize("point", STALLS, ids=ids([f"{w}-{ms}ms" for w, ms in STALLS]))
async def test_a_dbos_process_stalled_past_its_lease_writes_nothing_once_another_holds_it(
    system_database: str,
    tmp_path: Path,
    sites: DemoSites,
    playwright_backend: BackendFactory,
    point: tuple[str, int],
) -> None:
    """The process running the step stalls (no lease renewal) before a refund's page or
    its submit, past its 8 s profile lease; another holder takes the lease meanwhile.
    The stalled process sends billing nothing while the other holds it (fencing); the
    refund is made once, by DBOS's retry once the lease came back, read back first."""
    where, ms = point
    db = tmp_path / "k.db"
    arg = {"url": sites.url(BILLING, "/invoices"), "amount": "3.00", "stall_s": ms / 1000}
    arg.update(stall_at=where, stall_mark=str(tmp_path / "stalled"))
    backend = playwright_backend()
    lease_ttl = timedelta(milliseconds=LEASE_MS)
    async with dbos_rig(system_database, db, backend, lease_ttl=lease_ttl) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        with Thief(db, sites, BILLING, hold_s=2.0) as thief:
            handle = await rig.start([["dbos_refund", arg], ["dbos_read_invoices", arg["url"]]])
            async with person(rig, sites, handle.workflow_id) as asked:
                out = await finished(handle)
    mine = f"{handle.workflow_id}:"
    stale = thief.stale_posts(sites, mine)
    made = sites.refund_count() - before
    posts = sum(refund_posts(sites, BILLING, mine).values())
    counts = {"lost": int(made == 0), "duplicated": max(0, made - 1) + max(0, posts - 1)}
    told = told_count(out["facts"], f"tab:{CONVERSATION}")
    report(
        ENGINE, "lease_stolen", **counts, re_read=0, told=told, stale_writes=stale,
        recover_s=None, store=database_of(system_database), sign_ins=len(asked),
        how=out["values"][0]["how"],
    )  # fmt: skip
    assert stale == 0, "a process that lost its lease wrote to billing"
    assert counts == {"lost": 0, "duplicated": 0}, (counts, out["values"])
    assert out["values"][0]["how"] in ("submitted", "readback")
    assert told <= 1, out["facts"]
