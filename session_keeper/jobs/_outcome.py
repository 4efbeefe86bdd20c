"""How a run ends: the outcome it returns and the internal signal that ends it."""

from __future__ import annotations

from typing import Literal, assert_never

import attrs

from session_keeper._model.events import EventKind
from session_keeper.stores._records import JobState

TERMINAL: frozenset[str] = frozenset({"done", "failed", "stopped"})
#: The only states :meth:`JobLoop.run` returns (the README's list): never ``running``.
RUN_STATES: frozenset[str] = frozenset({"ready", "awaiting_human", "done", "failed", "stopped"})


@attrs.frozen(kw_only=True)
class RunOutcome:
    """How one :meth:`JobLoop.run` ended. A safe stop is never ``done``."""

    job_id: str
    state: JobState
    #: Why it paused or stopped, in words a person can act on.
    reason: str | None = None
    pages_committed: int = 0
    new_records: int = 0
    repeated_records: int = 0
    attempts_used: int = 0
    revision: int = 0
    next_cursor: str | None = None
    #: Another worker took the lease over; this run stopped touching the job.
    lease_lost: bool = False


#: The states a :class:`Stop` ends a run in: paused for a person, stopped safely, failed.
StopState = Literal["awaiting_human", "stopped", "failed"]


class Stop(Exception):
    """Raised inside a run to end it in ``state`` (paused, stopped or failed)."""

    def __init__(self, state: StopState, reason: str, *, login_site: str | None = None) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason
        #: The site whose login a pause waits for (``None``: not about a login).
        self.login_site = login_site


def stop_kind(state: StopState) -> EventKind:
    """The event a run that a :class:`Stop` ended in ``state`` is logged as."""
    match state:
        case "awaiting_human":
            return "human_pause"
        case "stopped":
            return "job_stopped"
        case "failed":
            return "job_failed"
        case _:
            assert_never(state)
