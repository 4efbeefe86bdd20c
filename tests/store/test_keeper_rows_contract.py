"""The keeper-rows part of the Store contract, on SQLite and PostgreSQL alike:
``save_keeper_rows`` writes one batch of changes in place, in one transaction, one
statement per batch; ``load_keeper_rows`` reads them back."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import pytest

from session_keeper.errors import InvalidArgument, InvalidArgumentType, ProfileLeaseLost
from session_keeper.stores import KeeperRows, Store
from session_keeper.testing import (
    FakeClock,
    StoreStatement,
    run_store_operation,
    watch_store_statements,
)

TTL = timedelta(seconds=60)
HEAD = {"version": 2, "rows": 2}


def _row(n: int) -> dict[str, object]:
    return {"tab": {"last_url": f"https://docs.example/{n}"}, "seen": n}


async def _projection(store: Store, sql: str) -> list[tuple[Any, ...]]:
    def op() -> Generator[StoreStatement, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        rows = yield StoreStatement("inspect", sql)
        return [tuple(r) for r in rows]

    return await run_store_operation(store, op, write=False)


async def test_keeper_rows_are_upserted_and_deleted_in_place(store: Store) -> None:
    """A batch replaces the head, upserts and deletes only the rows it names; the rest stay."""
    assert await store.load_keeper_rows("k") is None
    await store.save_keeper_rows(
        "k",
        head=HEAD,
        upserts=[("conversation", "a", _row(1)), ("conversation", "b", _row(2))],
    )
    await store.save_keeper_rows(
        "k",
        head={"version": 2, "rows": 2, "n": 2},
        upserts=[("conversation", "a", _row(3)), ("login", "x.example", {"site": "x.example"})],
        deletes=[("conversation", "b"), ("grant", "never-written")],
    )
    assert await store.load_keeper_rows("k") == KeeperRows(
        head={"version": 2, "rows": 2, "n": 2},
        rows={
            ("conversation", "a"): _row(3),
            ("login", "x.example"): {"site": "x.example"},
        },
    )
    assert await store.load_keeper_rows("other") is None
    assert await store.keeper_ids() == ["k"]


@pytest.mark.parametrize(
    ("batch", "error"),
    [
        (
            {"upserts": [("login", "s", {"cookies": [{"name": "sid", "value": "v"}]})]},
            InvalidArgument,
        ),
        ({"upserts": [("grant", "1", {"list": [{"password": "p"}]})]}, InvalidArgument),
        ({"upserts": [("grant", "1", {"x": object()})]}, InvalidArgument),
        ({"upserts": [("grant", "1", {}), ("grant", "1", {})]}, InvalidArgument),
        ({"upserts": [("grant", "1", {})], "deletes": [("grant", "1")]}, InvalidArgument),
        ({"upserts": [("grant", "", {})]}, InvalidArgument),
        ({"upserts": [("grant", "1", [])]}, InvalidArgumentType),
        ({"upserts": [("grant", "1")]}, InvalidArgumentType),
        ({"deletes": "grant"}, InvalidArgumentType),
        ({"head": [1]}, InvalidArgumentType),
        ({"head": {"list": [{"secret": "s"}]}}, InvalidArgument),
        ({"projections_upsert": {"keeper_nope": []}}, InvalidArgument),
        ({"projections_upsert": {"keeper_tabs": [{"body": "{}"}]}}, InvalidArgument),
        ({"projections_delete": {"keeper_tabs": [{"seq": 1}]}}, InvalidArgument),
        ({"fence": "lease"}, InvalidArgumentType),
        ({"replaces_document": 1}, InvalidArgumentType),
    ],
)
async def test_a_refused_batch_writes_nothing(
    store: Store, batch: dict[str, Any], error: type[Exception]
) -> None:
    """Bad input anywhere in a batch: a typed error before anything is written."""
    await store.save_keeper_rows("k", head=HEAD, upserts=[("grant", "7", {"site": "x"})])
    before = await store.load_keeper_rows("k")
    args: dict[str, Any] = {"head": {"version": 2, "changed": True}, **batch}
    with pytest.raises(error):
        await store.save_keeper_rows("k", **args)
    assert await store.load_keeper_rows("k") == before


async def test_the_projections_follow_the_rows_by_key(store: Store) -> None:
    """Projection rows are upserted and deleted by what they describe, not replaced whole."""
    tab = {"conversation": "a", "last_verified_url": "https://docs.example/", "body": "{}"}
    await store.save_keeper_rows(
        "k",
        head=HEAD,
        projections_upsert={
            "keeper_tabs": [tab, {**tab, "conversation": "b"}],
            "keeper_grants": [{"grant_key": "1", "body": "{}"}],
            "keeper_generations": [{"generation": 1}, {"generation": 2}],
        },
    )
    await store.save_keeper_rows(
        "k",
        head=HEAD,
        projections_upsert={"keeper_tabs": [{**tab, "last_verified_url": "https://x.example/"}]},
        projections_delete={
            "keeper_tabs": [{"conversation": "b"}],
            "keeper_generations": [{"generation": 1}],
        },
    )
    tabs = await _projection(
        store, "SELECT conversation, last_verified_url FROM keeper_tabs ORDER BY conversation"
    )
    generations = await _projection(store, "SELECT generation FROM keeper_generations")
    grants = await _projection(store, "SELECT grant_key FROM keeper_grants")
    assert tabs == [("a", "https://x.example/")]
    assert generations == [(2,)]
    assert grants == [("1",)]


async def test_rows_replace_the_document_saved_before_them(store: Store) -> None:
    """replaces_document drops the keeper's old document in the same batch; its id stays listed."""
    await store.save_keeper_state("k", {"generation": 3})
    await store.save_keeper_state("vault", {"sites": {}})
    await store.save_keeper_rows("k", head=HEAD, replaces_document=True)
    assert await store.load_keeper_state("k") is None
    assert await store.load_keeper_state("vault") == {"sites": {}}
    assert await store.keeper_ids() == ["k", "vault"]


async def test_a_fenced_batch_writes_only_under_the_current_profile_lease(
    store: Store, clock: FakeClock
) -> None:
    """A batch fenced by a lease another holder took over: ProfileLeaseLost, nothing written."""
    old = await store.acquire_profile("alice", "pool-a", TTL)
    await store.save_keeper_rows("profile:alice", head=HEAD, fence=old)
    clock.advance(TTL)
    new = await store.acquire_profile("alice", "pool-b", TTL)
    with pytest.raises(ProfileLeaseLost):
        await store.save_keeper_rows(
            "profile:alice", head={"late": True}, upserts=[("grant", "1", {})], fence=old
        )
    assert await store.load_keeper_rows("profile:alice") == KeeperRows(head=HEAD, rows={})
    await store.save_keeper_rows("profile:alice", head={"v": 2}, fence=new)
    loaded = await store.load_keeper_rows("profile:alice")
    assert loaded is not None and loaded.head == {"v": 2}


async def test_a_batch_is_one_statement_per_kind_of_change_not_per_row(store: Store) -> None:
    """500 upserted rows and 500 deleted ones are one statement each (executemany)."""
    await store.save_keeper_rows(
        "k", head=HEAD, upserts=[("conversation", f"c{i}", _row(i)) for i in range(500)]
    )
    labels: list[str] = []
    watch_store_statements(store, labels.append)
    try:
        await store.save_keeper_rows(
            "k",
            head=HEAD,
            upserts=[("conversation", f"n{i}", _row(i)) for i in range(500)],
            deletes=[("conversation", f"c{i}") for i in range(500)],
            projections_upsert={
                "keeper_tabs": [{"conversation": f"n{i}", "body": "{}"} for i in range(500)]
            },
        )
    finally:
        watch_store_statements(store, None)
    assert labels == [
        "upsert_keeper_head",
        "upsert_keeper_rows",
        "delete_keeper_rows",
        "project_keeper_tabs",
        "COMMIT",
        "COMMITTED",
    ]
    loaded = await store.load_keeper_rows("k")
    assert loaded is not None and sorted(loaded.rows) == sorted(
        ("conversation", f"n{i}") for i in range(500)
    )


class _Crash(Exception):
    """Stands for the process dying at a statement boundary."""


@pytest.mark.parametrize(
    "point",
    [
        "upsert_keeper_head",
        "drop_keeper_document",
        "upsert_keeper_rows",
        "delete_keeper_rows",
        "unproject_keeper_tabs",
        "project_keeper_tabs",
        "COMMIT",
    ],
)
async def test_a_batch_stopped_at_any_statement_leaves_the_previous_state_whole(
    store: Store, point: str
) -> None:
    """Stopped before any of its statements (or its COMMIT), a batch leaves no part of itself."""
    tab = {"conversation": "a", "body": "{}"}
    await store.save_keeper_state("k", {"generation": 1})
    await store.save_keeper_rows(
        "k", head=HEAD, upserts=[("conversation", "a", _row(1)), ("conversation", "b", _row(2))]
    )
    before = await store.load_keeper_rows("k")
    before_tabs = await _projection(store, "SELECT conversation FROM keeper_tabs")

    def crash(label: str) -> None:
        if label == point:
            raise _Crash(label)

    watch_store_statements(store, crash)
    try:
        with pytest.raises(_Crash):
            await store.save_keeper_rows(
                "k",
                head={"version": 2, "rows": 2, "n": 2},
                upserts=[("conversation", "a", _row(5)), ("conversation", "c", _row(6))],
                deletes=[("conversation", "b")],
                projections_upsert={"keeper_tabs": [tab]},
                projections_delete={"keeper_tabs": [{"conversation": "b"}]},
                replaces_document=True,
            )
    finally:
        watch_store_statements(store, None)
    assert await store.load_keeper_rows("k") == before
    assert await store.load_keeper_state("k") == {"generation": 1}
    assert await _projection(store, "SELECT conversation FROM keeper_tabs") == before_tabs
