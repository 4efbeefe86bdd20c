"""Recovery on a real DBOS: the process running a workflow of browser steps is SIGKILLed
(its Chromium with it) mid-workflow; a new process recovers it, takes the profile's lease
once the dead holder's expires, relaunches Chromium and is told what the death took,
once. Counted against the test sites' own logs: no page lost, no refund made twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from demos.sites import DemoSites
from session_keeper.testing import TemporaryPostgres
from tests._chaos import record, sample
from tests.integrations._dbos_rig import spawn, until, wait_line
from tests.integrations._faults import refund_posts, report, served

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.dbos,
    pytest.mark.slow,
    pytest.mark.chaos,
    pytest.mark.timeout(240),
]

CONVERSATION = "auditor"
BILLING = "billing.example"
PAGES = 8
#: The refund runs after this many pages of the walk.
REFUND_AT = 4
#: Where the process dies: once page ``n`` of the walk is being shown, or right after
#: billing answered the refund (the write made, its step not recorded).
POINTS = sample("dbos-process-kill", [*(f"page-{n}" for n in range(1, PAGES)), "refund"])


@pytest.mark.parametrize(
    "database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize("point", POINTS)
def test_a_dbos_process_sigkilled_mid_workflow_is_recovered_told_what_the_death_took_once(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sites: DemoSites,
    chromium_path: str,
    workers: list[subprocess.Popen[str]],
    database: str,
    point: str,
) -> None:
    """SIGKILL the process mid-workflow: a new process recovers the workflow; the step
    that was in flight is a new turn told the restart, the lost tab and the lost billing
    login (the workflow waits for a sign-in once), later steps are told nothing; steps
    done before the kill are not run again, every page is walked, the refund is made
    once (read back if the dead process had made it)."""
    if database == "sqlite":
        system_db = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    else:
        server: TemporaryPostgres = request.getfixturevalue("pg_server")
        system_db = server.create_database(f"dbos_{uuid.uuid4().hex[:10]}")
    tag = uuid.uuid4().hex[:8]
    workflow_id = f"walk-{tag}"
    walk = [
        [
            "dbos_visit",
            {"url": sites.url("docs.example", f"/guide?walk={tag}&page={n}"), "pause": 0.4},
        ]
        for n in range(PAGES)
    ]
    refund = {"url": sites.url(BILLING, "/invoices"), "amount": "3.50", "pause_after": 1.0}
    plan = {
        "conversation": CONVERSATION,
        "steps": [*walk[:REFUND_AT], ["dbos_refund", refund], *walk[REFUND_AT:]],
    }
    common = [
        system_db,
        str(tmp_path / "keeper.db"),
        str(tmp_path / "profile"),
        sites.host_resolver_rules,
        chromium_path,
    ]
    tail = [workflow_id, sites.url(BILLING, "/login")]

    def visits() -> list[int]:
        return served(sites, "docs.example", tag)

    def posts() -> int:
        return sum(refund_posts(sites, BILLING, f"{workflow_id}:").values())

    first = spawn([*common, "p1", *tail, json.dumps(plan)])
    workers.append(first)
    wait_line(first, "STARTED")
    if point == "refund":
        until(lambda: posts() == 1, "the refund was made")
    else:
        n = int(point.removeprefix("page-"))
        until(lambda: len(visits()) > n, f"page {n} is shown")
    killed_at = time.monotonic()
    os.killpg(first.pid, signal.SIGKILL)  # mid-workflow, its Chromium with it
    first.communicate()
    seen_before = visits()
    posts_before = posts()

    second = spawn([*common, "p2", *tail])
    workers.append(second)
    out: dict[str, Any] = json.loads(wait_line(second, "RESULT ", timeout=180))
    recover_s = time.monotonic() - killed_at
    seen = visits()
    told = out["told"]
    labels = sorted(f"{x['kind']}:{x['name']}" for x in told[0]["lost"]) if told else []
    verdict = {
        "lost": PAGES - len(set(seen)),
        "duplicated": posts() - 1,
        "told": len(told),
        "sign_ins": len(out["sign_ins"]),
    }
    record(
        "test_a_dbos_process_sigkilled_mid_workflow_is_recovered_told_what_the_death_took_once",
        store=database, point=point, recover_s=recover_s, **verdict,
        # The fault table's columns: pages walked again, no commits of its own, and the
        # workflow ended (the recovered process printed its result).
        re_extracted=len(seen) - len(set(seen)), duplicate_commits=0,
        false_completion=verdict["lost"] > 0, state="done",
    )  # fmt: skip
    # The durable engines' table: the same death as a row beside Temporal's faults.
    report(
        "dbos", "process_sigkill", lost=verdict["lost"] + int(posts() == 0),
        duplicated=max(0, posts() - 1), re_read=len(seen) - len(set(seen)), told=len(told),
        stale_writes=0, recover_s=recover_s, store=database, point=point,
    )  # fmt: skip
    assert verdict == {"lost": 0, "duplicated": 0, "told": 1, "sign_ins": 1}, (point, out)
    assert told[0]["restarted"] is True
    assert labels == [f"login:{BILLING}", f"tab:{CONVERSATION}"], told
    assert out["workers"][0] == "p1" and out["workers"][-1] == "p2"
    # The step the death interrupted is the one told (the first the new process ran).
    recovered = out["workers"].index("p2")
    assert out["facts"][recovered] == told[0], (recovered, out)
    # What was done before the kill is not done again: pages walked by the dead process
    # (but the one in flight, and the lost tab reopening at its last verified page) are
    # walked once; the refund is made once whichever process made it.
    done_before = sorted(set(seen_before))[:-2]
    assert all(seen.count(n) == 1 for n in done_before), (seen_before, seen)
    at = REFUND_AT
    refunded = out["values"][at]
    if out["workers"][at] == "p2" and posts_before:
        # The dead process made the refund, the new one finished its step: read back.
        assert refunded["how"] == "readback", (point, out)
