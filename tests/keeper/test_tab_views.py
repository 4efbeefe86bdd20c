"""The keeper's read-only views for consoles: tabs with URL and age, generations."""

from __future__ import annotations

from datetime import timedelta

from session_keeper import SessionKeeper
from session_keeper.testing import FakeBackend, FakeClock


async def test_tabs_lists_each_conversations_tab_with_its_url_and_age() -> None:
    """tabs() reports open tabs with their URL, verification time and idle time;
    generations() the browsers run, the live one unended."""
    clock, backend = FakeClock(), FakeBackend()
    async with SessionKeeper(backend, clock=clock) as keeper:
        await keeper.ensure("a")
        await keeper.tab("a", "https://billing.example/invoices")
        opened = clock.now()
        await keeper.ensure("b")
        await keeper.tab("b")
        clock.advance(timedelta(seconds=30))
        views = {t.conversation: t for t in keeper.tabs()}
        assert set(views) == {"a", "b"}
        a = views["a"]
        assert a.open and a.url == "https://billing.example/invoices"
        assert a.last_verified_url == "https://billing.example/invoices"
        assert a.verified_at == opened and a.generation == 1
        assert a.idle == timedelta(seconds=30)
        await backend.crash()
        await keeper.ensure("a")
        # The dead browser's tabs are gone (ensure() reports them lost), not listed as open.
        assert not any(t.open for t in keeper.tabs())
        gens = keeper.generations()
        assert [g.generation for g in gens] == [1, 2]
        assert gens[0].cause == "crashed" and gens[1].ended_at is None
