"""The workflows of ``demos/temporal_audit.py`` (sandbox-safe: no browser code here)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from session_keeper.integrations.temporal import WorkflowBrowser

AUDIT_QUEUE = "catalogue-audit"
CONVERSATION = "catalogue-auditor"


@workflow.defn
class CatalogueAudit:
    """Read every catalogue page, one browser step each, on the worker holding the browser."""

    @workflow.run
    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """``job``: ``{"base", "pages"}``. Returns the records and what the session decided."""
        browser = WorkflowBrowser(
            CONVERSATION,
            queue=AUDIT_QUEUE,
            heartbeat_timeout=timedelta(seconds=3),
            worker_timeout=timedelta(seconds=4),
        )
        records: list[str] = []
        workers: list[str] = []
        for page in range(1, int(job["pages"]) + 1):
            result = await browser.step("audit_page", f"{job['base']}/items?page={page}")
            records.extend(result.value)
            workers.append(result.worker)
        return {
            "pages": int(job["pages"]),
            "records": records,
            "workers": workers,
            "told": browser.told,
            "failovers": browser.failovers,
        }


@workflow.defn
class SignInOn:
    """The scripted person's sign-in, run on the given worker's own queue."""

    @workflow.run
    async def run(self, queue: str, login_url: str) -> str:
        """Run ``sign_in`` on ``queue`` (the worker holding the browser)."""
        site: str = await workflow.execute_activity(
            "sign_in", login_url, task_queue=queue, start_to_close_timeout=timedelta(minutes=1)
        )
        return site
