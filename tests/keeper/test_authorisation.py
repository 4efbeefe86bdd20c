"""Authorisation alone: grants + ledger + use tokens answer a Query, with no browser or keeper."""

from __future__ import annotations

from datetime import UTC, datetime

from session_keeper import Grant
from session_keeper._model.authorisation import Authorisation, BrowserView, Query
from session_keeper._model.grants import DEFAULT_ACTIONS, GrantBook
from session_keeper._model.ledger import LoginLedger
from session_keeper._model.uses import UseTokens
from session_keeper.facts import LoginRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ALIVE = BrowserView(alive=True, generation=1, restarted_unheard=False)
SITE = "billing.example"


def _authorisation(*grants: Grant) -> Authorisation:
    book = GrantBook(frozenset(DEFAULT_ACTIONS))
    for g in grants:
        book.add(g)
    ledger = LoginLedger()
    ledger.record(
        LoginRecord(site=SITE, owner="billing", recorded_at=NOW, generation=1, cookies=())
    )
    return Authorisation(book, ledger, UseTokens(), dict.fromkeys(DEFAULT_ACTIONS, "stop"))


def test_one_query_spends_a_counted_use_only_when_it_counts_and_is_not_a_dry_run() -> None:
    """A pure look and a dry run spend nothing; a counting query spends the one use, once."""
    auth = _authorisation(Grant("research", SITE, uses=1))
    look = Query(conversation="research", site=SITE, action="read")
    assert auth.evaluate(look, ALIVE, NOW).decision.outcome == "act"
    dry = Query(conversation="research", site=SITE, action="read", counts=True, dry_run=True)
    assert auth.evaluate(dry, ALIVE, NOW).decision.spent_use
    assert not auth.evaluate(dry, ALIVE, NOW).grants_changed
    spend = Query(conversation="research", site=SITE, action="read", counts=True)
    first = auth.evaluate(spend, ALIVE, NOW)
    assert first.decision.outcome == "act" and first.decision.spent_use and first.grants_changed
    # The use decide() spent is armed: it admits the next request instead of a second use.
    request = Query(conversation="research", site=SITE, action="read", counts=True, request=True)
    assert auth.evaluate(request, ALIVE, NOW).decision.outcome == "act"
    assert auth.evaluate(spend, ALIVE, NOW).decision.outcome == "block"


def test_a_restart_the_conversation_has_not_heard_of_stops_every_query() -> None:
    """Until ensure() told the conversation of a restart, no query answers act."""
    auth = _authorisation(Grant("research", SITE))
    unheard = BrowserView(alive=True, generation=2, restarted_unheard=True)
    query = Query(conversation="research", site=SITE, action="read")
    decision = auth.evaluate(query, unheard, NOW).decision
    assert decision.outcome == "stop" and decision.generation == 2
