"""The durable job loop: checkpoints, leases, fenced commits, failure classes, budgets."""

from session_keeper._jobs._context import Accepted, Readback, StepContext
from session_keeper._jobs._loop import HumanPause, JobLoop, RunOutcome, Step, conversation_of
from session_keeper._jobs._metrics import JobMetrics, Validator, summarize

__all__ = [
    "Accepted",
    "HumanPause",
    "JobLoop",
    "JobMetrics",
    "Readback",
    "RunOutcome",
    "Step",
    "StepContext",
    "Validator",
    "conversation_of",
    "summarize",
]
