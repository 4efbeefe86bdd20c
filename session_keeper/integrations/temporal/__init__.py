"""Temporal: browser steps as activities on the worker that holds the browser (extra ``temporal``).

The JobLoop's semantics on Temporal's public API (see ``docs/guides/temporal.md``):

- **Worker side.** :class:`BrowserWorker` over a worker process's
  :class:`~session_keeper.KeeperPool`: :meth:`~BrowserWorker.claim_activities` on the
  shared task queue answer with the worker's own queue, and
  :meth:`~BrowserWorker.step_activities` run the :class:`BrowserSteps` there. Each
  step holds its conversation's profile (leased in the Store), calls ``ensure()`` with
  the turn ``<workflow id>/<activity id>`` (``/failover-<n>`` once the step
  moved to another worker) and gets a :class:`BrowserStep`.
- **Workflow side.** :class:`WorkflowBrowser` sends each step to the worker holding the
  browser, moves it to another worker when that one dies (heartbeat timeout, then
  schedule-to-start on its queue) with the last heartbeat's checkpoint, and turns
  :data:`LOGIN_REQUIRED` into a wait for :data:`SIGN_IN_SIGNAL`.

Workflow modules import this inside ``workflow.unsafe.imports_passed_through()``.
"""

from session_keeper.integrations.temporal._worker import (
    BrowserStep,
    BrowserStepDef,
    BrowserSteps,
    BrowserWorker,
    idempotency_key,
)
from session_keeper.integrations.temporal._workflow import (
    CLAIM_ACTIVITY,
    DENIED,
    LOGIN_REQUIRED,
    PROFILE_HELD,
    REFUSED,
    SIGN_IN_QUERY,
    SIGN_IN_SIGNAL,
    WRITE_OUTCOME_UNKNOWN,
    StepRequest,
    StepResult,
    WorkflowBrowser,
)

__all__ = [
    "CLAIM_ACTIVITY",
    "DENIED",
    "LOGIN_REQUIRED",
    "PROFILE_HELD",
    "REFUSED",
    "SIGN_IN_QUERY",
    "SIGN_IN_SIGNAL",
    "WRITE_OUTCOME_UNKNOWN",
    "BrowserStep",
    "BrowserStepDef",
    "BrowserSteps",
    "BrowserWorker",
    "StepRequest",
    "StepResult",
    "WorkflowBrowser",
    "idempotency_key",
]
