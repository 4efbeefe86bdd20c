"""Failover on a real Temporal dev server: the worker holding the browser is SIGKILLed
mid-step; the next attempt runs on another worker process, which takes the profile's
lease, relaunches Chromium, is told what the death took and resumes from the heartbeat's
checkpoint."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from temporalio.client import Client

from demos.sites import DemoSites
from session_keeper.stores import SqliteStore
from tests.integrations._temporal_flows import BrowserRun
from tests.integrations._temporal_rig import ready, spawn

pytestmark = [pytest.mark.chromium, pytest.mark.temporal, pytest.mark.slow, pytest.mark.chaos]

PAGES = 24


def visits(sites: DemoSites, tag: str) -> list[int]:
    """The pages of walk ``tag`` the docs site served, in order."""
    out = []
    for r in sites.requests("docs.example"):
        query = parse_qs(r.query)
        if r.path == "/guide" and query.get("walk") == [tag]:
            out.append(int(query["page"][0]))
    return out


@pytest.mark.timeout(240)
async def test_a_worker_sigkilled_mid_step_fails_over_told_what_the_death_took_from_its_checkpoint(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    chromium_path: str,
    workers: list[subprocess.Popen[str]],
) -> None:
    """SIGKILL the worker holding the browser mid-walk: the step finishes on the other
    worker, which relaunched the profile and was told the tab was lost; it resumed from
    the last heartbeat (pages before it are not walked again) and every page was seen."""
    queue = f"browser-{uuid.uuid4().hex[:8]}"
    profile = tmp_path / "profile"
    common = [str(tmp_path / "keeper.db"), str(profile), sites.host_resolver_rules, chromium_path]
    procs = {w: spawn([temporal_server, queue, w, *common]) for w in ("w1", "w2")}
    workers.extend(procs.values())
    for proc in procs.values():
        ready(proc)
    client = await Client.connect(temporal_server)
    tag = uuid.uuid4().hex[:6]
    base = sites.url("docs.example", f"/guide?walk={tag}")
    plan = {
        "conversation": "auditor",
        "queue": queue,
        "steps": [["walk", {"base": base, "pages": PAGES, "pause": 0.3}]],
        "heartbeat_s": 3,
        "worker_timeout_s": 4,
    }
    handle = await client.start_workflow(BrowserRun.run, plan, id=f"walk-{tag}", task_queue=queue)
    deadline = time.monotonic() + 90
    # Past the SDK's heartbeat throttle (80% of the 3 s heartbeat timeout): a checkpoint
    # has reached the server.
    while len(visits(sites, tag)) < 12:
        assert time.monotonic() < deadline, "the walk never got going"
        await asyncio.sleep(0.05)
    async with SqliteStore(tmp_path / "keeper.db") as store:
        lease = await store.profile_lease("p0")
    assert lease is not None
    holder = lease.owner
    os.killpg(procs[holder].pid, signal.SIGKILL)  # the worker holding the browser, mid-step
    procs[holder].communicate()
    killed_at = len(visits(sites, tag))
    other = "w2" if holder == "w1" else "w1"

    out = await handle.result()
    (value,) = out["values"]
    assert out["workers"] == [other] and out["failovers"] == 1
    facts = out["facts"][0]
    assert facts["restarted"] is True
    assert "tab:auditor" in [f"{x['kind']}:{x['name']}" for x in facts["lost"]]
    assert out["told"] == [facts]
    seen = visits(sites, tag)
    # Resumed from the last heartbeat: at most the page in flight is walked again.
    assert 0 < value["start"] <= killed_at
    assert sorted(set(seen)) == list(range(PAGES))
    # Pages before the checkpoint's were walked once (the lost tab reopened at its last
    # verified URL, the checkpoint's previous page, counts one more visit there).
    assert all(seen.count(n) == 1 for n in range(value["start"] - 1)), (seen, value, killed_at)
    assert len(seen) - PAGES <= 1 + (killed_at - value["start"])
