"""Workflows of the Temporal integration tests (sandbox-safe: no browser code here).

``BrowserRun`` runs the steps it is given, in order, in one :class:`WorkflowBrowser`, and
returns what each step returned and what the session decided.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from session_keeper.integrations.temporal import WorkflowBrowser


@workflow.defn
class BrowserRun:
    """``plan``: ``{"conversation", "queue", "steps": [[name, arg], ...], "heartbeat_s",
    "worker_timeout_s"}``."""

    @workflow.run
    async def run(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Run the plan's steps; return values, workers, facts told, sign-ins, failovers."""
        session = WorkflowBrowser(
            plan["conversation"],
            queue=plan["queue"],
            heartbeat_timeout=timedelta(seconds=plan.get("heartbeat_s", 30)),
            worker_timeout=timedelta(seconds=plan.get("worker_timeout_s", 30)),
        )
        values, workers, facts = [], [], []
        for name, arg in plan["steps"]:
            result = await session.step(name, arg)
            values.append(result.value)
            workers.append(result.worker)
            facts.append(result.facts)
        return {
            "values": values,
            "workers": workers,
            "facts": facts,
            "told": session.told,
            "sign_ins": session.sign_ins,
            "failovers": session.failovers,
        }
