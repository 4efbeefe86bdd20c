"""Job metrics from the store's jobs and event log: what progress the logs show.

Denominators stay visible; a safe stop is never counted as a completion; first-attempt
completion is reported apart from eventual recovery; human waiting apart from active time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime

import attrs

from session_keeper._model.events import EventKind
from session_keeper.stores import Event, Store
from session_keeper.stores._records import Job, StoredResult

#: An independent validator: does this finished job's output pass?
Validator = Callable[[Job, list[StoredResult]], Awaitable[bool]]

#: Events that mean the job needed recovery of some kind.
RECOVERY_KINDS: frozenset[EventKind] = frozenset(
    {"step_failed", "rate_limited", "human_pause", "browser_restarted", "write_unknown"}
)


@attrs.frozen(kw_only=True)
class JobMetrics:
    """A summary over the jobs in a store."""

    jobs: int
    #: Done jobs whose output passed the validator (every done job when none was given).
    accepted_completions: int
    #: Done jobs that failed the validator: false successes, counted apart.
    false_completions: int
    #: Accepted without any recovery (no failed step, pause, restart or lease loss).
    first_attempt_completions: int
    #: Accepted after at least one recovery.
    recovered_completions: int
    safely_stopped: int
    awaiting_human: int
    failed: int
    unfinished: int
    validated: bool
    pages_committed: int
    #: Records a commit found already stored: repeated progress (harmless, but counted).
    repeated_records: int
    #: Failure classes of failed steps, and how often.
    recoveries: Mapping[str, int]
    retries_consumed: int
    human_wait_s: float
    #: Active time: each run's span minus nothing else (human waiting is not inside a run).
    active_s: float
    #: Stall indicators for jobs not finished: seconds since their last accepted checkpoint.
    since_last_checkpoint_s: Mapping[str, float]
    #: Paused jobs and how long they have waited.
    open_pause_age_s: Mapping[str, float]

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return attrs.asdict(self)


async def summarize(
    store: Store, *, now: datetime, validator: Validator | None = None
) -> JobMetrics:
    """Compute :class:`JobMetrics` over every job in ``store`` at ``now``."""
    jobs = await store.jobs()
    counts: Counter[str] = Counter()
    recoveries: Counter[str] = Counter()
    pages = repeated = retries = 0
    human_wait = active = 0.0
    stall: dict[str, float] = {}
    pauses: dict[str, float] = {}
    for job in jobs:
        events = await store.events(job_id=job.job_id, limit=1_000_000)
        kinds = {e.kind for e in events}
        commits = [e for e in events if e.kind == "page_committed"]
        pages += len(commits)
        repeated += sum(_int(e.data.get("already_present")) for e in commits)
        retries += job.checkpoint.attempts_used
        for e in events:
            if e.kind == "step_failed" and e.failure_class:
                recoveries[e.failure_class] += 1
            if e.kind == "human_resumed":
                human_wait += float(_num(e.data.get("human_wait_s")))
        active += _active_seconds(events)
        state = job.checkpoint.state
        if state == "done":
            ok = True
            if validator is not None:
                ok = await validator(job, await store.results(job.job_id))
            if not ok:
                counts["false"] += 1
                continue
            counts["accepted"] += 1
            # More than one claim means more than one run: a crash, a takeover or a resume.
            if kinds & RECOVERY_KINDS or _claims(events) > 1:
                counts["recovered"] += 1
            else:
                counts["first"] += 1
            continue
        counts[state] += 1
        last = commits[-1].at if commits else job.submitted_at
        stall[job.job_id] = (now - last).total_seconds()
        if state == "awaiting_human":
            paused = [e for e in events if e.kind == "human_pause"]
            if paused:
                pauses[job.job_id] = (now - paused[-1].at).total_seconds()
    return JobMetrics(
        jobs=len(jobs),
        accepted_completions=counts["accepted"],
        false_completions=counts["false"],
        first_attempt_completions=counts["first"],
        recovered_completions=counts["recovered"],
        safely_stopped=counts["stopped"],
        awaiting_human=counts["awaiting_human"],
        failed=counts["failed"],
        unfinished=counts["ready"] + counts["running"] + counts["reconciling"],
        validated=validator is not None,
        pages_committed=pages,
        repeated_records=repeated,
        recoveries=dict(recoveries),
        retries_consumed=retries,
        human_wait_s=human_wait,
        active_s=active,
        since_last_checkpoint_s=stall,
        open_pause_age_s=pauses,
    )


def _claims(events: list[Event]) -> int:
    return sum(1 for e in events if e.kind == "lease_claimed")


def _active_seconds(events: list[Event]) -> float:
    """Sum of the spans from each lease claim to its release (or the next claim)."""
    total = 0.0
    start: datetime | None = None
    for e in events:
        if e.kind == "lease_claimed":
            if start is not None:
                total += (e.at - start).total_seconds()
            start = e.at
        elif e.kind == "lease_released" and start is not None:
            total += (e.at - start).total_seconds()
            start = None
    return total


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
