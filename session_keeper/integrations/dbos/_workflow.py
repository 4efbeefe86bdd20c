"""The workflow side: a :class:`WorkflowBrowser` runs a workflow's browser steps and turns
what they report into the workflow's decisions (a lost login: a wait for a person)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import attrs

from session_keeper._util.extras import needs_extra

with needs_extra("dbos", "session_keeper.integrations.dbos"):
    from dbos import DBOS

from session_keeper._model.grants import check_name
from session_keeper._util.validate import check_duration
from session_keeper.errors import InvalidArgumentType, UsageError
from session_keeper.integrations import _steps
from session_keeper.integrations._result import StepResult
from session_keeper.integrations._steps import SignInNeeded

#: The ``DBOS.recv`` topic prefix a workflow waits on for a recorded sign-in; the topic
#: of a conversation is :func:`sign_in_topic`. The message is ``{"conversation", "site"}``,
#: a hint only: the re-run step checks that the login is live.
SIGN_IN_TOPIC = "session_keeper.sign_in_recorded"
#: The ``DBOS.set_event`` key listing the sign-ins the workflow waits for
#: (``[{"conversation", "site", "wait"}]``; ``[]`` once none is awaited). ``wait`` is
#: the wait's id in the workflow (``<step id>/<dispatch>``): a watcher answers each once.
SIGN_IN_EVENT = "session_keeper.waiting_for_sign_in"


def sign_in_topic(conversation: str) -> str:
    """The ``DBOS.recv`` topic on which ``conversation``'s sign-ins are announced."""
    return f"{SIGN_IN_TOPIC}:{check_name(conversation, 'conversation')}"


async def send_sign_in(workflow_id: str, conversation: str, site: str) -> None:
    """Tell workflow ``workflow_id`` that a person signed ``conversation`` in to ``site``
    (``DBOS.send`` on :func:`sign_in_topic`). Send it after the sign-in is recorded."""
    message = {"conversation": conversation, "site": check_name(site, "site")}
    await DBOS.send_async(workflow_id, message, topic=sign_in_topic(conversation))


async def waiting_for_sign_in(workflow_id: str) -> list[dict[str, Any]]:
    """The sign-ins workflow ``workflow_id`` waits for now (its :data:`SIGN_IN_EVENT`)."""
    seen = await DBOS.get_event_async(workflow_id, SIGN_IN_EVENT, timeout_seconds=0)
    return list(seen) if seen else []


# A dataclass: DBOS pickles a step's inputs and outputs with the workflow.
@dataclasses.dataclass(frozen=True, kw_only=True)
class StepRequest:
    """What a browser step is given (built by :meth:`WorkflowBrowser.step`)."""

    conversation: str
    #: The step's own argument.
    arg: Any = None
    #: How many times the workflow has run this step (1, then 2 after a sign-in): a
    #: write is submitted unread only on the first attempt of the first.
    dispatch: int = 1
    #: The DBOS step id of the step's first dispatch: a re-run after a sign-in is the
    #: same turn, told the same facts.
    turn_step: int | None = None
    #: Routing hints for the process's :class:`~session_keeper.KeeperPool`.
    site: str | None = None
    account: str | None = None
    #: The :class:`WorkflowBrowser`'s own id, new in each execution of the workflow (a
    #: recovery runs the workflow function again): the process's
    #: :class:`BrowserWorker` reads the workflow's recovery count once per execution.
    execution: str | None = None


class SignInWaits:
    """The sign-ins each workflow running in this process waits for now.

    A workflow publishes one :data:`SIGN_IN_EVENT`, listing the waits of all its
    :class:`WorkflowBrowser` objects (one per conversation, waiting side by side), so they
    share this list. The process's :class:`BrowserWorker` owns it (its
    ``sign_in_waits``); a workflow reaches it through the step that asked for a person
    (:attr:`BrowserStepDef.sign_in_waits`). In memory only: a recovered workflow's waits
    replay in order and rebuild it as they were.
    """

    def __init__(self) -> None:
        self._by_workflow: dict[str, list[dict[str, Any]]] = {}
        #: One publisher at a time per workflow (see :meth:`publish`).
        self._publishing: dict[str, asyncio.Lock] = {}

    def add(self, workflow_id: str, wait: dict[str, Any]) -> None:
        """Record that ``workflow_id`` waits for ``wait``."""
        self._by_workflow.setdefault(workflow_id, []).append(wait)

    def remove(self, workflow_id: str, wait: dict[str, Any]) -> None:
        """Record that ``wait`` ended."""
        waiting = self._by_workflow.get(workflow_id, [])
        if wait in waiting:
            waiting.remove(wait)
        if not waiting:
            self._by_workflow.pop(workflow_id, None)

    def now(self, workflow_id: str) -> list[dict[str, Any]]:
        """What ``workflow_id`` waits for now."""
        return list(self._by_workflow.get(workflow_id, []))

    async def publish(self, workflow_id: str) -> None:
        """Set the workflow's :data:`SIGN_IN_EVENT` to what it waits for now.

        One publisher at a time per workflow, each writing the list as it is when its turn
        comes: two waits that start (or end) side by side would otherwise race their
        ``set_event`` writes, and the older list could be the last one written (the event
        then names one conversation while two wait).
        """
        lock = self._publishing.setdefault(workflow_id, asyncio.Lock())
        async with lock:
            await DBOS.set_event_async(SIGN_IN_EVENT, self.now(workflow_id))
        if workflow_id not in self._by_workflow and not lock.locked():
            self._publishing.pop(workflow_id, None)


@attrs.frozen(kw_only=True)
class BrowserStepDef(_steps.BrowserStepDef):
    """A browser step: its name, function, the logins it needs and its DBOS step.

    Made by :meth:`BrowserSteps.step`; :meth:`WorkflowBrowser.step` runs it.
    """

    #: The DBOS step (``await dbos_step(request)``) :meth:`WorkflowBrowser.step` runs.
    dbos_step: Callable[[StepRequest], Awaitable[StepResult]]
    #: The :class:`SignInWaits` of the :class:`BrowserWorker` serving the step in this
    #: process (a :class:`~session_keeper.errors.UsageError` when none does).
    sign_in_waits: Callable[[], SignInWaits]


class WorkflowBrowser:
    """One conversation's browser steps in a DBOS workflow.

    Create it inside the workflow function (each execution of the workflow its own: a
    recovery, in this process or another, runs the function again). Each :meth:`step` runs a
    :class:`BrowserSteps` step as a DBOS step of this workflow, on this process's
    :class:`BrowserWorker`; its turn id is ``<workflow id>/<step id>`` (the DBOS step id
    of its first dispatch), plus ``/recovery-<n>`` when DBOS recovered the workflow
    ``n`` times (a process died): every attempt of a step (a retry, a re-run after a
    sign-in) is told the same facts, a recovered step what the death took, a new step
    new ones.

    Decisions: a transient failure is retried by the step's DBOS retries (nothing
    retries underneath them); a lost login (:class:`SignInNeeded`) publishes
    :data:`SIGN_IN_EVENT`, waits on ``DBOS.recv`` for :func:`sign_in_topic` (the
    application calls :func:`send_sign_in` once the sign-in is recorded) and runs the
    step again; anything else the step raises reaches the workflow.
    """

    def __init__(
        self,
        conversation: str,
        *,
        site: str | None = None,
        account: str | None = None,
        recv_timeout: timedelta = timedelta(hours=1),
    ) -> None:
        self.conversation = check_name(conversation, "conversation")
        self._site = site
        self._account = account
        check_duration(recv_timeout, "recv_timeout")
        self._recv_timeout = recv_timeout.total_seconds()
        #: Every sign-in this session waited for (``{"conversation", "site"}``), in order.
        self.sign_ins: list[dict[str, str]] = []
        #: The facts of every step that reported news (``StepResult.told``), in order.
        self.told: list[dict[str, Any]] = []
        # Made here, in this execution of the workflow function, never replayed: a
        # recovered execution (in this process too) makes its own WorkflowBrowser.
        self._execution = uuid.uuid4().hex

    async def step(self, step: BrowserStepDef, arg: Any = None) -> StepResult:
        """Run browser step ``step`` (from :meth:`BrowserSteps.step`) with ``arg``.

        Returns its :class:`StepResult`. Raises what the step raised once its retries
        are spent (a :class:`~session_keeper.errors.WriteOutcomeUnknown` or
        :class:`~session_keeper.errors.Denied` at once).
        """
        if not isinstance(step, BrowserStepDef):
            raise InvalidArgumentType("step must be a BrowserSteps step of the dbos integration")
        workflow_id = DBOS.workflow_id
        if workflow_id is None:
            raise UsageError("WorkflowBrowser.step runs inside a DBOS workflow")
        dispatch, turn_step = 0, None
        while True:
            dispatch += 1
            request = StepRequest(
                conversation=self.conversation,
                arg=arg,
                dispatch=dispatch,
                turn_step=turn_step,
                site=self._site,
                account=self._account,
                execution=self._execution,
            )
            try:
                result = await step.dbos_step(request)
            except SignInNeeded as exc:
                if exc.step is not None:
                    turn_step = int(exc.step)
                wait = f"{exc.step}/{dispatch}"
                await self._wait_for_sign_in(step.sign_in_waits(), workflow_id, exc.site, wait)
                continue
            if result.told:
                self.told.append(result.facts)
            return result

    async def _wait_for_sign_in(
        self, waits: SignInWaits, workflow_id: str, site: str, wait: str
    ) -> None:
        self.sign_ins.append({"conversation": self.conversation, "site": site})
        request = {"conversation": self.conversation, "site": site, "wait": wait}
        waits.add(workflow_id, request)
        await waits.publish(workflow_id)
        try:
            while True:
                # A message is a hint: the re-run step checks that the login is live.
                said = await DBOS.recv_async(
                    sign_in_topic(self.conversation), timeout_seconds=self._recv_timeout
                )
                if isinstance(said, dict) and said.get("site") == site:
                    break
        finally:
            waits.remove(workflow_id, request)
        await waits.publish(workflow_id)
