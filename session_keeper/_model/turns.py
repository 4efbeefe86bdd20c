"""Facts per turn: what a re-executed turn is told (``ensure(conversation, turn=...)``).

Frameworks run the same step more than once (LangGraph on resume and on retry, MCP
clients on retry). Facts told once to a run that was then thrown away would be lost,
so the keeper keeps, per conversation, the current turn id and what it was told; the
same turn id is told the same facts again (plus a restart in the middle of the turn, in
the process running it: :func:`same_turn`), a new turn id starts afresh. A re-execution
in a new process is told exactly the saved facts: that process's launch is the next
turn's news.
"""

from __future__ import annotations

import attrs

from session_keeper._model.facts import Lost, TurnFacts


def canonical(facts: TurnFacts) -> TurnFacts:
    """``facts`` as they read back from JSON (UTC instants, URLs without query), so the
    first telling and every re-telling — in this process or the next — are equal."""
    return TurnFacts.from_dict(facts.to_dict())


def same_turn(told: TurnFacts, new: TurnFacts) -> TurnFacts:
    """What a re-execution of a turn is told: what the turn was told, plus anything new.

    Nothing new (the usual case): exactly ``told``. A restart in the middle of the turn
    adds its facts (newest word on a login or tab wins) and moves to the new browser.
    """
    if (
        not new.restarted
        and not new.lost
        and not new.revalidate
        and not new.restored
        and not new.renewed
    ):
        if new.generation == told.generation:
            return told
        # Another browser, but this conversation lost nothing in the change.
        return attrs.evolve(told, browser_id=new.browser_id, generation=new.generation)
    keys = {(x.kind, x.name) for x in new.lost}
    lost: tuple[Lost, ...] = (
        *(x for x in told.lost if (x.kind, x.name) not in keys),
        *new.lost,
    )
    return canonical(
        attrs.evolve(
            new,
            restarted=told.restarted or new.restarted,
            first_turn=told.first_turn or new.first_turn,
            lost=lost,
            revalidate=tuple(dict.fromkeys((*told.revalidate, *new.revalidate))),
            restored=tuple(dict.fromkeys((*told.restored, *new.restored))),
            renewed=tuple(dict.fromkeys((*told.renewed, *new.renewed))),
            previous_generation=(
                told.previous_generation if told.restarted else new.previous_generation
            ),
        )
    )
