"""decide(): grants are checked, not just cookies; lost logins stop plans that assumed them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from session_keeper import Grant, SessionKeeper
from session_keeper.errors import InvalidArgument
from session_keeper.testing import FakeClock, FakePage

from .conftest import Factory, SpyBackend, sign_in


async def test_granted_conversation_may_act_on_a_present_login(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """act: a login is present and a live grant covers the action."""
    keeper = signed_in
    d = keeper.decide("billing", "billing.example", "write")
    assert d.outcome == "act" and d.allowed and d.reason is None and d.login_owner == "billing"


async def test_block_names_the_owner_in_the_seed_words(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """block: the cookie is there but the grant is not; the reason names the login's owner."""
    keeper = signed_in
    d = keeper.decide("research", "billing.example")
    assert d.outcome == "block"
    assert d.reason == "research has no grant for billing.example (login belongs to billing)"


async def test_read_only_grant_does_not_cover_write(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """A grant per action: read the invoices, but not change the card."""
    keeper = make_keeper(grants=[Grant("billing", "billing.example", actions={"read"})])
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    assert keeper.decide("billing", "billing.example", "read").outcome == "act"
    d = keeper.decide("billing", "billing.example", "write")
    assert d.outcome == "block" and "does not cover write" in (d.reason or "")


async def test_expired_grant_stops_granting(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """A grant past its expires_at blocks like no grant at all."""
    grant = Grant("billing", "billing.example", expires_at=clock.now() + timedelta(minutes=5))
    keeper = make_keeper(grants=[grant])
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    assert keeper.decide("billing", "billing.example").outcome == "act"
    clock.advance(timedelta(minutes=5))
    await keeper.ensure("billing")
    assert keeper.decide("billing", "billing.example").outcome == "block"


async def test_one_time_borrow_is_spent_by_one_act(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """approve_borrow gives exactly one act for one action, then blocks again."""
    keeper = signed_in
    g = keeper.approve_borrow("research", "billing.example", "read", approved_by="alice")
    assert (g.uses, g.actions, g.approved_by) == (1, frozenset({"read"}), "alice")
    assert keeper.decide("research", "billing.example", "write").outcome == "block"
    assert keeper.decide("research", "billing.example", "read").outcome == "act"
    assert keeper.decide("research", "billing.example", "read").outcome == "block"
    report = await keeper.sweep()
    assert report.expired_grants == (g,)


async def test_unlimited_grant_is_used_before_a_counted_one(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """An act spends no one-time borrow while an unlimited grant covers it."""
    keeper = signed_in
    keeper.approve_borrow("billing", "billing.example", "read", approved_by="alice")
    for _ in range(3):
        assert keeper.decide("billing", "billing.example").outcome == "act"
    keeper.revoke("billing", "billing.example")
    assert keeper.grants() == ()


async def test_an_act_spends_the_counted_grant_that_expires_first(
    signed_in: SessionKeeper[FakePage], clock: FakeClock
) -> None:
    """Of two one-time borrows, an act spends the one expiring sooner; the longer one stays."""
    keeper = signed_in
    for minutes in (60, 1):
        keeper.approve_borrow(
            "research",
            "billing.example",
            "read",
            approved_by="alice",
            expires_in=timedelta(minutes=minutes),
        )
    assert keeper.decide("research", "billing.example").outcome == "act"
    clock.advance(timedelta(minutes=2))  # the short borrow would have lapsed unused
    assert keeper.decide("research", "billing.example").outcome == "act"
    assert keeper.decide("research", "billing.example").outcome == "block"


async def test_need_login_when_nobody_signed_in(make_keeper: Factory) -> None:
    """need_login: no login at all, whatever the grant says."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    d = keeper.decide("billing", "billing.example", assumes_login=True)
    assert d.outcome == "need_login" and d.reason == "not logged in to billing.example"


async def test_stop_when_the_plan_assumed_a_login_a_restart_took(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """stop: the login was lost in a restart and the step assumed it; ask a human."""
    keeper = signed_in
    await backend.crash()
    await keeper.ensure("billing")
    d = keeper.decide("billing", "billing.example", "write", assumes_login=True)
    assert d.outcome == "stop"
    assert d.reason == ("plan assumed a login that no longer exists. Ask a human to sign in again.")
    # A step that did not assume the login is told to get one instead.
    assert keeper.decide("billing", "billing.example").outcome == "need_login"
    await sign_in(keeper, backend, "billing", "billing.example")
    assert keeper.decide("billing", "billing.example", assumes_login=True).outcome == "act"


async def test_relogin_policy_turns_stop_into_need_login(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """With restart policy 'relogin' for reads, a lost login asks for a fresh sign-in."""
    keeper = make_keeper(restart_policy={"read": "relogin"})
    await keeper.ensure("billing")
    await sign_in(keeper, backend, "billing", "billing.example")
    await backend.crash()
    await keeper.ensure("billing")
    read = keeper.decide("billing", "billing.example", "read", assumes_login=True)
    write = keeper.decide("billing", "billing.example", "write", assumes_login=True)
    assert read.outcome == "need_login" and "browser-1" in (read.reason or "")
    assert write.outcome == "stop"


async def test_no_act_for_a_conversation_not_yet_told_of_a_restart(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """A conversation that skipped ensure() after a restart is stopped, even with a new login."""
    keeper = signed_in
    await backend.crash()
    d = keeper.decide("billing", "billing.example")
    assert d.outcome == "stop" and "ensure()" in (d.reason or "")
    await keeper.ensure("helper")
    assert keeper.decide("billing", "billing.example").outcome == "stop"


async def test_unknown_action_is_refused(make_keeper: Factory) -> None:
    """decide() and grants only speak of actions the keeper knows."""
    keeper = make_keeper()
    with pytest.raises(InvalidArgument, match="unknown action"):
        keeper.decide("billing", "billing.example", "delete")
    with pytest.raises(InvalidArgument, match="unknown action"):
        keeper.grant(Grant("billing", "billing.example", actions={"delete"}))
    extended = make_keeper(actions={"read", "write", "delete"})
    extended.grant(Grant("billing", "billing.example", actions={"delete"}))


async def test_permits_answers_like_decide_without_spending(
    signed_in: SessionKeeper[FakePage], backend: SpyBackend
) -> None:
    """permits() gives decide()'s answer but leaves a one-time borrow unspent."""
    keeper = signed_in
    keeper.approve_borrow("research", "billing.example", "read", approved_by="ann")
    for _ in range(3):
        assert keeper.permits("research", "billing.example").outcome == "act"
    assert keeper.permits("research", "billing.example", "write").outcome == "block"
    assert keeper.decide("research", "billing.example").outcome == "act"
    assert keeper.permits("research", "billing.example").outcome == "block"
