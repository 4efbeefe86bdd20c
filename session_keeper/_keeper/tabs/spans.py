"""What the keeper's spans say: a turn's attributes, and the span around a tab operation."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from session_keeper._keeper.guard_link.block_log import block_attributes
from session_keeper._model.facts import TurnFacts
from session_keeper._telemetry import Instruments, url_attributes
from session_keeper._util.log_fields import log_fields
from session_keeper.errors import NavigationBlocked

__all__ = ["TracedTab", "tab_operation", "traced_turn", "turn_attributes"]

P = ParamSpec("P")
R = TypeVar("R")


def turn_attributes(facts: TurnFacts) -> dict[str, Any]:
    """A turn's facts as span attributes: names and counts, never a URL's query or a cookie."""
    out: dict[str, Any] = {
        "session_keeper.conversation": facts.conversation,
        "session_keeper.generation": facts.generation,
        "session_keeper.restarted": facts.restarted,
        "session_keeper.first_turn": facts.first_turn,
        "session_keeper.lost.count": len(facts.lost),
    }
    if facts.lost:  # the common turn loses nothing: no lists for the SDK to copy
        out["session_keeper.lost.kinds"] = sorted({lost.kind for lost in facts.lost})
        out["session_keeper.lost.logins"] = sorted(x.name for x in facts.lost if x.kind == "login")
    if facts.previous_generation is not None:
        out["session_keeper.previous_generation"] = facts.previous_generation
    return out


async def traced_turn(
    instruments: Instruments,
    conversation: str,
    *,
    alive: Callable[[], bool],
    run: Callable[[], Awaitable[TurnFacts]],
) -> TurnFacts:
    """Run a turn (``run``: an ``ensure``) in the span ``session_keeper.ensure``, its facts as
    attributes, the conversation in its log records.

    A turn on a live browser outside any recording span costs less than its span would
    (row 19 of BENCHMARKS.md): it gets one, after the fact, only if it had news (a
    restart, a loss, a first turn, a renewal). Inside a caller's trace, or when the
    browser must be started (the launch's own spans are its children), always one.
    Only for instruments that trace: without, the caller runs the turn itself.
    """
    if alive() and not instruments.in_trace():
        start = time.time_ns()
        with log_fields(conversation=conversation):
            facts = await run()
        if facts.restarted or facts.lost or facts.first_turn or facts.renewed:
            instruments.span_of_past("session_keeper.ensure", start, turn_attributes(facts))
        return facts
    with instruments.span("session_keeper.ensure") as span, log_fields(conversation=conversation):
        facts = await run()
        if span.is_recording():
            span.set_attributes(turn_attributes(facts))
        return facts


class TracedTab(Protocol):
    """A tab whose operations are traced: its conversation and the URL it shows."""

    @property
    def conversation(self) -> str:
        """The tab's conversation."""
        ...

    @property
    def url(self) -> str:
        """The URL the page shows now."""
        ...


def tab_operation(
    name: str,
    located: Callable[[Any], tuple[Instruments, TracedTab]],
    before: Callable[[Any], Awaitable[None]] | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Wrap an async method of a tab (or of an element of one) in the span
    ``session_keeper.tab.<name>``; ``located(self)``: the instruments and the tab;
    ``before(self)``, when given, is awaited first (an act's held jar reads).

    The span names the conversation and the page's URL as scheme, host and path (before
    the operation; a ``goto``'s target too), and the log records inside carry the
    conversation. Nothing typed or filled is an attribute.
    """

    def wrap(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        span_name = "session_keeper.tab." + name

        @functools.wraps(method)
        async def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            if before is not None:
                await before(args[0])
            instruments, tab = located(args[0])
            if not instruments.tracing:
                with log_fields(conversation=tab.conversation):
                    return await method(*args, **kwargs)
            with (
                instruments.span(span_name) as span,
                log_fields(conversation=tab.conversation),
            ):
                if span.is_recording():
                    span.set_attribute("session_keeper.conversation", tab.conversation)
                    target = args[1] if name == "goto" and len(args) > 1 else None
                    try:
                        where = str(target) if isinstance(target, str) else tab.url
                    except Exception:  # a page already gone: the call itself says so
                        where = ""
                    if where:
                        span.set_attributes(url_attributes(where))
                try:
                    return await method(*args, **kwargs)
                except NavigationBlocked as exc:
                    # The refusal, on the span of the operation it refused.
                    if span.is_recording():
                        span.add_event("session_keeper.guard.refusal", block_attributes(exc.block))
                    raise

        return traced

    return wrap
