"""Facts survive a framework's re-execution: same turn id, same facts; next turn, not again."""

from __future__ import annotations

import asyncio
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.facts import Decision, Lost, TurnFacts
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

KEY = bytes(range(32))
CONV = "billing"


def _keeper(backend: FakeBackend, store: SqliteStore, clock: FakeClock) -> SessionKeeper[FakePage]:
    return SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(store=store),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=[Grant(CONV, "billing.example")],
    )


async def _replay(ops: list[str], db: Path) -> None:
    """Run ``ops`` against a keeper (and its successors), checking the turn model after each."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(db, clock=clock) as store:
        keeper = _keeper(backend, store, clock)
        turn_no = 1
        told = await keeper.ensure(CONV, turn="t1")
        await keeper.unguarded_page(CONV, "https://billing.example/invoices?token=abc")
        # A restart since the current turn was last told, not yet told to anyone.
        untold = False
        # Whether this keeper (process) told the current turn; whether a restart came since.
        told_here, news_here = True, False
        # A new process's own launch, held for the next turn while the current one is
        # re-executed (however often): told by "next", not by "again".
        held = False
        for op in ops:
            if op == "again":
                facts = await keeper.ensure(CONV, turn=f"t{turn_no}")
                if not told_here:
                    # Re-executed in a new process: exactly what the turn was told; the
                    # new process's own launch stays the next turn's news.
                    assert facts == told
                    told_here = True
                    continue
                if not news_here:
                    assert facts == told  # a re-execution sees exactly what the turn saw
                else:
                    # A restart in the middle of the turn: added, nothing dropped.
                    assert facts.restarted and facts.generation == keeper.generation
                    assert {str(x) for x in told.lost} <= {str(x) for x in facts.lost}
                    assert f"tab:{CONV}" in {str(x) for x in facts.lost}
                    # A launch held for the next turn goes out with this newer news (the
                    # restart told spans both), not a second time with the next turn.
                    held = False
                told, untold, news_here = facts, False, False
            elif op == "next":
                turn_no += 1
                facts = await keeper.ensure(CONV, turn=f"t{turn_no}")
                # The previous turn's news is not told again; a held launch is.
                assert facts.restarted == (untold or held)
                if not (untold or held):
                    assert facts.lost == ()
                told, untold, told_here, news_here, held = facts, False, True, False, False
            elif op == "kill":
                session = backend.current
                if session is not None and session.alive:
                    # News for this conversation only if the restart takes something.
                    news_here = news_here or keeper.has_tab(CONV)
                    await session.kill()
                    untold = True
            else:  # our process dies; a new one re-executes the same turn
                await keeper.persist()
                await backend.crash()
                keeper = _keeper(backend, store, clock)
                untold, told_here, news_here, held = True, False, False, True
            if keeper.alive and not keeper.has_tab(CONV) and not untold:
                await keeper.unguarded_page(CONV, "https://billing.example/invoices")
        await keeper.aclose()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["again", "next", "kill", "process"]), max_size=12))
# A new process's launch, held for the next turn, goes out with newer news told to the
# re-executed turn (a restart during it), not a second time with the next turn.
@example(["process", "again", "again", "kill", "again", "next"])
def test_every_re_execution_of_a_turn_sees_the_same_facts_and_the_next_turn_does_not(
    ops: list[str],
) -> None:
    """Any number of re-executions see the turn's facts (in a new process exactly them; in
    the process that told it, plus a restart since); the next turn not."""
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_replay(ops, Path(tmp) / "k.db"))


async def test_a_re_executed_turn_in_a_new_process_is_told_the_same_loss_again(
    tmp_path: Path,
) -> None:
    """Told under turn t2, then our process dies before t2's node finished: t2 hears
    exactly that again, however often; the new process's own launch is t3's news."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        first = _keeper(backend, store, clock)
        await first.ensure(CONV, turn="t1")
        await first.unguarded_page(CONV, "https://billing.example/invoices")
        session = backend.current
        assert session is not None
        await session.kill()
        told = await first.ensure(CONV, turn="t2")
        assert told.restarted and [str(x) for x in told.lost] == [f"tab:{CONV}"]
        await first.unguarded_page(CONV, "https://billing.example/invoices")  # t2's step
        await first.persist()
        await backend.crash()  # our process dies (and its browser with it) mid-turn
        second = _keeper(backend, store, clock)
        async with second:
            assert await second.ensure(CONV, turn="t2") == told
            await second.unguarded_page(CONV, "https://billing.example/invoices")
            assert await second.ensure(CONV, turn="t2") == told  # and again
            later = await second.ensure(CONV, turn="t3")
            assert later.restarted and later.previous_generation == told.generation
            assert later.generation == second.generation == told.generation + 1
            assert [str(x) for x in later.lost] == [f"tab:{CONV}"]
            assert await second.ensure(CONV, turn="t3") == later
            assert not (await second.ensure(CONV, turn="t4")).restarted


async def test_ensure_without_a_turn_tells_once_as_before() -> None:
    """No turn id: restarted is told once, the next call (any call) does not see it again."""
    backend = FakeBackend()
    async with SessionKeeper(
        backend, clock=FakeClock(), login_settings=LoginSettings(fingerprint_key=KEY)
    ) as keeper:
        await keeper.ensure(CONV)
        await keeper.unguarded_page(CONV, "https://docs.example/")
        session = backend.current
        assert session is not None
        await session.kill()
        assert (await keeper.ensure(CONV)).restarted
        assert not (await keeper.ensure(CONV)).restarted


def test_turn_facts_round_trip_through_json_without_query_strings() -> None:
    """to_dict() is JSON, from_dict() reads it back equal; a URL's query never leaves."""
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    facts = TurnFacts(
        conversation=CONV,
        browser_id="browser-3",
        generation=3,
        restarted=True,
        previous_generation=2,
        lost=(
            Lost(kind="login", name="billing.example", owner=CONV, when=when, generation=2),
            Lost(
                kind="tab",
                name=CONV,
                owner=CONV,
                when=when,
                generation=2,
                last_url="https://billing.example/invoices/7",
            ),
        ),
        revalidate=("docs.example",),
    )
    data = json.loads(json.dumps(facts.to_dict()))
    assert TurnFacts.from_dict(data) == facts
    with_token = TurnFacts(
        conversation=CONV,
        browser_id="browser-3",
        generation=3,
        restarted=True,
        lost=(
            Lost(
                kind="tab",
                name=CONV,
                owner=CONV,
                when=when,
                generation=2,
                last_url="https://x.example/cb?code=SECRET",
            ),
        ),
    )
    assert "SECRET" not in json.dumps(with_token.to_dict())
    assert "SECRET" not in with_token.to_prompt()
    prompt = facts.to_prompt()
    assert "browser-3" in prompt and "billing.example" in prompt and "invoices/7" in prompt
    quiet = TurnFacts(conversation=CONV, browser_id="browser-3", generation=3, restarted=False)
    assert quiet.to_prompt() == "Browser browser-3: nothing changed since your last turn."


def test_decision_round_trips_through_json_and_reads_as_one_line() -> None:
    """Decision.to_dict()/from_dict() are inverse; to_prompt() names the owner's reason."""
    d = Decision(
        outcome="block",
        conversation="research",
        site="billing.example",
        action="write",
        reason="research has no grant for billing.example (login belongs to billing)",
        login_owner=CONV,
        generation=1,
    )
    assert Decision.from_dict(json.loads(json.dumps(d.to_dict()))) == d
    assert d.to_prompt().startswith("Blocked: write on billing.example.")
    assert "\n" not in d.to_prompt()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ("not a mapping", InvalidArgumentType),
        ({"format": 2}, InvalidArgument),
        ({"conversation": CONV}, InvalidArgument),
        (
            {
                "conversation": CONV,
                "browser_id": "browser-1",
                "generation": True,
                "restarted": False,
                "lost": [],
                "revalidate": [],
                "restored": [],
            },
            InvalidArgumentType,
        ),
        (
            {
                "conversation": CONV,
                "browser_id": "browser-1",
                "generation": 1,
                "restarted": True,
                "lost": [{"kind": "cookie"}],
                "revalidate": [],
                "restored": [],
            },
            InvalidArgument,
        ),
    ],
)
def test_malformed_turn_facts_are_refused_with_a_typed_error(
    data: object, error: type[Exception]
) -> None:
    """from_dict() of a malformed value raises InvalidArgument(Type), never builds facts."""
    with pytest.raises(error):
        TurnFacts.from_dict(data)  # type: ignore[arg-type]


async def test_a_turn_id_must_be_a_name() -> None:
    """ensure(turn=...) refuses a non-str or empty turn id and changes nothing."""
    async with SessionKeeper(
        FakeBackend(), clock=FakeClock(), login_settings=LoginSettings(fingerprint_key=KEY)
    ) as keeper:
        with pytest.raises(InvalidArgumentType):
            await keeper.ensure(CONV, turn=7)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await keeper.ensure(CONV, turn=" ")
        assert keeper.generation == 0


def test_a_turn_without_restart_that_lost_a_tab_is_not_told_nothing_changed() -> None:
    """to_prompt() of same-browser news (a tab closed while no keeper ran) names the loss."""
    closed = TurnFacts(
        conversation=CONV,
        browser_id="browser-1",
        generation=1,
        restarted=False,
        lost=(
            Lost(
                kind="tab",
                name=CONV,
                owner=CONV,
                when=datetime(2026, 1, 1, tzinfo=UTC),
                generation=1,
                last_url="https://docs.example/guide",
                cause="closed",
            ),
        ),
        revalidate=("billing.example",),
    )
    prompt = closed.to_prompt()
    assert "nothing changed" not in prompt and "restarted" not in prompt
    assert "docs.example/guide" in prompt and "closed while the keeper was away" in prompt
    assert "billing.example" in prompt
