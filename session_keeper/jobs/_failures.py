"""Failure classification: which class a step's exception belongs to, in one table.

The policy for each class (retry with backoff, wait, recover, pause, stop) is applied
by :class:`~session_keeper.jobs._run.JobRun`; this module only names the class.
"""

from __future__ import annotations

from typing import Literal

from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from session_keeper.errors import (
    BrowserError,
    Denied,
    InvalidArgument,
    LoginRequired,
    PageChanged,
    PolicyRefusal,
    RateLimited,
    StepFailure,
    StoreError,
    TransientFailure,
    WriteOutcomeUnknown,
)

#: Timeouts, ours and Playwright's (which is not the builtin ``TimeoutError``).
TIMEOUTS: tuple[type[BaseException], ...] = (TimeoutError, PlaywrightTimeoutError)
#: Failures retried with backoff inside the attempt budget.
TRANSIENT: tuple[type[BaseException], ...] = (TransientFailure, BrowserError, *TIMEOUTS)
#: A submit that raised one of these may or may not have reached the destination.
SUBMIT_FAILURES: tuple[type[BaseException], ...] = (StepFailure, BrowserError, OSError, *TIMEOUTS)

FailureClass = Literal[
    "rate_limit",  # wait the site's delay (or defer past the deadline)
    "transient",  # retry with full-jitter backoff
    "changed_page",  # recover a bounded number of times, without backoff
    "login",  # signed out (tell the keeper) or login needed: a person signs in
    "refusal",  # the keeper's rules said no (a grant is missing): a person decides
    "denial",  # stop: the site refused
    "write_unknown",  # an external write nobody can settle: a person reconciles
    "usage",  # a step misused the API: the caller sees the error
    "store",  # the store is unreachable or full: the run ends, the job stays resumable
    "unclassified",  # bounded retries, then failed (transient if the browser died)
]

#: First match wins; the order matters where classes overlap.
FAILURE_TABLE: tuple[tuple[tuple[type[BaseException], ...], FailureClass], ...] = (
    # An outage of the store (the keeper's UnsavedChanges included) says nothing about
    # the step: spending attempts on it would fail a job a database restart interrupted.
    ((StoreError,), "store"),
    ((RateLimited,), "rate_limit"),
    # A refusal (the Guard blocked a navigation) is an answer, not a breakage: retrying
    # asks the same rules again; a grant, given by a person, is what would help.
    ((PolicyRefusal,), "refusal"),
    (TRANSIENT, "transient"),
    ((PageChanged,), "changed_page"),
    ((LoginRequired,), "login"),
    ((Denied,), "denial"),
    ((WriteOutcomeUnknown,), "write_unknown"),
    ((InvalidArgument,), "usage"),
)


def classify(exc: BaseException) -> FailureClass:
    """The failure class of what a step (or its page preparation) raised."""
    for types, failure_class in FAILURE_TABLE:
        if isinstance(exc, types):
            return failure_class
    return "unclassified"
