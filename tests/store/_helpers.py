"""Helpers the store tests share: a lease TTL, result records, a job already running,
the stored artifacts read raw."""

from __future__ import annotations

from datetime import timedelta

from session_keeper.jobs import Checkpoint, JobContract, Lease, ResultRecord
from session_keeper.stores import Store
from session_keeper.testing import StoreOperation, StoreStatement, run_store_operation

TTL = timedelta(seconds=60)


def records(*ids: str) -> list[ResultRecord]:
    """Result records whose data names their id."""
    return [ResultRecord(source_record_id=i, data={"id": i, "title": f"item {i}"}) for i in ids]


async def running_job(
    store: Store, job_id: str = "job-1", owner: str = "w1", **contract: object
) -> tuple[Lease, Checkpoint]:
    """Submit, claim and start a job; returns its lease and running checkpoint."""
    await store.submit_job(JobContract(job_id=job_id, **contract))  # type: ignore[arg-type]
    lease = await store.claim(job_id, owner, TTL)
    checkpoint = await store.transition(lease, 0, "running")
    return lease, checkpoint


async def stored_artifacts(store: Store) -> list[tuple[str, bool]]:
    """Every stored artifact's digest and whether a commit referenced it, read raw
    (no Store method lists artifacts)."""

    def select() -> StoreOperation[list[tuple[str, bool]]]:
        rows = yield StoreStatement(
            "select_artifacts", "SELECT digest, referenced_at FROM artifacts ORDER BY digest"
        )
        return [(str(r[0]), r[1] is not None) for r in rows]

    return await run_store_operation(store, select, write=False)
