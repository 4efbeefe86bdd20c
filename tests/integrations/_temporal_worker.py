"""A browser worker in its own OS process, for the Temporal failover tests.

Run as ``python tests/integrations/_temporal_worker.py <address> <queue> <worker_id>
<store> <profile_dir> <host_resolver_rules> <chromium> [agent]``: a KeeperPool over one
real Chromium profile (leased in the SQLite store every worker shares, ``lease_ttl``
3 s), the shared queue's worker (workflows, claim) and the worker's own queue (the
steps). With ``agent``, the shared queue also runs the pydantic-ai agent's workflow and
activities (``_temporal_agent.py``), the client with pydantic-ai's data converter.
Prints ``READY <own queue>`` once polling, then runs until killed.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from temporalio.client import Client
from temporalio.worker import Worker

from session_keeper import PlaywrightBackend
from session_keeper.integrations.temporal import BrowserWorker
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from session_keeper.testing import CHROMIUM_TEST_ARGS
from tests.integrations._temporal_flows import BrowserRun
from tests.integrations._temporal_steps import STEPS


async def serve(
    address: str,
    queue: str,
    worker_id: str,
    store_path: str,
    profile: str,
    rules: str,
    chromium: str,
    mode: str = "",
) -> None:
    workflows: list[type] = [BrowserRun]
    plugins: list[Any] = []
    if mode == "agent":
        from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin

        from tests.integrations._temporal_agent import AgentAudit, agent

        workflows.append(AgentAudit)
        plugins = [PydanticAIPlugin(), AgentPlugin(agent)]
    client = await Client.connect(address, plugins=plugins[:1])
    backend = PlaywrightBackend(
        profile, executable_path=chromium, host_resolver_rules=rules, args=CHROMIUM_TEST_ARGS
    )
    async with (
        SqliteStore(store_path) as store,
        KeeperPool(
            {"p0": backend}, store=store, owner=worker_id, lease_ttl=timedelta(seconds=3)
        ) as pool,
    ):
        worker = BrowserWorker(
            pool,
            worker_id=worker_id,
            queue=queue,
            steps=STEPS,
            heartbeat_every=timedelta(milliseconds=300),
        )
        async with (
            Worker(
                client,
                task_queue=queue,
                workflows=workflows,
                activities=worker.claim_activities(),
                plugins=plugins[1:],
            ),
            Worker(client, task_queue=worker.own_queue, activities=worker.step_activities()),
        ):
            print(f"READY {worker.own_queue}", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:9]))
