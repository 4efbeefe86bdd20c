"""The Guard's origin allowlist follows the contract's rule: scheme + host, port only if named."""

from __future__ import annotations

import pytest

from session_keeper import SessionKeeper
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.security import GuardPolicy
from session_keeper.testing import FakeBackend, FakeClock


def guard_for(origins: list[str]) -> GuardPolicy:
    """A Guard policy limiting conversation "research" to ``origins``."""
    guard = GuardPolicy(SessionKeeper(FakeBackend(), clock=FakeClock()))
    guard.allow_origins("research", origins)
    return guard


def test_an_allowlisted_origin_without_a_port_admits_the_sites_other_ports() -> None:
    """``http://docs.example`` lets ``http://docs.example:8000`` through; https stays out."""
    guard = guard_for(["http://docs.example"])
    assert guard.decide("research", "http://docs.example:8000/guide", "GET").allowed
    assert guard.decide("research", "http://docs.example/guide", "GET").allowed
    assert not guard.decide("research", "https://docs.example/guide", "GET").allowed
    assert not guard.decide("research", "http://api.docs.example/", "GET").allowed


def test_an_allowlisted_port_must_match_exactly() -> None:
    """``http://docs.example:8000`` admits port 8000 only; port 80 is the URL without one."""
    guard = guard_for(["http://docs.example:8000", "http://todo.example:80"])
    assert guard.decide("research", "http://docs.example:8000/", "GET").allowed
    assert not guard.decide("research", "http://docs.example/", "GET").allowed
    assert not guard.decide("research", "http://docs.example:8001/", "GET").allowed
    assert guard.decide("research", "http://todo.example/", "GET").allowed
    assert not guard.decide("research", "http://todo.example:8080/", "GET").allowed


@pytest.mark.parametrize(
    "entry", ["http://docs.example/path", "http://docs.example:x", "ftp://docs.example", ""]
)
def test_a_malformed_allowlist_entry_is_refused_and_changes_nothing(entry: str) -> None:
    """A bad entry raises InvalidArgument; the conversation's previous allowlist stands."""
    guard = guard_for(["http://docs.example"])
    with pytest.raises(InvalidArgument):
        guard.allow_origins("research", ["http://todo.example", entry])
    assert guard.decide("research", "http://docs.example/", "GET").allowed
    assert not guard.decide("research", "http://todo.example/", "GET").allowed


def test_an_allowlist_that_is_not_a_collection_is_a_type_error() -> None:
    """None or a single str is InvalidArgumentType, never a raw TypeError."""
    guard = guard_for([])
    for bad in (None, "http://docs.example", 5):
        with pytest.raises(InvalidArgumentType):
            guard.allow_origins("research", bad)  # type: ignore[arg-type]
