"""A save writes only the rows that changed: one durable act among many conversations is
one row (plus the head), and what is stored always equals a full snapshot's rows."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Durability, Grant, SessionKeeper
from session_keeper._keeper.saving.row_batches import RowBook
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper.errors import StoreError, UnsavedChanges
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage

CONVERSATIONS = 300
SITE = "billing.example"


class RecordingStore(SqliteStore):
    """A SqliteStore that records each batch of keeper rows it is asked to write."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[dict[str, Any]] = []
        self.fail_next = False

    async def save_keeper_rows(self, keeper_id: str, **batch: Any) -> None:
        if self.fail_next:
            self.fail_next = False
            raise StoreError("disk full")
        self.batches.append(batch)
        await super().save_keeper_rows(keeper_id, **batch)

    def written(self) -> list[tuple[str, str]]:
        """The (kind, key) of every row upserted since the last call, and clears the record."""
        out = [(kind, key) for b in self.batches for kind, key, _ in b["upserts"]]
        self.batches.clear()
        return out

    def deleted(self) -> list[tuple[str, str]]:
        return [row for b in self.batches for row in b["deletes"]]


@pytest.fixture
async def many(
    tmp_path: Path,
) -> Any:
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with RecordingStore(tmp_path / "k.db", clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            grants=[Grant("c0", SITE, uses=5)],
        )
        async with keeper:
            for i in range(CONVERSATIONS):
                await keeper.ensure(f"c{i}", turn="t0")
                await keeper.unguarded_page(f"c{i}", f"https://docs.example/{i}")
            await keeper.unguarded_page("c1", f"https://{SITE}/login")
            await backend.sign_in(SITE)
            await keeper.record_login("c1", SITE)
            await keeper.persist()
            store.written()
            yield keeper, store, clock


def full_snapshot(keeper: SessionKeeper[FakePage]) -> dict[tuple[str, str], Any]:
    """The rows a save that knew nothing of the past would write (bodies, MACs left off)."""
    live = keeper._live
    book: RowBook[FakePage] = RowBook(live, "default", None)
    live.changed.update({*live.tabs, *live.pending, *live.seen, *live.turns, *live.takeovers})
    live.ledger.changes.update({x.site for x in live.ledger.live()})
    live.ledger.changes.update({x.name for x in live.ledger.lost_records()})
    live.grants.changes.update(s.id for s in live.grants.states())
    live.borrows.changes.update(x.id for x in live.borrows.requests())
    live.generation_changes.update(g.generation for g in live.generations)
    batch = book.plan(audit_head=None, browser_identity=None)
    book.not_stored(batch)  # the keeper's own next save still owes what it marked
    return {(k, key): {f: v for f, v in b.items() if f != "mac"} for k, key, b in batch.upserts}


async def stored(store: RecordingStore) -> dict[tuple[str, str], Any]:
    saved = await store.load_keeper_rows("default")
    assert saved is not None
    return {k: {f: v for f, v in b.items() if f != "mac"} for k, b in saved.rows.items()}


async def test_one_durable_act_among_many_conversations_writes_one_row(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
) -> None:
    """ensure(turn=new), a counted decide(), grant(), mark_verified(), a takeover: each is
    one row written, whatever the number of conversations."""
    keeper, store, _ = many
    await keeper.ensure("c7", turn="t1")
    assert store.written() == [("conversation", "c7")]
    assert keeper.decide("c0", SITE, "read").outcome == "act"
    await keeper.persist()
    assert [kind for kind, _ in store.written()] == ["grant"]
    keeper.grant(Grant("c9", SITE, actions={"read"}))
    await keeper.persist()
    assert [kind for kind, _ in store.written()] == ["grant"]
    await keeper.unguarded_page("c8", "https://docs.example/moved")
    keeper.mark_verified("c8")
    await keeper.persist()
    assert store.written() == [("conversation", "c8")]
    keeper.begin_takeover("c5", expires_in=timedelta(minutes=5))
    await keeper.persist()
    assert store.written() == [("conversation", "c5")]
    await keeper.ensure("c7", turn="t1")  # the same turn again: nothing new to write
    await keeper.persist()
    assert store.written() == []
    assert await stored(store) == full_snapshot(keeper)


async def test_a_durable_act_is_one_transaction_and_nothing_new_is_none(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
) -> None:
    """A counted decide() then persist() is one write to the store (not its background
    write and then a head-only one); a persist() with nothing new writes nothing."""
    keeper, store, clock = many
    store.batches.clear()
    for _ in range(3):
        keeper.decide("c0", SITE, "read")
        await keeper.persist()
    clock.advance(timedelta(seconds=1))
    keeper.mark_verified("c2")
    await keeper.persist()
    assert len(store.batches) == 4
    await keeper.persist()
    await keeper.ensure("c2")
    assert len(store.batches) == 4
    assert await stored(store) == full_snapshot(keeper)


async def test_using_a_tab_leaves_no_row_to_plan(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
) -> None:
    """A tab's use (every turn's tab()) changes nothing that is saved, so it marks no
    conversation: the next save plans the rows of what changed, not of every tab used."""
    keeper, store, _ = many
    keeper._live.changed.take()
    for i in range(20):
        await keeper.tab(f"c{i}")
    assert keeper._live.changed.take() == set()
    keeper.grant(Grant("c9", SITE, actions={"read"}))
    await keeper.persist()
    assert [kind for kind, _ in store.written()] == ["grant"]


async def test_a_forgotten_conversation_is_one_row_deleted(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
) -> None:
    """forget() deletes the conversation's row (its tab with it), nothing else."""
    keeper, store, _ = many
    assert await keeper.forget("c3")
    assert store.deleted() == [("conversation", "c3")]
    assert "c3" not in {t.conversation for t in keeper.tabs()}
    doc = await saved_document(store, "default")
    assert doc is not None and "c3" not in doc["seen"]
    assert await stored(store) == full_snapshot(keeper)


async def test_a_restart_rewrites_every_conversation_it_touched_and_stays_whole(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
) -> None:
    """A crash owes every conversation its loss: all their rows are written, in one save
    per batch, and the stored rows equal a full snapshot."""
    keeper, store, _ = many
    backend = keeper._backend
    assert isinstance(backend, FakeBackend)
    await backend.crash()
    await keeper.ensure("c1")
    await keeper.persist()
    written = {key for kind, key in store.written() if kind == "conversation"}
    assert written == {f"c{i}" for i in range(CONVERSATIONS)}
    assert await stored(store) == full_snapshot(keeper)


async def test_a_failed_save_keeps_its_rows_to_be_written_by_the_next(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
) -> None:
    """A turn whose save failed is written by the next save (its row is not forgotten)."""
    keeper, store, _ = many
    store.fail_next = True
    with pytest.raises(UnsavedChanges):
        await keeper.ensure("c4", turn="t9")
    await keeper.ensure("c4", turn="t9")
    assert ("conversation", "c4") in store.written()
    doc = await saved_document(store, "default")
    assert doc is not None and doc["turns"]["c4"]["turn"] == "t9"
    assert await stored(store) == full_snapshot(keeper)


async def test_a_save_reads_only_the_rows_marked_never_a_whole_book(
    many: tuple[SessionKeeper[FakePage], RecordingStore, FakeClock],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each durable write (a turn, a counted decide, a grant, a borrow request, a login
    confirmed) is saved without listing any book whole: its cost follows the change."""
    keeper, store, _ = many
    live = keeper._live

    def whole(*_: object, **__: object) -> Any:
        raise AssertionError("a save listed a whole book")

    for book, method in (
        (live.grants, "states"),
        (live.ledger, "live"),
        (live.ledger, "lost_records"),
        (live.borrows, "requests"),
    ):
        monkeypatch.setattr(book, method, whole)
    await keeper.ensure("c7", turn="t1")
    keeper.decide("c0", SITE, "read")
    keeper.grant(Grant("c9", SITE, actions={"read"}))
    keeper.request_borrow("c4", SITE, "write")
    await keeper.persist()
    written = {kind for kind, _ in store.written()}
    assert {"conversation", "grant", "borrow"} <= written
    monkeypatch.undo()
    assert await stored(store) == full_snapshot(keeper)


async def test_verifying_every_page_of_a_walk_writes_at_most_once_a_second(
    tmp_path: Path,
) -> None:
    """mark_verified() after each page (what a job does) is saved as a navigation is: at most
    once a second in the background, not a write per page; persist() carries the newest."""
    clock = FakeClock()
    async with RecordingStore(tmp_path / "k.db", clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            FakeBackend(clock=clock), clock=clock, durability=Durability(store=store)
        )
        async with keeper:
            await keeper.ensure("walker")
            await keeper.unguarded_page("walker", "https://docs.example/0")
            await keeper.persist()
            clock.advance(timedelta(seconds=2))
            store.batches.clear()
            for n in range(1, 11):
                await keeper.unguarded_page("walker", f"https://docs.example/{n}")
                keeper.mark_verified("walker")
                # Room for a background write to run, as a page's own work gives it.
                for _ in range(20):
                    await asyncio.sleep(0)
            assert len(store.batches) <= 1
            assert keeper.unsaved
            await keeper.persist()
            assert await stored(store) == full_snapshot(keeper)
            rows = await store.load_keeper_rows("default")
            assert rows is not None
            assert "https://docs.example/10" in str(rows.rows[("conversation", "walker")])
