"""LangGraph: a node that starts each browser turn honestly (extra ``langgraph``).

:func:`browser_node` wraps your step. Each time LangGraph runs it, the wrapper

1. calls ``keeper.ensure(conversation, turn=...)`` — the conversation is the graph's
   ``thread_id``, the turn id is the task's checkpoint namespace (``node:task-id``),
   which LangGraph keeps the same when it re-executes the task (resume after
   ``interrupt()``, a ``RetryPolicy`` retry, a restart from the checkpointer after a
   crash). So every re-execution sees the same restart facts and the next step does
   not see them again; a re-execution in a new process sees exactly what the first
   run saw (the new process's own launch is the next step's news);
2. for each login the step needs (``sites=``) or the turn lost, checks it is live now
   (re-verified on every run, so also after a resume) and otherwise calls
   ``interrupt({"type": "sign_in", ...})`` for a human sign-in; the resume value is
   not trusted — the login must be recorded (``keeper.record_login``) by then;
3. calls your step with a :class:`BrowserTurn` (facts, the conversation's
   :class:`~session_keeper.ConversationTab`, ``decide``) and returns its update plus
   the facts: ``browser`` (this turn's ``TurnFacts.to_dict()``) and ``browser_told``
   (appended once per turn that reported a restart or a renewal). Put :class:`BrowserState`'s keys
   in your state schema.

:func:`sync_browser_node` is the same for sync graphs, over a
:class:`~session_keeper.integrations.sync.SyncKeeper`.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Annotated, Any, Generic, Protocol, TypedDict, TypeVar

from session_keeper._util.extras import needs_extra

# Without the extra: MissingExtra (a ModuleNotFoundError) naming the pip install.
with needs_extra("langgraph", "session_keeper.integrations.langgraph"):
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import interrupt

from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.tabs.conversation_tab import ConversationTab
from session_keeper._model.cookies import normalize_site
from session_keeper._model.facts import Decision, LoginRecord, TurnFacts
from session_keeper._model.grants import check_name
from session_keeper.errors import InvalidArgument
from session_keeper.integrations.sync import SyncKeeper, SyncTab

__all__ = [
    "BrowserState",
    "BrowserTurn",
    "SyncBrowserTurn",
    "browser_node",
    "sign_in_request",
    "sync_browser_node",
    "turn_id",
]

PageT = TypeVar("PageT")
StateT = TypeVar("StateT")
StateT_contra = TypeVar("StateT_contra", contravariant=True)


class AsyncNode(Protocol[StateT_contra]):
    """What :func:`browser_node` returns: an async LangGraph node taking the config."""

    def __call__(self, state: StateT_contra, config: RunnableConfig) -> Awaitable[dict[str, Any]]:
        """Run one turn; return the state update."""
        ...


class SyncNode(Protocol[StateT_contra]):
    """What :func:`sync_browser_node` returns: a sync LangGraph node taking the config."""

    def __call__(self, state: StateT_contra, config: RunnableConfig) -> dict[str, Any]:
        """Run one turn; return the state update."""
        ...


#: ``interrupt()`` payload type of a sign-in request.
SIGN_IN = "sign_in"


class BrowserState(TypedDict, total=False):
    """State keys :func:`browser_node` writes; add them to your graph's state schema."""

    #: This turn's facts (``TurnFacts.to_dict()``).
    browser: dict[str, Any]
    #: Every restart told to this thread, once per turn that reported one.
    browser_told: Annotated[list[dict[str, Any]], operator.add]


def turn_id(config: RunnableConfig) -> str:
    """The id of the running task, stable across its re-executions.

    LangGraph's ``langgraph_checkpoint_ns`` (``node:task-id``): the task id is derived
    from the checkpoint and step, so a resume, a retry or a restart from the
    checkpointer re-runs the task under the same id. Raises
    :class:`~session_keeper.InvalidArgument` outside a running LangGraph task.
    """
    metadata = config.get("metadata") or {}
    ns = metadata.get("langgraph_checkpoint_ns") or (config.get("configurable") or {}).get(
        "checkpoint_ns"
    )
    if not isinstance(ns, str) or not ns:
        raise InvalidArgument("no LangGraph task in this config (call from inside a node)")
    return ns


def _thread(config: RunnableConfig) -> str:
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None:
        raise InvalidArgument("the graph was invoked without configurable.thread_id")
    return check_name(str(thread), "conversation")


def sign_in_request(conversation: str, site: str, facts: TurnFacts) -> dict[str, Any]:
    """The ``interrupt()`` payload asking a human to sign ``conversation`` in to ``site``."""
    return {
        "type": SIGN_IN,
        "conversation": conversation,
        "site": site,
        "reason": f"{conversation} needs a live login to {site}; ask a human to sign in",
        "facts": facts.to_dict(),
        "prompt": facts.to_prompt(),
    }


def _needed(facts: TurnFacts, sites: Iterable[str]) -> list[str]:
    wanted = [normalize_site(s) for s in sites]
    for x in facts.lost_logins:
        if x.owner == facts.conversation and x.name not in wanted:
            wanted.append(x.name)
    return wanted


def _missing(logins: Iterable[LoginRecord], sites: Iterable[str]) -> list[str]:
    live = {r.site for r in logins}
    return [s for s in sites if s not in live]


def _update(facts: TurnFacts, result: Mapping[str, Any] | None) -> dict[str, Any]:
    update: dict[str, Any] = dict(result or {})
    update["browser"] = facts.to_dict()
    if facts.restarted or facts.renewed:
        # A renewal is news too: the page state from before the new sign-in may be stale.
        update["browser_told"] = [facts.to_dict()]
    return update


class BrowserTurn(Generic[PageT]):
    """What a wrapped step gets: this turn's facts and the conversation's tab."""

    def __init__(self, keeper: SessionKeeper[PageT], facts: TurnFacts) -> None:
        self._keeper = keeper
        #: This turn's facts (the same on every re-execution of the turn).
        self.facts = facts
        self.conversation = facts.conversation

    async def tab(self, url: str | None = None) -> ConversationTab:
        """The conversation's :class:`~session_keeper.ConversationTab` (``keeper.tab``)."""
        return await self._keeper.tab(self.conversation, url)

    def decide(self, site: str, action: str = "read", *, assumes_login: bool = False) -> Decision:
        """``keeper.decide`` for this conversation."""
        return self._keeper.decide(self.conversation, site, action, assumes_login=assumes_login)


def browser_node(
    keeper: SessionKeeper[PageT],
    step: Callable[[StateT, BrowserTurn[PageT]], Awaitable[Mapping[str, Any] | None]] | None = None,
    *,
    sites: Iterable[str] = (),
) -> AsyncNode[StateT]:
    """A LangGraph node: ``ensure()`` for the thread, sign-in interrupts, then ``step``.

    ``sites``: logins the step needs live. ``step(state, turn)`` returns a state update
    (or ``None``); without a step the node only writes the facts. Raises what
    ``ensure()`` and ``step`` raise (so a ``RetryPolicy`` on the node retries them).
    """
    needed_sites = tuple(check_name(s, "site") for s in sites)

    async def node(state: StateT, config: RunnableConfig) -> dict[str, Any]:
        conversation = _thread(config)
        facts = await keeper.ensure(conversation, turn=turn_id(config))
        for site in _needed(facts, needed_sites):
            # Re-verified on every run: a resume is no proof that anyone signed in.
            while _missing(keeper.logins(), [site]):
                interrupt(sign_in_request(conversation, site, facts))
        result = None if step is None else await step(state, BrowserTurn(keeper, facts))
        return _update(facts, result)

    return node


class SyncBrowserTurn:
    """:class:`BrowserTurn` for sync steps (over a :class:`SyncKeeper`)."""

    def __init__(self, keeper: SyncKeeper[Any], facts: TurnFacts) -> None:
        self._keeper = keeper
        self.facts = facts
        self.conversation = facts.conversation

    def tab(self, url: str | None = None) -> SyncTab:
        """The conversation's tab as a :class:`SyncTab`."""
        return self._keeper.tab(self.conversation, url)

    def decide(self, site: str, action: str = "read", *, assumes_login: bool = False) -> Decision:
        """``keeper.decide`` for this conversation."""
        return self._keeper.decide(self.conversation, site, action, assumes_login=assumes_login)


def sync_browser_node(
    keeper: SyncKeeper[Any],
    step: Callable[[StateT, SyncBrowserTurn], Mapping[str, Any] | None] | None = None,
    *,
    sites: Iterable[str] = (),
) -> SyncNode[StateT]:
    """:func:`browser_node` for a sync graph (``graph.invoke``), over a SyncKeeper."""
    needed_sites = tuple(check_name(s, "site") for s in sites)

    def node(state: StateT, config: RunnableConfig) -> dict[str, Any]:
        conversation = _thread(config)
        facts = keeper.ensure(conversation, turn=turn_id(config))
        for site in _needed(facts, needed_sites):
            while _missing(keeper.logins(), [site]):
                interrupt(sign_in_request(conversation, site, facts))
        result = None if step is None else step(state, SyncBrowserTurn(keeper, facts))
        return _update(facts, result)

    return node
