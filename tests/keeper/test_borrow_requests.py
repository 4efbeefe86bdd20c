"""Borrow requests: an agent asks, a person answers, and only an approval grants."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import get_args

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._model.borrows import MAX_PENDING_PER_CONVERSATION, ApproverKind
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    SelfApprovalRefused,
    TooManyPendingRequests,
)
from session_keeper.facts import BorrowRequest
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

from .conftest import Factory, SpyBackend, sign_in

SITE = "billing.example"
KEYS = Keyring([("k1", bytes(range(32)))])


async def signed_in_keeper(make_keeper: Factory, backend: SpyBackend) -> SessionKeeper[FakePage]:
    """billing owns the login; research holds no grant."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    await keeper.ensure("research")
    await sign_in(keeper, backend, "billing", SITE)
    return keeper


async def test_a_pending_request_grants_nothing_until_a_person_approves_it(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """Asking is not permission: block until approved, then exactly the uses given."""
    keeper = await signed_in_keeper(make_keeper, backend)
    request = keeper.request_borrow("research", SITE, "write", reason="refund invoice 42")
    assert request.status == "pending"
    assert keeper.borrow_requests() == (request,)
    assert keeper.decide("research", SITE, "write").outcome == "block"

    answered = keeper.answer_borrow(request.id, approve=True, by="alice", uses=2)
    assert (answered.status, answered.decided_by, answered.uses) == ("approved", "alice", 2)
    assert keeper.borrow_requests() == ()
    outcomes = [keeper.decide("research", SITE, "write").outcome for _ in range(3)]
    assert outcomes == ["act", "act", "block"]
    assert keeper.decide("research", SITE, "read").outcome == "block"  # only what was asked


async def test_a_denied_request_grants_nothing_and_cannot_be_answered_again(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """Deny is final: no grant, and a second answer is refused with nothing changed."""
    keeper = await signed_in_keeper(make_keeper, backend)
    request = keeper.request_borrow("research", SITE, "read")
    denied = keeper.answer_borrow(request.id, approve=False, by="alice")
    assert denied.status == "denied"
    with pytest.raises(InvalidArgument, match="already denied"):
        keeper.answer_borrow(request.id, approve=True, by="mallory")
    assert keeper.decide("research", SITE, "read").outcome == "block"
    assert not any(g.conversation == "research" for g in keeper.grants())


async def test_a_repeated_ask_files_one_request(make_keeper: Factory, backend: SpyBackend) -> None:
    """Retried tool calls put one question in front of a person, not several."""
    keeper = await signed_in_keeper(make_keeper, backend)
    first = keeper.request_borrow("research", SITE, "write")
    again = keeper.request_borrow("research", SITE, "write", reason="retry")
    assert again == first
    other = keeper.request_borrow("research", SITE, "read")
    assert keeper.borrow_requests() == (first, other)


async def test_an_unanswered_request_expires_and_can_no_longer_be_approved(
    make_keeper: Factory, backend: SpyBackend, clock: FakeClock
) -> None:
    """A question nobody answered in time never becomes a permission later."""
    keeper = await signed_in_keeper(make_keeper, backend)
    request = keeper.request_borrow("research", SITE, "write", expires_in=timedelta(minutes=5))
    clock.advance(timedelta(minutes=6))
    with pytest.raises(InvalidArgument, match="expired"):
        keeper.answer_borrow(request.id, approve=True, by="alice")
    assert keeper.borrow_requests() == ()
    assert [r.status for r in keeper.borrow_requests(status=None)] == ["expired"]
    assert keeper.decide("research", SITE, "write").outcome == "block"


async def test_malformed_borrow_calls_are_typed_errors_that_change_nothing(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """Bad input to request/answer raises a typed error and files or grants nothing."""
    keeper = await signed_in_keeper(make_keeper, backend)
    bad_requests: list[dict[str, object]] = [
        {"action": "delete"},
        {"reason": 42},
        {"reason": "line\x00break"},
        {"expires_in": timedelta(seconds=-1)},
        {"expires_in": 60},
    ]
    for kw in bad_requests:
        with pytest.raises((InvalidArgument, InvalidArgumentType)):
            keeper.request_borrow("research", SITE, **kw)  # type: ignore[arg-type]
    assert keeper.borrow_requests(status=None) == ()
    request = keeper.request_borrow("research", SITE, "write")
    bad_answers: list[dict[str, object]] = [
        {"approve": "yes", "by": "alice"},
        {"approve": True, "by": ""},
        {"approve": True, "by": "alice", "uses": 0},
        {"approve": True, "by": "alice", "uses": True},
        {"approve": True, "by": "alice", "expires_in": timedelta(0)},
    ]
    for kw in bad_answers:
        with pytest.raises((InvalidArgument, InvalidArgumentType)):
            keeper.answer_borrow(request.id, **kw)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="no borrow request"):
        keeper.answer_borrow("borrow-nope", approve=True, by="alice")
    assert keeper.borrow_requests() == (request,)
    assert keeper.decide("research", SITE, "write").outcome == "block"


async def test_the_requesting_conversation_cannot_answer_its_own_request(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """An answer by the requester, of any kind, is SelfApprovalRefused and changes nothing."""
    keeper = await signed_in_keeper(make_keeper, backend)
    request = keeper.request_borrow("research", SITE, "write")
    for approve in (True, False):
        for kind in get_args(ApproverKind):
            with pytest.raises(SelfApprovalRefused):
                keeper.answer_borrow(request.id, approve=approve, by="research", approver=kind)
    assert keeper.borrow_requests() == (request,)
    assert keeper.decide("research", SITE, "write").outcome == "block"
    assert not any(g.conversation == "research" for g in keeper.grants())


async def test_only_the_logins_owner_answers_as_owner_and_the_kind_is_recorded(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """approver='owner' must be the login's owner; the answer records which kind decided."""
    keeper = await signed_in_keeper(make_keeper, backend)
    request = keeper.request_borrow("research", SITE, "read")
    with pytest.raises(InvalidArgument, match="does not own"):
        keeper.answer_borrow(request.id, approve=True, by="support", approver="owner")
    with pytest.raises(InvalidArgument, match="approver must be"):
        keeper.answer_borrow(request.id, approve=True, by="billing", approver="boss")  # type: ignore[arg-type]
    assert keeper.borrow_requests() == (request,)
    answered = keeper.answer_borrow(request.id, approve=True, by="billing", approver="owner")
    assert (answered.decided_by, answered.decided_as) == ("billing", "owner")
    assert BorrowRequest.from_dict(answered.to_dict()) == answered
    other = keeper.request_borrow("research", SITE, "write")
    by_app = keeper.answer_borrow(other.id, approve=False, by="ops on call")
    assert by_app.decided_as == "application"


async def test_a_conversation_has_at_most_five_requests_pending(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """The sixth distinct pending ask is TooManyPendingRequests and files nothing."""
    keeper = await signed_in_keeper(make_keeper, backend)
    assert MAX_PENDING_PER_CONVERSATION == 5
    sites = [f"site{i}.example" for i in range(MAX_PENDING_PER_CONVERSATION + 1)]
    filed = [keeper.request_borrow("research", s) for s in sites[:-1]]
    with pytest.raises(TooManyPendingRequests):
        keeper.request_borrow("research", sites[-1])
    assert keeper.borrow_requests() == tuple(filed)
    # A retried ask is the same request, not a new one; another conversation is unaffected.
    assert keeper.request_borrow("research", sites[0]) == filed[0]
    keeper.request_borrow("support", sites[-1])
    keeper.answer_borrow(filed[0].id, approve=False, by="alice")
    assert keeper.request_borrow("research", sites[-1]).status == "pending"


async def test_borrow_requests_and_answers_survive_our_process_and_are_audited(
    tmp_path: Path,
) -> None:
    """A pending request outlives a restart of our process; ask and answer are in the chain."""
    clock = FakeClock()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:

        def make() -> SessionKeeper[FakePage]:
            return SessionKeeper(
                FakeBackend(),
                clock=clock,
                durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
                login_settings=LoginSettings(fingerprint_key=bytes(32)),
                grants=[Grant("billing", SITE)],
            )

        async with make() as first:
            await first.ensure("research")
            request = first.request_borrow("research", SITE, "write", reason="refund 42")
        async with make() as second:
            assert second.borrow_requests() == (request,)
            second.answer_borrow(request.id, approve=True, by="alice", uses=1)
            await second.persist()
        async with make() as third:
            (answered,) = third.borrow_requests(status=None)
            assert (answered.status, answered.decided_by) == ("approved", "alice")
            assert any(g.conversation == "research" and g.uses == 1 for g in third.grants())
        entries = [e.data for e in await store.events(kind=AUDIT_ENTRY_KIND, limit=100)]
        types = [str(e["type"]) for e in entries]
        assert types.count("borrow_requested") == 1
        (approval,) = [e for e in entries if e["type"] == "borrow_approved"]
        assert approval["body"]["approved_by"] == "alice"  # type: ignore[index]
        assert approval["body"]["approver"] == "application"  # type: ignore[index]
        assert approval["body"]["request"] == request.id  # type: ignore[index]
        assert await verify_audit(store, KEYS) == len(entries)


async def test_a_forgotten_conversation_leaves_no_pending_request(
    make_keeper: Factory, backend: SpyBackend
) -> None:
    """forget() ends a conversation's questions too: nothing is left for a person to approve."""
    keeper = await signed_in_keeper(make_keeper, backend)
    keeper.request_borrow("research", SITE, "write")
    await keeper.forget("research")
    assert keeper.borrow_requests(status=None) == ()


def test_a_borrow_request_round_trips_through_json() -> None:
    """to_dict/from_dict keep every field; a malformed document is a typed error."""
    from datetime import UTC, datetime

    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    r = BorrowRequest(
        id="borrow-1",
        conversation="research",
        site=SITE,
        action="write",
        reason="why",
        requested_at=now,
        expires_at=now + timedelta(hours=1),
    )
    assert BorrowRequest.from_dict(r.to_dict()) == r
    with pytest.raises(InvalidArgument):
        BorrowRequest.from_dict({**r.to_dict(), "status": "maybe"})
