"""admit(): counted grants limit requests on the network, not only decide()."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from session_keeper import Durability, Grant, SessionKeeper
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

from .conftest import Factory, SpyBackend, sign_in


async def test_a_one_time_write_borrow_admits_exactly_one_request(
    signed_in: SessionKeeper[FakePage],
) -> None:
    """Without decide(), the borrow's single use is spent by the first request."""
    keeper = signed_in
    keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
    first = keeper.admit("research", "billing.example", "write")
    assert first.outcome == "act" and first.spent_use
    second = keeper.admit("research", "billing.example", "write")
    assert second.outcome == "block"
    assert keeper.decide("research", "billing.example", "write").outcome == "block"


async def test_an_act_of_decide_admits_the_request_that_carries_it_out(
    signed_in: SessionKeeper[FakePage],
) -> None:
    """decide() spends the use and arms one request; a second request is refused."""
    keeper = signed_in
    keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
    decided = keeper.decide("research", "billing.example", "write")
    assert decided.outcome == "act" and decided.spent_use
    assert keeper.permits("research", "billing.example", "write").outcome == "block"
    assert keeper.admit("research", "billing.example", "write").outcome == "act"
    assert keeper.admit("research", "billing.example", "write").outcome == "block"


async def test_uses_bound_requests_whatever_mix_of_decide_and_admit(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """A grant with uses=3: decide twice, then requests: exactly three get through."""
    keeper = make_keeper(
        grants=[Grant("billing", "billing.example"), Grant("ops", "billing.example", uses=3)]
    )
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    assert keeper.decide("ops", "billing.example", "write").outcome == "act"
    assert keeper.decide("ops", "billing.example", "write").outcome == "act"
    admitted = [keeper.admit("ops", "billing.example", "write").outcome for _ in range(5)]
    assert admitted == ["act", "act", "act", "block", "block"]


async def test_unlimited_grants_spend_nothing_on_the_network(
    signed_in: SessionKeeper[FakePage],
) -> None:
    """The owner's unlimited grant admits any number of requests and spends no borrow."""
    keeper = signed_in
    keeper.approve_borrow("billing", "billing.example", "write", approved_by="alice")
    for _ in range(5):
        d = keeper.admit("billing", "billing.example", "write")
        assert d.outcome == "act" and not d.spent_use


async def test_revoking_drops_an_armed_act(signed_in: SessionKeeper[FakePage]) -> None:
    """decide() armed one request, then the grant was revoked: the request is refused."""
    keeper = signed_in
    keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
    assert keeper.decide("research", "billing.example", "write").outcome == "act"
    keeper.revoke("research", "billing.example")
    assert keeper.admit("research", "billing.example", "write").outcome == "block"


async def test_an_armed_act_does_not_outlive_its_grants_expiry(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """An act armed under a grant that then expires admits nothing."""
    keeper = make_keeper(grants=[Grant("billing", "billing.example")])
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    keeper.approve_borrow(
        "research", "billing.example", "write", approved_by="alice", expires_in=timedelta(minutes=1)
    )
    assert keeper.decide("research", "billing.example", "write").outcome == "act"
    clock.advance(timedelta(minutes=2))
    assert keeper.admit("research", "billing.example", "write").outcome == "block"


async def test_a_restart_voids_acts_armed_in_the_old_browser(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """decide() in browser-1, crash, relogin in browser-2: the old act admits nothing."""
    keeper = make_keeper(grants=[Grant("billing", "billing.example")])
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
    keeper.grant(Grant("research", "billing.example", actions={"write"}, uses=1))
    assert keeper.decide("research", "billing.example", "write").outcome == "act"
    await backend.crash()
    await keeper.ensure("billing")
    await keeper.ensure("research")
    await sign_in(keeper, backend, "billing", "billing.example")
    # The second grant's use is still there; the armed one from browser-1 is not.
    assert keeper.admit("research", "billing.example", "write").outcome == "act"
    assert keeper.admit("research", "billing.example", "write").outcome == "block"


async def test_a_use_spent_on_the_network_stays_spent_after_our_restart(
    tmp_path: Path,
) -> None:
    """admit() spends a borrow; a new keeper on the same store does not give it back."""
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        first = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant("billing", "billing.example")],
        )
        async with first:
            await first.ensure("billing")
            await sign_in(first, backend, "billing", "billing.example")
            first.approve_borrow("research", "billing.example", "write", approved_by="ann")
            assert first.admit("research", "billing.example", "write").outcome == "act"
            await first.persist()
        second = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant("billing", "billing.example")],
        )
        async with second:
            await second.ensure("billing")
            await sign_in(second, backend, "billing", "billing.example")
            assert second.admit("research", "billing.example", "write").outcome == "block"


async def test_a_dry_run_answers_without_spending(signed_in: SessionKeeper[FakePage]) -> None:
    """admit(dry_run=True) says a request would spend a use, and spends none."""
    keeper = signed_in
    keeper.approve_borrow("research", "billing.example", "write", approved_by="alice")
    for _ in range(3):
        peek = keeper.admit("research", "billing.example", "write", dry_run=True)
        assert peek.outcome == "act" and peek.spent_use
    assert keeper.decide("research", "billing.example", "write").outcome == "act"
    peek = keeper.admit("research", "billing.example", "write", dry_run=True)
    assert peek.outcome == "act" and peek.spent_use  # the armed act is still there
    assert keeper.admit("research", "billing.example", "write").outcome == "act"
    assert keeper.admit("research", "billing.example", "write", dry_run=True).outcome == "block"


async def test_a_one_time_read_borrow_admits_one_page_load_with_or_without_decide(
    signed_in: SessionKeeper[FakePage],
) -> None:
    """Reads count like writes: one use is one page load (its further reads ride on it)."""
    keeper = signed_in
    site = "billing.example"
    keeper.approve_borrow("research", site, "read", approved_by="alice")
    first, second = object(), object()
    opened = keeper.admit("research", site, "read", page_load=first)
    assert opened.outcome == "act" and opened.spent_use
    for _ in range(3):  # the page's subresources
        d = keeper.admit("research", site, "read", page_load=first)
        assert d.outcome == "act" and not d.spent_use
    assert keeper.admit("research", site, "read", page_load=second).outcome == "block"
    assert keeper.admit("research", site, "read").outcome == "block"  # a stray request
    keeper.end_page_load(first)  # the page navigated away
    assert keeper.admit("research", site, "read", page_load=first).outcome == "block"
    # decide() spends the next borrow and arms exactly one page load.
    keeper.approve_borrow("research", site, "read", approved_by="alice")
    assert keeper.decide("research", site, "read").outcome == "act"
    assert keeper.permits("research", site, "read").outcome == "block"
    assert keeper.admit("research", site, "read", page_load=second).outcome == "act"
    assert keeper.admit("research", site, "read", page_load=second).outcome == "act"
    assert keeper.admit("research", site, "read", page_load=object()).outcome == "block"


async def test_a_read_use_without_a_page_load_is_one_request(
    signed_in: SessionKeeper[FakePage],
) -> None:
    """A read request outside any page load spends a use by itself, like a write."""
    keeper = signed_in
    keeper.grant(Grant("research", "billing.example", actions={"read"}, uses=2))
    admitted = [keeper.admit("research", "billing.example", "read").outcome for _ in range(3)]
    assert admitted == ["act", "act", "block"]


async def test_revoking_ends_a_page_load(signed_in: SessionKeeper[FakePage]) -> None:
    """A revoked grant admits nothing more, even to the page whose load spent its use."""
    keeper = signed_in
    keeper.approve_borrow("research", "billing.example", "read", approved_by="alice")
    load = object()
    assert keeper.admit("research", "billing.example", "read", page_load=load).outcome == "act"
    keeper.revoke("research", "billing.example")
    assert keeper.admit("research", "billing.example", "read", page_load=load).outcome == "block"


async def test_a_page_load_does_not_outlive_its_grants_expiry(
    signed_in: SessionKeeper[FakePage], clock: FakeClock
) -> None:
    """A page load opened under a borrow that then expires admits nothing more."""
    keeper = signed_in
    keeper.approve_borrow(
        "research", "billing.example", "read", approved_by="alice", expires_in=timedelta(minutes=1)
    )
    load = object()
    assert keeper.admit("research", "billing.example", "read", page_load=load).outcome == "act"
    clock.advance(timedelta(minutes=2))
    assert keeper.admit("research", "billing.example", "read", page_load=load).outcome == "block"


async def test_unlimited_read_grants_spend_nothing_per_page_load(
    signed_in: SessionKeeper[FakePage],
) -> None:
    """The owner's unlimited grant admits every read, page load or not, and spends nothing."""
    keeper = signed_in
    keeper.approve_borrow("billing", "billing.example", "read", approved_by="alice")
    for load in (object(), object(), None):
        d = keeper.admit("billing", "billing.example", "read", page_load=load)
        assert d.outcome == "act" and not d.spent_use
    assert keeper.decide("billing", "billing.example").outcome == "act"
