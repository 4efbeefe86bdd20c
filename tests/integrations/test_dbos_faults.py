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
    seen = served(sites, DOCS, tag)
    counts = walk_row(
        ENGINE, "browser_sigkill", out, read=[v["n"] for v in out["values"]], seen=seen,
        lost=f"tab:{CONVERSATION}", recover_s=recover_s, store=database_of(system_database),
        retried=sum(v["attempt"] > 1 for v in out["values"]),
    )  # fmt: skip
    assert len(out["told"]) == 1 and out["told"][0]["restarted"] is True, out
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
    seen = served(sites, BILLING, tag)
    counts = walk_row(
        ENGINE, "server_signout", out, read=[v["n"] for v in out["values"]], seen=seen,
        lost=f"login:{BILLING}", recover_s=recover_s, store=database_of(system_database),
        sign_ins=len(asked),
    )  # fmt: skip
    assert len(asked) == 1 and out["sign_ins"] == [{"conversation": CONVERSATION, "site": BILLING}]
    # Resumed where it stopped: only the page that showed the sign-in page (``at - 1``
    # at the earliest) is read again.
    assert counts["re_read"] <= 1 and all(seen.count(n) == 1 for n in range(at - 1)), seen


# -- write outcome unknown ------------------------------------------------------------

WRITE_FAULTS = sample("dbos-write", WRITE_SPACE)


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
    steps = refund_steps("dbos_refund", sites.url(BILLING, "/invoices"), point)
    async with dbos_rig(system_database, tmp_path / "k.db", playwright_backend()) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        handle = await rig.start(steps)
        faulted = time.perf_counter()
        out = await finished(handle)
    write_row(
        ENGINE, out, sites=sites, host=BILLING, prefix=f"{handle.workflow_id}:",
        made=sites.refund_count() - before, point=point,
        recover_s=time.perf_counter() - faulted, store=database_of(system_database),
    )  # fmt: skip


# -- lease stolen ---------------------------------------------------------------------

STALLS = sample("dbos-lease", STALL_SPACE)


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
    db = tmp_path / "k.db"
    arg = stall_arg(sites.url(BILLING, "/invoices"), tmp_path, point)
    backend = playwright_backend()
    lease_ttl = timedelta(milliseconds=LEASE_MS)
    async with dbos_rig(system_database, db, backend, lease_ttl=lease_ttl) as rig:
        await rig.sign_in(sites)
        before = sites.refund_count()
        with Thief(db, sites, BILLING, hold_s=2.0) as thief:
            handle = await rig.start([["dbos_refund", arg], ["dbos_read_invoices", arg["url"]]])
            async with person(rig, sites, handle.workflow_id) as asked:
                out = await finished(handle)
    lease_row(
        ENGINE, out, thief=thief, sites=sites, host=BILLING, prefix=f"{handle.workflow_id}:",
        made=sites.refund_count() - before, lost=f"tab:{CONVERSATION}", asked=asked,
        store=database_of(system_database), how=out["values"][0]["how"],
    )  # fmt: skip
    assert out["values"][0]["how"] in ("submitted", "readback")
