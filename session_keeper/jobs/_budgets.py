"""Budgets of a job: deadline, attempts and progress, counted across processes."""

from __future__ import annotations

from datetime import datetime

from session_keeper.jobs._outcome import Stop
from session_keeper.stores import Store
from session_keeper.stores._records import Job


def check_budgets(job: Job, now: datetime, idle_s: float) -> None:
    """Raise :class:`Stop` (``stopped``) when the deadline passed, the attempts are
    spent, or no checkpoint was accepted for longer than the contract allows."""
    cp, contract = job.checkpoint, job.contract
    if cp.deadline_at is not None and now >= cp.deadline_at:
        raise Stop(
            "stopped",
            f"deadline {cp.deadline_at.isoformat()} passed; resume from {cp.next_cursor}",
        )
    if contract.max_attempts is not None and cp.attempts_used >= contract.max_attempts:
        raise Stop(
            "stopped",
            f"attempt budget of {contract.max_attempts} spent; resume from {cp.next_cursor}",
        )
    limit = contract.no_progress_limit_s
    if limit is not None and idle_s > limit:
        raise Stop(
            "stopped", f"no accepted checkpoint for {limit:g}s; resume from {cp.next_cursor}"
        )


async def dead_controller(store: Store, job: Job) -> object | None:
    """The previous owner, if it died with a step in flight (its lease taken over from
    a ``running`` job, never released); ``None`` otherwise."""
    claims = await store.events(job_id=job.job_id, kind="lease_claimed", limit=1, newest_first=True)
    if claims and "took_over_from" in claims[0].data and job.checkpoint.state == "running":
        return claims[0].data["took_over_from"]
    return None


async def last_progress_at(store: Store, job: Job) -> datetime:
    """When the job last progressed: submitted, a page committed, or a person resumed it."""
    marks = [job.submitted_at]
    for kind in ("page_committed", "human_resumed"):
        last = await store.events(job_id=job.job_id, kind=kind, limit=1, newest_first=True)
        marks.extend(e.at for e in last)
    return max(marks)
