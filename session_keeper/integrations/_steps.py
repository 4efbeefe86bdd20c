"""A browser step on a durable execution engine, whichever engine runs it.

Temporal (``integrations.temporal``) and DBOS (``integrations.dbos``) run the same
thing: a step declared once (:class:`StepSet`), holding its conversation's profile
for the step, calling ``ensure()`` with a turn id the engine's identity of the attempt
gives (:func:`run_turn`), checking the logins it needs are live, reopening a lost tab
at its last verified URL, and writing to the outside world at most once
(:meth:`BrowserStep.write`). Each engine module only maps these onto its own failures,
identities and waits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import attrs

from session_keeper._browser.backend import PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.tabs.conversation_tab import ConversationTab
from session_keeper._model.cookies import normalize_site
from session_keeper._model.facts import TurnFacts
from session_keeper._model.grants import check_name
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    LoginRequired,
    SignedOut,
    WriteOutcomeUnknown,
)
from session_keeper.integrations._result import StepResult
from session_keeper.jobs import Readback
from session_keeper.jobs._failures import SUBMIT_FAILURES

log = scrubbing_logger("session_keeper.integrations")

#: What a browser step is: ``await fn(step, arg)`` returns a value the engine can store.
#: ``step`` is the engine's :class:`BrowserStep` (a subclass on Temporal), so it is typed
#: ``Any`` here: a function annotated with either engine's class fits.
StepFn = Callable[[Any, Any], Awaitable[Any]]


@attrs.frozen(kw_only=True)
class BrowserStepDef:
    """A browser step: its ``name`` on the engine, the function, the logins it needs live."""

    name: str
    fn: StepFn
    sites: tuple[str, ...] = ()


DefT = TypeVar("DefT", bound=BrowserStepDef)


class StepSet(Generic[DefT]):
    """The browser steps an application declares, each under a name unique in the set."""

    #: Names the engine module keeps for itself.
    reserved: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._defs: dict[str, DefT] = {}

    def _declare(
        self,
        name: str | None,
        sites: Iterable[str],
        make: Callable[[str, StepFn, tuple[str, ...]], DefT],
    ) -> Callable[[StepFn], DefT]:
        needed = tuple(normalize_site(check_name(s, "site")) for s in sites)

        def declare(fn: StepFn) -> DefT:
            if not callable(fn):
                raise InvalidArgumentType("a browser step must be an async function")
            step_name = check_name(name if name is not None else fn.__name__, "step name")
            if step_name in self._defs or step_name in self.reserved:
                raise InvalidArgument(f"a browser step named {step_name!r} is declared already")
            made = make(step_name, fn, needed)
            self._defs[step_name] = made
            return made

        return declare

    def __iter__(self) -> Iterator[DefT]:
        return iter(tuple(self._defs.values()))


def step_result(value: Any, facts: TurnFacts, worker: str) -> StepResult:
    """The :class:`StepResult` of a turn that returned ``value``."""
    return StepResult(
        value=value,
        facts=facts.to_dict(),
        worker=worker,
        told=bool(facts.restarted or facts.lost or facts.renewed),
    )


class SignInNeeded(LoginRequired):
    """A browser step needs a person to sign ``conversation`` in to ``site``.

    Non-retryable: no retry helps until someone signs in. The workflow waits for a
    person (Temporal: a signal; DBOS: a message), then runs the step again, which checks
    the login is live. ``facts``: the turn's facts (``TurnFacts.to_dict()``); ``step``:
    the engine's id of the step's first dispatch, which every re-run keeps as its turn;
    ``checkpoint``: the step's last checkpoint, where the re-run resumes (a re-run is a
    new attempt, which starts with no progress of its own). Carries no cookie, password
    or token.
    """

    def __init__(
        self,
        conversation: str,
        site: str,
        facts: Mapping[str, Any],
        *,
        step: str | None = None,
        checkpoint: Any = None,
    ) -> None:
        super().__init__(f"{conversation} needs a live login to {site}; ask a person to sign in")
        self.conversation = conversation
        self.site = site
        self.facts = dict(facts)
        self.step = step
        self.checkpoint = checkpoint

    def __reduce__(self) -> tuple[Any, ...]:
        # An engine that stores the failure (DBOS pickles it) gets it back whole.
        return (
            _sign_in_needed,
            (self.conversation, self.site, self.facts, self.step, self.checkpoint),
        )


def _sign_in_needed(
    conversation: str, site: str, facts: Mapping[str, Any], step: str | None, checkpoint: Any
) -> SignInNeeded:
    return SignInNeeded(conversation, site, facts, step=step, checkpoint=checkpoint)


def idempotency_key(workflow_id: str, step_id: str, key: str) -> str:
    """The idempotency key of write ``key`` of a step: the same on every attempt of it."""
    return f"{workflow_id}:{step_id}:{key}"


class BrowserStep(Generic[PageT]):
    """What a step function gets: the turn's facts, the page, the keeper and writes."""

    def __init__(
        self,
        keeper: SessionKeeper[PageT],
        facts: TurnFacts,
        conversation: str,
        *,
        worker_id: str,
        workflow_id: str,
        step_id: str,
        fresh: bool,
        confirm_write: Callable[[str], Awaitable[bool]],
    ) -> None:
        self._keeper = keeper
        self._confirm_write = confirm_write
        #: This turn's facts: the same on every attempt of the step.
        self.facts = facts
        self.conversation = conversation
        #: The worker running this attempt.
        self.worker_id = worker_id
        self._workflow_id = workflow_id
        self._step_id = step_id
        self._fresh = fresh
        self._written: set[str] = set()

    @property
    def keeper(self) -> SessionKeeper[PageT]:
        """The keeper of the conversation's profile on this worker."""
        return self._keeper

    async def page(self, url: str | None = None) -> PageT:
        """The conversation's raw page (as a ``JobLoop`` step's ``ctx.page``), at ``url``.

        Unguarded: never hand it to LLM-driven code; use :meth:`tab` for that.
        """
        return await self._keeper.unguarded_page(self.conversation, url)

    async def tab(self, url: str | None = None) -> ConversationTab:
        """The conversation's guarded :class:`~session_keeper.ConversationTab`."""
        return await self._keeper.tab(self.conversation, url)

    def idempotency_key(self, key: str) -> str:
        """The idempotency key of write ``key``: workflow id + step id + ``key``."""
        return idempotency_key(self._workflow_id, self._step_id, check_name(key, "key"))

    async def write(
        self,
        key: str,
        submit: Callable[[PageT, str], Awaitable[Mapping[str, object]]],
        readback: Callable[[PageT, str], Awaitable[Readback]],
        *,
        url: str | None = None,
        idempotent: bool = True,
    ) -> Mapping[str, object]:
        """An external write, done at most once as far as the destination can tell.

        ``submit(page, idem_key)`` performs it; ``readback(page, idem_key)`` says whether
        it happened (:class:`~session_keeper.jobs.Readback`). Both start on ``url``
        (default: the page the step is on). Only the first attempt of the step's first
        dispatch submits unread; every other attempt (a retry, a failover, a recovery)
        reads back first and returns what the destination says was applied. Before any
        submit, the intent to submit ``idem_key`` is recorded in the keeper's Store
        (fenced by the profile's lease): an attempt that finds one recorded reads back
        first too, even when its engine calls it the first (a DBOS workflow resumed
        after a cancel, a Temporal reset). A submit that fails is read back at once.
        ``idempotent``: whether the destination deduplicates by the key (then an attempt
        that reads ``absent`` submits again under the same key).

        A readback that raises :class:`LoginRequired` (the destination wants a sign-in
        first) passes it on: the step waits for a person and reads back when re-run.
        Raises :class:`WriteOutcomeUnknown` (non-retryable) when the readback cannot
        tell, or a non-idempotent write's outcome is in doubt; the submit's own
        (retryable) failure when a failed submit reads back ``absent`` on an idempotent
        destination.
        """
        idem = self.idempotency_key(key)
        if idem in self._written:
            raise InvalidArgument(f"write {key!r} was done already in this step")
        self._written.add(idem)
        start = url if url is not None else self._keeper.current_url(self.conversation)
        if start is None:
            raise InvalidArgument("write needs url=: the conversation's tab shows no page")

        async def read() -> Readback:
            try:
                seen = await readback(await self.page(start), idem)
            except LoginRequired:
                # The destination asks for a sign-in before it answers: a person signs
                # in, and the step's re-run reads back again. Not "unknown".
                raise
            except Exception as exc:
                # Whatever stopped the readback (its navigation included) told us nothing.
                log.warning("readback of %s failed: %s", key, type(exc).__name__)
                return Readback(status="unknown")
            if not isinstance(seen, Readback):
                raise InvalidArgumentType("readback must return a Readback")
            return seen

        page = await self.page(start)
        read_first = not self._fresh
        while True:
            if read_first:
                # An earlier attempt may have reached the destination: read back first.
                seen = await read()
                if seen.status == "applied":
                    log.info("write %s reconciled by readback", key)
                    return seen.outcome
                if seen.status == "unknown" or not idempotent:
                    raise WriteOutcomeUnknown(
                        f"external write {key!r}: readback says {seen.status}; "
                        "a person must reconcile it"
                    )
                page = await self.page(start)
            # Fencing and intent, in one store transaction just before the submit: a
            # worker paused past its profile's lease (another may hold it now, and run
            # this very step) must not write, and records nothing (ProfileLeaseLost
            # fences its browser); a worker still holding it records that it is about
            # to submit, so no later attempt submits unread, whatever its engine says.
            first = await self._confirm_write(idem)
            if first or read_first:
                break
            # The engine calls this attempt the write's first (a resumed or reset
            # workflow counts again), but another one recorded its intent to submit:
            # it may have reached the destination.
            log.info("write %s: an earlier attempt meant to submit it; reading back", key)
            read_first = True
        try:
            return await submit(page, idem)
        except SUBMIT_FAILURES as exc:
            seen = await read()
            if seen.status == "applied":
                log.info("write %s reconciled by readback after %s", key, type(exc).__name__)
                return seen.outcome
            if seen.status == "absent" and idempotent:
                # Not applied: the engine's next attempt reads back again, then submits
                # under the same key.
                raise
            raise WriteOutcomeUnknown(
                f"external write {key!r}: submit failed ({type(exc).__name__}), readback "
                f"{seen.status}; a person must reconcile it"
            ) from exc


StepT = TypeVar("StepT", bound=BrowserStep[Any])


async def run_turn(
    keeper: SessionKeeper[PageT],
    made: BrowserStepDef,
    arg: Any,
    *,
    conversation: str,
    turn: str,
    site_hint: str | None,
    reported_by: str,
    make_step: Callable[[TurnFacts], StepT],
    checkpoint: Callable[[], Any] = lambda: None,
    one_write: bool = False,
) -> tuple[Any, TurnFacts]:
    """One attempt of a browser step: ``ensure()`` with ``turn``, then the step.

    Before the step: every login it needs (its ``sites``, and any of the
    conversation's own logins the facts say were lost) must be live, checked on every
    attempt (a sign-in message is no proof anyone signed in), and a lost tab reopens at
    its last verified URL. A step that raises :class:`LoginRequired` (a
    :class:`SignedOut` is reported to the keeper first: the login is lost, told once to
    every conversation) and a missing login both raise :class:`SignInNeeded`, carrying
    the step's last ``checkpoint()``. The site of a step's lost login is its first
    declared one, else ``site_hint``, else the one its tab is on: a step declaring none
    must still not be retried against a sign-in page until its retries run out. After
    the step, the tab's URL is marked verified (a lost tab reopens where the step
    ended). Returns the step's value and the turn's facts; anything else the step
    raises passes.

    ``one_write``: a turn with nothing to tell is written with the verified URL, once,
    after the step and before it returns (``ensure(defer_quiet_write=True)``), not
    before the step and again after it. Only for an engine that never re-runs a turn id
    in another process (see :meth:`SessionKeeper.ensure`).
    """
    facts = await keeper.ensure(conversation, turn=turn, defer_quiet_write=one_write)
    live = {r.site for r in keeper.logins()}
    for site in _needed(facts, made.sites):
        if site not in live:
            raise SignInNeeded(conversation, site, facts.to_dict(), checkpoint=checkpoint())
    if facts.lost_tab is not None and facts.lost_tab.last_url:
        await keeper.unguarded_page(conversation, facts.lost_tab.last_url)
    try:
        value = await made.fn(make_step(facts), arg)
    except SignInNeeded:
        raise
    except LoginRequired as exc:
        signed_out = _site_of(made, site_hint, keeper.current_url(conversation))
        if signed_out is None:
            raise
        if isinstance(exc, SignedOut):
            # The site showed it is signed out: its login is lost, told once to all.
            await keeper.report_signed_out(signed_out, reported_by=reported_by)
        raise SignInNeeded(
            conversation, signed_out, facts.to_dict(), checkpoint=checkpoint()
        ) from exc
    if keeper.has_tab(conversation):
        keeper.mark_verified(conversation)
    if one_write:
        # The turn's record and the verified URL, stored before the engine records the
        # step's result: a recovered workflow's lost tab reopens where this step ended.
        await keeper.persist()
    return value, facts


def _needed(facts: TurnFacts, sites: Iterable[str]) -> list[str]:
    wanted = list(sites)
    for x in facts.lost_logins:
        if x.owner == facts.conversation and x.name not in wanted:
            wanted.append(x.name)
    return wanted


def _site_of(made: BrowserStepDef, site_hint: str | None, url: str | None) -> str | None:
    if made.sites:
        return made.sites[0]
    if site_hint:
        return normalize_site(site_hint)
    host = urlsplit(url).hostname if url else None
    return normalize_site(host) if host else None
