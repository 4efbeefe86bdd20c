"""The durable job loop: checkpoints, leases, fenced commits, failure classes, budgets.

Layout (each module one concept; collaborators get what they need passed in):

- ``_loop``       JobLoop, the facade: submit / run / resume / expire_pauses.
- ``_settings``   LoopSettings (fixed at construction) and the testing-mode hooks.
- ``_run``        JobRun: one run of one job, one page at a time, and each failure
                  class's policy (retry, wait, recover, pause, stop).
- ``_failures``   the one table that classifies a step's exception.
- ``_budgets``    deadline, attempt and no-progress budgets, across processes.
- ``_acceptance`` what a step's answer must satisfy before it is committed.
- ``_lease``      the run's lease: claim/release, keep fresh, heartbeat, long waits.
- ``_writes``     external writes: intent → submit → outcome, readback reconcile.
- ``_pauses``     HumanPause, resume (login recorded since the pause?), expiry.
- ``_origins``    a job's conversation, its allowed origins, its sign-in page.
- ``_outcome``    RunOutcome and the Stop signal that ends a run.
- ``_context``    what a step sees (StepContext) and returns (Accepted, Readback).
- ``_metrics``    JobMetrics from the store's jobs and event log.
- ``_pool_worker`` PoolJobLoop: claim the next job (SKIP LOCKED), run it on a pool's profile.
"""

from session_keeper._jobs._context import Accepted, Readback, Step, StepContext
from session_keeper._jobs._loop import JobLoop
from session_keeper._jobs._metrics import JobMetrics, Validator, summarize
from session_keeper._jobs._origins import conversation_of
from session_keeper._jobs._outcome import RunOutcome
from session_keeper._jobs._pauses import HumanPause
from session_keeper._jobs._pool_worker import JOB_ON_PROFILE, PoolJobLoop

__all__ = [
    "JOB_ON_PROFILE",
    "Accepted",
    "HumanPause",
    "JobLoop",
    "JobMetrics",
    "PoolJobLoop",
    "Readback",
    "RunOutcome",
    "Step",
    "StepContext",
    "Validator",
    "conversation_of",
    "summarize",
]
