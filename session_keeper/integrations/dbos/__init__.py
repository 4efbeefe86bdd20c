"""DBOS: browser steps as DBOS steps, on the process's keeper (extra ``dbos``).

The JobLoop's semantics on DBOS's public API (see ``docs/guides/dbos.md``):

- **Steps.** :class:`BrowserSteps` declares each browser step as a DBOS step (with DBOS's
  retries, the only retry layer). A step holds its conversation's profile in the
  process's :class:`BrowserWorker` (a :class:`~session_keeper.KeeperPool` leasing its
  profiles in the Store), calls ``ensure()`` with the turn ``<workflow id>/<step id>``
  (``/recovery-<n>`` once DBOS recovered the workflow after its process died) and gets a
  :class:`BrowserStep`.
- **Workflow side.** :class:`WorkflowBrowser` runs the steps in a workflow and turns
  :class:`SignInNeeded` into a wait for a person: ``DBOS.recv`` on
  :func:`sign_in_topic`, answered by :func:`send_sign_in` once the sign-in is recorded.
"""

from session_keeper.integrations._result import StepResult
from session_keeper.integrations._steps import SignInNeeded, idempotency_key
from session_keeper.integrations.dbos._worker import (
    NOT_RETRIED,
    BrowserStep,
    BrowserSteps,
    BrowserWorker,
    retryable,
)
from session_keeper.integrations.dbos._workflow import (
    SIGN_IN_EVENT,
    SIGN_IN_TOPIC,
    BrowserStepDef,
    SignInWaits,
    StepRequest,
    WorkflowBrowser,
    send_sign_in,
    sign_in_topic,
    waiting_for_sign_in,
)

__all__ = [
    "NOT_RETRIED",
    "SIGN_IN_EVENT",
    "SIGN_IN_TOPIC",
    "BrowserStep",
    "BrowserStepDef",
    "BrowserSteps",
    "BrowserWorker",
    "SignInNeeded",
    "SignInWaits",
    "StepRequest",
    "StepResult",
    "WorkflowBrowser",
    "idempotency_key",
    "retryable",
    "send_sign_in",
    "sign_in_topic",
    "waiting_for_sign_in",
]
