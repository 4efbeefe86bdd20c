"""Helpers the store tests share: a lease TTL, result records, a job already running."""

from __future__ import annotations

from datetime import timedelta

from session_keeper.jobs import Checkpoint, JobContract, Lease, ResultRecord
from session_keeper.stores import Store

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
