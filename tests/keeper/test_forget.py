"""Conversations end: forget() and idle retirement keep the saved state bounded by live ones."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, Grant, IdleTimeouts, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.facts import TurnFacts
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

ONE_OFFS = 1_000


@pytest.fixture
async def stored(
    tmp_path: Path,
) -> AsyncIterator[tuple[SessionKeeper[FakePage], SqliteStore, FakeBackend, FakeClock]]:
    """A keeper on a SQLite store, retiring conversations idle for an hour."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant("billing", "billing.example")],
            idle_timeouts=IdleTimeouts(browser=timedelta(days=1), conversation=timedelta(hours=1)),
        )
        async with keeper:
            yield keeper, store, backend, clock


async def saved_bytes(keeper: SessionKeeper[FakePage], store: SqliteStore) -> int:
    """The size of the keeper's saved document, as JSON."""
    await keeper.persist()
    doc = await saved_document(store, "default")
    return len(json.dumps(doc).encode())


async def one_offs(keeper: SessionKeeper[FakePage]) -> list[str]:
    """ONE_OFFS conversations that each take one turn with a tab, and never come back."""
    names = [f"one-off-{i:04d}" for i in range(ONE_OFFS)]
    for c in names:
        await keeper.ensure(c)
        await keeper.unguarded_page(c, f"https://docs.example/guide/{c}")
    return names


async def test_forgotten_conversations_leave_the_saved_state_bounded_by_live_ones(
    stored: tuple[SessionKeeper[FakePage], SqliteStore, FakeBackend, FakeClock],
) -> None:
    """1,000 one-off conversations, each forgotten when done: the document never grows."""
    keeper, store, backend, _ = stored
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", "https://billing.example/")
    baseline = await saved_bytes(keeper, store)
    sizes = []
    for i in range(ONE_OFFS):
        c = f"one-off-{i:04d}"
        await keeper.ensure(c)
        await keeper.unguarded_page(c, f"https://docs.example/guide/{c}")
        if i % 100 == 0:
            sizes.append(await saved_bytes(keeper, store))  # while it is live
        assert await keeper.forget(c)
        assert backend.current is not None and not backend.current.pages(c)  # page closed
    after = await saved_bytes(keeper, store)
    assert min(sizes) > baseline  # a live one-off is in the document...
    assert after == baseline and max(sizes) == min(sizes)  # ...and gone once forgotten
    assert keeper.has_tab("billing") and not keeper.has_tab("one-off-0000")
    assert "one-off-" not in json.dumps(await saved_document(store, "default"))


async def test_sweep_retires_conversations_idle_past_the_limit(
    stored: tuple[SessionKeeper[FakePage], SqliteStore, FakeBackend, FakeClock],
) -> None:
    """sweep() forgets one-offs idle past the limit; keeps active ones and login owners."""
    keeper, store, backend, clock = stored
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", "https://billing.example/login")
    await backend.sign_in("billing.example")
    await keeper.record_login("billing", "billing.example")
    await keeper.ensure("chat")
    baseline = await saved_bytes(keeper, store)
    names = await one_offs(keeper)
    grown = await saved_bytes(keeper, store)
    clock.advance(timedelta(minutes=50))
    await keeper.ensure("chat")  # active within the hour
    clock.advance(timedelta(minutes=20))
    report = await keeper.sweep()
    after = await saved_bytes(keeper, store)
    assert sorted(report.retired_conversations) == names and not report.nothing_done
    # billing owns the live login (idle, but its grantees rely on it); chat had a turn.
    assert "billing" not in report.retired_conversations
    assert "chat" not in report.retired_conversations
    assert after <= baseline and grown > 50 * baseline
    assert backend.current is not None and all(not backend.current.pages(c) for c in names)


async def test_a_forgotten_conversation_hears_no_old_news_and_starts_afresh(
    stored: tuple[SessionKeeper[FakePage], SqliteStore, FakeBackend, FakeClock],
) -> None:
    """forget() drops pending losses: the same id later starts a new conversation."""
    keeper, _, backend, _ = stored
    await keeper.ensure("research")
    await keeper.unguarded_page("research", "https://docs.example/a")
    await backend.crash()
    await keeper.ensure("billing")  # relaunch: research has a lost tab pending
    assert await keeper.forget("research")
    facts = await keeper.ensure("research")
    assert not facts.restarted and facts.lost == ()
    assert await keeper.forget("never-seen") is False


async def test_forget_refuses_a_conversation_that_owns_a_live_login(
    stored: tuple[SessionKeeper[FakePage], SqliteStore, FakeBackend, FakeClock],
) -> None:
    """A live login's owner is not forgotten (InvalidArgument naming the site); nothing changes."""
    keeper, store, backend, _ = stored
    await keeper.ensure("billing")
    await keeper.unguarded_page("billing", "https://billing.example/login")
    await backend.sign_in("billing.example")
    await keeper.record_login("billing", "billing.example")
    before = await saved_bytes(keeper, store)
    doc = await saved_document(store, "default")
    with pytest.raises(InvalidArgument, match=r"billing\.example"):
        await keeper.forget("billing")
    assert await saved_bytes(keeper, store) == before
    assert await saved_document(store, "default") == doc
    assert keeper.has_tab("billing") and keeper.logins()


@pytest.mark.parametrize(
    ("conversation", "error"),
    [(None, InvalidArgumentType), ("", InvalidArgument), ("a\x00b", InvalidArgument)],
    ids=["None", "empty", "NUL"],
)
async def test_forget_takes_a_conversation_id(
    stored: tuple[SessionKeeper[FakePage], SqliteStore, FakeBackend, FakeClock],
    conversation: Any,
    error: type[Exception],
) -> None:
    """forget() of a malformed id is a typed error."""
    with pytest.raises(error):
        await stored[0].forget(conversation)


def test_conversation_idle_timeout_is_a_positive_timedelta() -> None:
    """conversation_idle_timeout=0 or a number is refused at construction."""
    with pytest.raises(InvalidArgument):
        SessionKeeper(FakeBackend(), idle_timeouts=IdleTimeouts(conversation=timedelta(0)))
    bad: Any = 3600
    with pytest.raises(InvalidArgumentType):
        SessionKeeper(FakeBackend(), idle_timeouts=IdleTimeouts(conversation=bad))


async def test_a_keeper_that_restarts_often_remembers_only_its_newest_generations(
    tmp_path: Path,
) -> None:
    """150 crashes under a tab: in memory and after a reload the keeper holds the newest
    100 generations, and the conversation is still told of each restart."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with SessionKeeper(
            backend, clock=clock, durability=Durability(store=store)
        ) as keeper:
            await keeper.ensure("chat")
            told = 0
            for _ in range(150):
                await keeper.unguarded_page("chat", "https://docs.example/")
                await backend.crash()
                told += (await keeper.ensure("chat")).restarted
            kept = [g.generation for g in keeper.generations()]
            assert told == 150
            assert kept == list(range(52, 152))
            await keeper.persist()
        async with SessionKeeper(
            FakeBackend(), clock=clock, durability=Durability(store=store)
        ) as reloaded:
            assert [g.generation for g in reloaded.generations()] == kept


async def test_a_conversation_the_keeper_does_not_know_is_told_it_is_a_first_turn() -> None:
    """first_turn on a conversation's first ensure and after forget(), never otherwise;
    a re-execution of the first turn is told it again, and the facts round-trip."""
    async with SessionKeeper(FakeBackend()) as keeper:
        first = await keeper.ensure("chat", turn="t1")
        again = await keeper.ensure("chat", turn="t1")
        later = await keeper.ensure("chat", turn="t2")
        await keeper.forget("chat")
        back = await keeper.ensure("chat")
    assert (first.first_turn, again.first_turn, later.first_turn, back.first_turn) == (
        True, True, False, True,
    )  # fmt: skip
    assert TurnFacts.from_dict(first.to_dict()) == first
    old = {k: v for k, v in later.to_dict().items() if k != "first_turn"}
    assert TurnFacts.from_dict(old).first_turn is False  # facts saved before the field


async def test_by_default_a_conversation_idle_for_a_week_is_forgotten_and_told_so(
    tmp_path: Path,
) -> None:
    """With the default settings, the sweep forgets a conversation without a turn for
    7 days (not one that owns a live login) and its next turn says first_turn."""
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            # The browser stays up: only the conversations' default idle period is at work.
            idle_timeouts=IdleTimeouts(browser=timedelta(days=30)),
        )
        async with keeper:
            await keeper.ensure("idle")
            await keeper.unguarded_page("idle", "https://docs.example/")
            await keeper.ensure("owner")
            await keeper.unguarded_page("owner", "https://billing.example/login")
            await backend.sign_in("billing.example", persistent=True)
            await keeper.record_login("owner", "billing.example")
            clock.advance(timedelta(days=6, hours=23))
            assert (await keeper.sweep()).retired_conversations == ()
            clock.advance(timedelta(hours=2))
            report = await keeper.sweep()
            assert report.retired_conversations == ("idle",)
            assert (await keeper.ensure("idle")).first_turn
            assert not (await keeper.ensure("owner")).first_turn
