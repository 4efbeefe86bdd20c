"""How a run ends: the outcome it returns and the internal signal that ends it."""

from __future__ import annotations

import attrs

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


class Stop(Exception):
    """Raised inside a run to end it in ``state`` (paused, stopped or failed)."""

    def __init__(self, state: JobState, reason: str, *, login_site: str | None = None) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason
        #: The site whose login a pause waits for (``None``: not about a login).
        self.login_site = login_site
