"""Bad input gets a typed error from the one exception tree, and changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from session_keeper import (
    Grant,
    InvalidArgument,
    InvalidArgumentType,
    KeeperClosedError,
    LoginNotObserved,
    SessionKeeperError,
    UsageError,
)

from .conftest import Factory


async def test_conversation_id_of_the_wrong_type(make_keeper: Factory) -> None:
    """A non-str conversation id is an InvalidArgumentType (also a TypeError)."""
    keeper = make_keeper()
    bad: Any = 42
    with pytest.raises(InvalidArgumentType) as info:
        await keeper.ensure(bad)
    assert isinstance(info.value, TypeError) and isinstance(info.value, SessionKeeperError)
    assert keeper.generation == 0


async def test_empty_site_and_empty_conversation(make_keeper: Factory) -> None:
    """Empty names are InvalidArgument (also a ValueError)."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    with pytest.raises(InvalidArgument):
        keeper.decide("billing", "  ")
    with pytest.raises(InvalidArgument):
        await keeper.ensure("")
    with pytest.raises(InvalidArgument):
        Grant("billing", "")


def test_grant_rejects_bad_values() -> None:
    """Grants refuse naive expiry, non-positive uses, empty or single-string actions."""
    with pytest.raises(InvalidArgument):
        Grant("billing", "billing.example", expires_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidArgument):
        Grant("billing", "billing.example", uses=0)
    with pytest.raises(InvalidArgument):
        Grant("billing", "billing.example", actions=frozenset())
    with pytest.raises(InvalidArgumentType):
        Grant("billing", "billing.example", actions="read")


async def test_grant_for_unknown_action_changes_nothing(make_keeper: Factory) -> None:
    """A grant naming an unknown action is refused and not added."""
    keeper = make_keeper(grants=[])
    with pytest.raises(InvalidArgument):
        keeper.grant(Grant("billing", "billing.example", actions={"read", "launch-missiles"}))
    assert keeper.grants() == ()


async def test_record_login_without_cookies(make_keeper: Factory) -> None:
    """record_login before the sign-in completed: LoginNotObserved, and no ledger entry."""
    keeper = make_keeper()
    await keeper.ensure("billing")
    with pytest.raises(LoginNotObserved, match=r"billing\.example"):
        await keeper.record_login("billing", "billing.example")
    assert keeper.logins() == ()


async def test_every_method_refuses_after_close(make_keeper: Factory) -> None:
    """After aclose(), each entry point raises KeeperClosedError (a UsageError)."""
    keeper = make_keeper()
    await keeper.aclose()
    with pytest.raises(KeeperClosedError):
        await keeper.ensure("a")
    with pytest.raises(KeeperClosedError):
        keeper.decide("a", "billing.example")
    with pytest.raises(KeeperClosedError):
        await keeper.sweep()
    with pytest.raises(KeeperClosedError):
        await keeper.tab("a")
    assert issubclass(KeeperClosedError, UsageError)


def test_keeper_options_are_checked(make_keeper: Factory) -> None:
    """Non-positive idle limits and unknown restart policies are refused at construction."""
    with pytest.raises(InvalidArgument):
        make_keeper(idle_timeout=timedelta(0))
    with pytest.raises(InvalidArgumentType):
        make_keeper(idle_timeout=600)
    with pytest.raises(InvalidArgument):
        make_keeper(restart_policy={"read": "pray"})
    with pytest.raises(InvalidArgument):
        make_keeper(restart_policy={"teleport": "stop"})
