"""TurnFacts.renewed: a renewed login is told as a fresh sign-in, survives JSON, merges."""

from __future__ import annotations

from datetime import UTC, datetime

from session_keeper._model.turns import same_turn
from session_keeper.facts import Lost, TurnFacts
from session_keeper.mcp._banner import banner, worth_telling

LOSS = Lost(
    kind="login",
    name="totp.example",
    owner="alice-chat",
    when=datetime(2026, 10, 13, 9, 0, tzinfo=UTC),
    generation=1,
    cause="signed_out",
)


def facts(**kw: object) -> TurnFacts:
    """Facts of one conversation in browser-1, not restarted."""
    return TurnFacts(
        conversation="alice-chat",
        browser_id="browser-1",
        generation=1,
        restarted=False,
        **kw,  # type: ignore[arg-type]
    )


def test_renewed_reads_back_from_json_and_older_facts_have_none() -> None:
    """to_dict()/from_dict() keep ``renewed``; facts saved before it existed read as ()."""
    told = facts(lost=(LOSS,), renewed=("totp.example",))
    assert TurnFacts.from_dict(told.to_dict()) == told
    older = {k: v for k, v in told.to_dict().items() if k != "renewed"}
    assert TurnFacts.from_dict(older).renewed == ()


def test_the_prompt_says_renewed_not_wait_for_a_human() -> None:
    """A lost-then-renewed login is told as a fresh sign-in; a lost one as before."""
    renewed = facts(lost=(LOSS,), renewed=("totp.example",)).to_prompt()
    assert "Login to totp.example renewed" in renewed
    assert "until a human signs in" not in renewed
    lost = facts(lost=(LOSS,)).to_prompt()
    assert "until a human signs in" in lost and "renewed" not in lost
    assert "nothing changed" not in facts(renewed=("totp.example",)).to_prompt()


def test_a_renewal_in_the_middle_of_a_turn_is_added_to_what_it_was_told() -> None:
    """A re-execution of the turn hears the renewal too (same_turn keeps both)."""
    told = facts(lost=(LOSS,))
    merged = same_turn(told, facts(renewed=("totp.example",)))
    assert merged.renewed == ("totp.example",)
    assert [str(x) for x in merged.lost] == ["login:totp.example"]


def test_the_mcp_banner_tells_a_renewal_even_without_a_restart() -> None:
    """A turn whose only news is a renewal gets the banner; a renewed login is not told as
    one to ask the person about, a lost one still is."""
    only_renewed = facts(renewed=("totp.example",))
    assert worth_telling(only_renewed)
    told = banner(facts(lost=(LOSS,), renewed=("totp.example",)))
    assert "Renewed: the keeper signed in again to totp.example" in told
    assert "ask the person to sign in again" not in told
    assert "ask the person to sign in again" in banner(facts(lost=(LOSS,)))
