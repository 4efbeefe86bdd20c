"""The durable job loop: contracts, steps, checkpoints, leases, pauses and metrics."""

from session_keeper.jobs._context import Accepted, Readback, Step, StepContext
from session_keeper.jobs._loop import JobLoop
from session_keeper.jobs._metrics import JobMetrics, summarize
from session_keeper.jobs._outcome import RunOutcome
from session_keeper.jobs._pauses import HumanPause
from session_keeper.jobs._pool_worker import PoolJobLoop
from session_keeper.stores._records import (
    ArtifactRef,
    Checkpoint,
    CommitResult,
    ExternalWrite,
    Job,
    JobContract,
    JobState,
    Lease,
    PageArtifact,
    ResultRecord,
    StoredResult,
    WriteStatus,
)

__all__ = [
    "Accepted",
    "ArtifactRef",
    "Checkpoint",
    "CommitResult",
    "ExternalWrite",
    "HumanPause",
    "Job",
    "JobContract",
    "JobLoop",
    "JobMetrics",
    "JobState",
    "Lease",
    "PageArtifact",
    "PoolJobLoop",
    "Readback",
    "ResultRecord",
    "RunOutcome",
    "Step",
    "StepContext",
    "StoredResult",
    "WriteStatus",
    "summarize",
]
