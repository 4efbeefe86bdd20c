"""The grant book is indexed: a lookup reads only the asking conversation's grants on the
site, and taking in saved grants is linear — with the answers a full scan would give."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from session_keeper import Grant
from session_keeper._model.authorisation import Authorisation, BrowserView, Query
from session_keeper._model.grants import DEFAULT_ACTIONS, GrantBook, GrantState
from session_keeper._model.ledger import LoginLedger
from session_keeper._model.uses import UseTokens
from session_keeper.facts import LoginRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ALIVE = BrowserView(alive=True, generation=1, restarted_unheard=False)
SITE = "billing.example"


def _book(unrelated: int) -> GrantBook:
    """A book holding ``research``'s grants on SITE among ``unrelated`` others."""
    book = GrantBook(frozenset(DEFAULT_ACTIONS))
    for i in range(unrelated):
        # Other conversations on the same site, and research on other sites.
        book.add(Grant(f"c{i}", SITE) if i % 2 else Grant("research", f"s{i}.example"))
    book.add(Grant("research", SITE, actions={"read"}, uses=3))
    book.add(Grant("research", SITE, actions={"read"}, expires_at=NOW + timedelta(hours=1)))
    return book


@contextmanager
def _grants_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Count how many times a grant state's grant is read (every lookup path reads it)."""
    seen = [0]
    slot = GrantState.__dict__["grant"]

    def read(self: GrantState) -> Grant:
        seen[0] += 1
        value: Grant = slot.__get__(self, GrantState)
        return value

    with monkeypatch.context() as m:
        m.setattr(GrantState, "grant", property(read, slot.__set__))
        yield seen


def _lookups(book: GrantBook) -> None:
    ledger = LoginLedger()
    ledger.record(
        LoginRecord(site=SITE, owner="billing", recorded_at=NOW, generation=1, cookies=())
    )
    auth = Authorisation(book, ledger, UseTokens(), dict.fromkeys(DEFAULT_ACTIONS, "stop"))
    for action in ("read", "write"):  # an act and a block (reason: a grant not covering it)
        auth.evaluate(Query(conversation="research", site=SITE, action=action), ALIVE, NOW)
    auth.holds_grant("research", SITE, "read", NOW)
    book.for_conversation("research", SITE, NOW)


def test_a_lookup_reads_the_same_grants_whatever_the_number_of_unrelated_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """permits/holds_grant/for_conversation read as many grants with 10 as with 5,000 others."""
    counts = []
    for unrelated in (10, 5_000):
        book = _book(unrelated)
        with _grants_read(monkeypatch) as seen:
            _lookups(book)
        counts.append(seen[0])
    assert counts[0] == counts[1] > 0


def test_indexed_lookups_answer_as_a_scan_of_every_grant_would() -> None:
    """find/for_conversation/holders/standing agree with a scan, through revoke and expiry."""
    book = GrantBook(frozenset(DEFAULT_ACTIONS))
    later = NOW + timedelta(minutes=5)
    for i in range(40):
        expiry = None if i % 3 else NOW + timedelta(minutes=i)
        book.add(Grant(f"c{i % 4}", f"s{i % 5}.example", expires_at=expiry, uses=(i % 2) or None))
    book.revoke("c1", "s1.example")
    book.expire(later)

    def scan_find(conv: str, site: str, action: str) -> GrantState | None:
        matches = [s for s in book.states() if s.covers(conv, site, action, later)]
        unlimited = [s for s in matches if s.uses_left is None]
        pool = unlimited or matches
        never = datetime.max.replace(tzinfo=UTC)
        return min(pool, key=lambda s: s.grant.expires_at or never) if pool else None

    for conv in ("c0", "c1", "c2", "c3", "nobody"):
        for n in range(5):
            site = f"s{n}.example"
            assert book.find(conv, site, "read", later) is scan_find(conv, site, "read")
            assert book.for_conversation(conv, site, later) == [
                s
                for s in book.states()
                if s.grant.conversation == conv and s.grant.site == site and s.live(later)
            ]
            assert book.standing(conv, site, "read") == any(
                s.grant.conversation == conv
                and s.grant.site == site
                and s.uses_left is None
                and s.grant.expires_at is None
                for s in book.states()
            )
    for n in range(5):
        site = f"s{n}.example"
        assert book.holders(site, later) == {
            s.grant.conversation for s in book.states() if s.grant.site == site
        }


def test_taking_in_saved_grants_compares_each_grant_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """merge_saved of 2,000 saved grants over 2,000 configured ones is linear, not quadratic."""
    n = 2_000
    configured = [Grant(f"c{i}", SITE, uses=5) for i in range(n)]
    book = GrantBook(frozenset(DEFAULT_ACTIONS))
    for g in configured:
        book.add(g)
    ids = [s.id for s in book.states()]
    compared = [0]
    eq = Grant.__eq__

    def counting(self: Grant, other: object) -> bool:
        compared[0] += 1
        return eq(self, other)

    monkeypatch.setattr(Grant, "__eq__", counting)
    # Saved in reverse: the twin a scan looks for is always at the far end.
    book.merge_saved((g, 2) for g in reversed(configured))
    monkeypatch.undo()
    assert compared[0] <= 2 * n
    states = book.states()
    assert [s.id for s in states] == ids and all(s.uses_left == 2 for s in states)


def test_a_saved_copy_of_a_grant_configured_twice_is_its_first_unmatched_twin() -> None:
    """Equal configured grants each take one saved copy, in book order; extras are added."""
    g = Grant("research", SITE, uses=4)
    book = GrantBook(frozenset(DEFAULT_ACTIONS))
    first, second = book.add(g), book.add(g)
    book.merge_saved([(g, 1), (g, 2), (g, 3)])
    states = book.states()
    assert [(s.id, s.uses_left) for s in states[:2]] == [(first.id, 1), (second.id, 2)]
    assert len(states) == 3 and states[2].uses_left == 3
