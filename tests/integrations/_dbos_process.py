"""A DBOS application process with a browser, for the DBOS recovery tests.

Run as ``python tests/integrations/_dbos_process.py [--agent] <system database> <store>
<profile_dir> <host_resolver_rules> <chromium> <worker_id> <workflow_id> <login url>
[<plan json>]``: a KeeperPool over one real Chromium profile (leased in the SQLite
store every process shares, ``lease_ttl`` 3 s, owner ``<worker_id>:<pid>``), the
BrowserWorker serving the test steps, then ``DBOS.launch()`` (which recovers the
workflows a dead process left). Given a plan, a person signs the conversation in to
billing and the process starts workflow ``<workflow_id>`` (printing ``STARTED``):
``browser_run`` of the plan, or with ``--agent`` the pydantic-ai agent's ``agent_run``
(``_dbos_agent.py``, registered in every process given ``--agent``, as DBOS recovers
only workflows its process declared); without a plan it only recovers. Either way it
plays the person whenever the workflow waits for a sign-in, and prints ``RESULT <json>``
once the workflow ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from session_keeper import PlaywrightBackend
from session_keeper.integrations.dbos import BrowserWorker
from session_keeper.pool import KeeperPool
from session_keeper.stores import SqliteStore
from session_keeper.testing import CHROMIUM_TEST_ARGS
from tests.integrations._dbos_rig import answer_sign_ins
from tests.integrations._dbos_steps import STEPS, browser_run
from tests.integrations._pool_rig import beside, sign_in


async def person(pool: KeeperPool[Any], workflow_id: str, login_url: str) -> None:
    """Sign in whenever the workflow waits for it (each wait once), then tell it."""

    async def signs_in(wait: Mapping[str, Any]) -> None:
        await sign_in(pool, wait["conversation"], login_url)

    await answer_sign_ins(workflow_id, signs_in, poll=0.2)


async def serve(
    system_db: str,
    store_path: str,
    profile: str,
    rules: str,
    chromium: str,
    worker_id: str,
    workflow_id: str,
    login_url: str,
    plan_json: str | None = None,
    *,
    workflow: Any = browser_run,
) -> None:
    backend = PlaywrightBackend(
        profile, executable_path=chromium, host_resolver_rules=rules, args=CHROMIUM_TEST_ARGS
    )
    owner = f"{worker_id}:{os.getpid()}"
    async with (
        SqliteStore(store_path) as store,
        KeeperPool(
            {"p0": backend}, store=store, owner=owner, lease_ttl=timedelta(seconds=3)
        ) as pool,
    ):
        with BrowserWorker(pool, worker_id=worker_id, steps=STEPS):
            DBOS(config={"name": "sk-dbos-recovery", "system_database_url": system_db})
            DBOS.launch()
            try:
                if plan_json is not None:
                    plan = json.loads(plan_json)
                    await sign_in(pool, plan["conversation"], login_url)
                    with SetWorkflowID(workflow_id):
                        await DBOS.start_workflow_async(workflow, plan)
                    print("STARTED", flush=True)
                async with beside(person(pool, workflow_id, login_url)):
                    handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(
                        workflow_id
                    )
                    result = await handle.get_result()
                print("RESULT " + json.dumps(result), flush=True)
            finally:
                DBOS.destroy()


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[0] == "--agent":
        from tests.integrations._dbos_agent import agent_run

        asyncio.run(serve(*args[1:10], workflow=agent_run))
    else:
        asyncio.run(serve(*args[:9]))
