"""A pydantic-ai agent on Temporal (``TemporalDurability``, the successor of
``TemporalAgent``) whose tool is a keeper browser step, surviving a worker SIGKILL."""

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
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client

from demos.sites import DemoSites
from session_keeper.stores import SqliteStore
from tests.integrations._temporal_agent import PAGES, AgentAudit
from tests.integrations._temporal_rig import ready, spawn

pytestmark = [
    pytest.mark.chromium,
    pytest.mark.temporal,
    pytest.mark.slow,
    pytest.mark.timeout(240),
]


def served(sites: DemoSites, tag: str) -> list[int]:
    """The pages of the agent's walk ``tag`` the docs site served, in order."""
    out = []
    for r in sites.requests("docs.example"):
        query = parse_qs(r.query)
        if query.get("walk") == [tag]:
            out.append(int(query["page"][0]))
    return out


async def test_an_agent_whose_worker_is_sigkilled_mid_run_finishes_told_of_the_restart_once(
    temporal_server: str,
    tmp_path: Path,
    sites: DemoSites,
    chromium_path: str,
    workers: list[subprocess.Popen[str]],
) -> None:
    """The worker holding the agent's browser (and its Chromium) is SIGKILLed while the
    agent reads page 3: the run finishes on the other worker; the model read every page
    and its tool answers said the browser restarted exactly once."""
    queue = f"agent-{uuid.uuid4().hex[:8]}"
    common = [str(tmp_path / "k.db"), str(tmp_path / "profile"), sites.host_resolver_rules]
    procs = {
        w: spawn([temporal_server, queue, w, *common, chromium_path, "agent"]) for w in ("w1", "w2")
    }
    workers.extend(procs.values())
    for proc in procs.values():
        ready(proc)
    client = await Client.connect(temporal_server, plugins=[PydanticAIPlugin()])
    tag = uuid.uuid4().hex[:6]
    plan = {
        "conversation": "page-auditor",
        "queue": queue,
        "base": sites.url("docs.example", f"/guide?walk={tag}"),
        "pause": 0.8,
    }
    handle = await client.start_workflow(AgentAudit.run, plan, id=f"agent-{tag}", task_queue=queue)
    deadline = time.monotonic() + 120
    while 3 not in served(sites, tag):
        assert time.monotonic() < deadline, "the agent never got to page 3"
        await asyncio.sleep(0.02)
    async with SqliteStore(tmp_path / "k.db") as store:
        lease = await store.profile_lease("p0")
    assert lease is not None
    os.killpg(procs[lease.owner].pid, signal.SIGKILL)  # mid-step: page 3 is being read
    procs[lease.owner].communicate()
    out = await handle.result()
    assert out["answer"] == {"read": list(range(PAGES)), "told": 1}, out
    assert out["failovers"] == 1 and out["told"] == 1
    assert set(served(sites, tag)) == set(range(PAGES))
