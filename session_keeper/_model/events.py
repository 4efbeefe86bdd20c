"""What the event log can say, as data: the one table of event kinds and what each means.

Every event the package appends (:class:`~session_keeper.stores.Event`) has one of these
kinds; the store keeps the same strings it always kept. ``Event.kind`` is typed
:data:`EventKind`, so ``mypy --strict`` refuses a writer that names a kind missing here.
A new kind is two edits: its name in :data:`EventKind` with its meaning in
:func:`event_meaning` (which ends in ``assert_never``, so mypy points at a missing case),
and the writer that appends it.
"""

from __future__ import annotations

from typing import Final, Literal, assert_never, get_args

__all__ = [
    "AUDIT_ARCHIVE_KIND",
    "AUDIT_CHAIN_KINDS",
    "AUDIT_ENTRY_KIND",
    "AUDIT_HEAD_KIND",
    "EVENT_KINDS",
    "EventKind",
    "event_meaning",
]

#: The kind of an event in the log: every kind the package writes, grouped by what it is
#: about (:func:`event_meaning` says what each one means).
EventKind = Literal[
    # A job's life (the job loop and the store's job operations).
    "job_submitted",
    "job_state_changed",
    "job_running",
    "job_stopped",
    "job_failed",
    "page_committed",
    "step_failed",
    "budget_exhausted",
    "browser_restarted",
    "write_unknown",
    "rate_limited",
    "rate_limited_deferred",
    # A job's lease.
    "lease_claimed",
    "lease_released",
    "lease_lost",
    "lease_given_up",
    # A person's part in a job.
    "human_pause",
    "human_resumed",
    "human_resume_refused",
    "human_cancelled",
    "human_pause_expired",
    # A job's writes to the outside world (the store's external-write ledger).
    "external_write_intent",
    "external_write_confirmed",
    "external_write_unknown",
    "external_write_reconciled",
    # A browser profile's lease (the pool).
    "profile_acquired",
    "profile_released",
    "job_on_profile",
    # The Guard and the audit chain (kept by retention whatever their age).
    "guard_block",
    "audit",
    "audit_head",
    "audit_archive",
]

#: Every kind in :data:`EventKind`, for checks at run time.
EVENT_KINDS: Final[frozenset[EventKind]] = frozenset(get_args(EventKind))

#: The kind of an entry of the audit chain (``AuditLog`` writes it; see its module).
AUDIT_ENTRY_KIND: Final[EventKind] = "audit"
#: The kind of the audit chain's sealed head.
AUDIT_HEAD_KIND: Final[EventKind] = "audit_head"
#: The kind of the audit chain's archive mark: where the chain goes on after its oldest
#: part was removed.
AUDIT_ARCHIVE_KIND: Final[EventKind] = "audit_archive"
#: Every kind of the audit chain, in one place: ``AuditLog`` writes them and the store
#: never prunes them (only an audit archive pass removes entries and heads).
AUDIT_CHAIN_KINDS: Final[tuple[EventKind, EventKind, EventKind]] = (
    AUDIT_ENTRY_KIND,
    AUDIT_HEAD_KIND,
    AUDIT_ARCHIVE_KIND,
)


def event_meaning(kind: EventKind) -> str:
    """What an event of ``kind`` says, in one line (for a person reading the log)."""
    match kind:
        case "job_submitted":
            return "a job's contract was stored, ready to run"
        case "job_state_changed":
            return "a job moved to another state (the store's default record of it)"
        case "job_running":
            return "a run took the job up and it is running"
        case "job_stopped":
            return "a run stopped the job safely; it can be resumed from its cursor"
        case "job_failed":
            return "a run ended the job as failed"
        case "page_committed":
            return "a page's records and the checkpoint after it were committed together"
        case "step_failed":
            return "one attempt at a step failed (its failure class says how)"
        case "budget_exhausted":
            return "a deadline, attempt or no-progress budget ran out and the job stopped"
        case "browser_restarted":
            return "the browser restarted under a running job (its lost tab's URL noted)"
        case "write_unknown":
            return "a write to the outside world may or may not have happened; a person must look"
        case "rate_limited":
            return "the site asked the job to slow down"
        case "rate_limited_deferred":
            return "the job was handed back to wait out a site's rate limit"
        case "lease_claimed":
            return "a worker claimed a job's lease"
        case "lease_released":
            return "a worker released a job's lease"
        case "lease_lost":
            return "a worker's lease on a job expired or was taken over mid-run"
        case "lease_given_up":
            return "a worker handed back a job whose lease kept expiring"
        case "human_pause":
            return "a job paused for a person (to sign in, or to decide)"
        case "human_resumed":
            return "a person resumed a paused job"
        case "human_resume_refused":
            return "a resume was refused: there is still no usable login to the job's site"
        case "human_cancelled":
            return "a person cancelled a paused job"
        case "human_pause_expired":
            return "a human pause waited past its expiry and the job stopped"
        case "external_write_intent":
            return "a job recorded its intent to write to the outside world"
        case "external_write_confirmed":
            return "an external write was confirmed done"
        case "external_write_unknown":
            return "an external write's outcome is unknown"
        case "external_write_reconciled":
            return "a person settled an external write whose outcome was unknown"
        case "profile_acquired":
            return "a worker acquired a browser profile's lease"
        case "profile_released":
            return "a worker released a browser profile's lease"
        case "job_on_profile":
            return "a pool worker ran a job on a browser profile"
        case "guard_block":
            return "the Guard refused a request (what and why, never a secret)"
        case "audit":
            return "an entry of the sealed audit chain"
        case "audit_head":
            return "a sealed head of the audit chain (its length and last digest)"
        case "audit_archive":
            return "where the audit chain goes on after older entries were archived"
        case _:
            assert_never(kind)
