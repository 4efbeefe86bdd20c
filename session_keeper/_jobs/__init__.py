"""The durable job loop: checkpoints, leases, fenced commits, failure classes, budgets."""

from session_keeper._jobs._context import Accepted, Readback, StepContext
from session_keeper._jobs._loop import HumanPause, JobLoop, RunOutcome, Step, conversation_of

__all__ = [
    "Accepted",
    "HumanPause",
    "JobLoop",
    "Readback",
    "RunOutcome",
    "Step",
    "StepContext",
    "conversation_of",
]
