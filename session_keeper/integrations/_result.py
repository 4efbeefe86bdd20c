"""What a browser step returns to its workflow, on any engine (standard library only, so a
Temporal workflow module can import it under the sandbox)."""

import dataclasses
from typing import Any


# A dataclass, not attrs: Temporal's default data converter (de)serialises dataclasses,
# and DBOS pickles it; both engines store it as the step's output.
@dataclasses.dataclass(frozen=True, kw_only=True)
class StepResult:
    """What a browser step returns to its workflow."""

    #: What the step returned.
    value: Any
    #: This turn's facts (``TurnFacts.to_dict()``): the same on every attempt of the step.
    facts: dict[str, Any]
    #: The worker that ran it (its ``worker_id``).
    worker: str
    #: Whether the facts report news (a restart, a loss, a renewal) to act on.
    told: bool
