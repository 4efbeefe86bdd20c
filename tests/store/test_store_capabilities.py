"""The Store seam is split by capability: each store is every one of them, and a store
for one purpose is checked against only its own part."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Self

from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import (
    Event,
    EventStore,
    JobStore,
    KeeperStateStore,
    ProfileLeaseStore,
    RetentionStore,
    Store,
    StoreLifetime,
)

CAPABILITIES = (
    StoreLifetime,
    KeeperStateStore,
    ProfileLeaseStore,
    EventStore,
    RetentionStore,
    JobStore,
)


def test_every_store_has_every_capability(store: Store) -> None:
    """SQLite and PostgreSQL stores are each capability and the whole Store."""
    assert all(isinstance(store, cap) for cap in (*CAPABILITIES, Store))


def test_store_is_exactly_the_union_of_its_capabilities() -> None:
    """No Store method lives outside a capability, and none is added to the union."""
    members = {name for cap in CAPABILITIES for name in vars(cap) if not name.startswith("_")}
    own = {name for name in vars(Store) if not name.startswith("_")}
    assert own == set()
    assert {"save_keeper_rows", "append_events", "prune_events", "claim"} <= members


class ListEvents:
    """An event sink and nothing else: a list in memory."""

    def __init__(self) -> None:
        self.log: list[Event] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def append_event(self, event: Event) -> None:
        await self.append_events([event])

    async def append_events(self, events: Sequence[Event]) -> list[Event]:
        stored = [
            Event(**{**e.to_dict(), "id": len(self.log) + i + 1, "at": e.at})  # type: ignore[arg-type]
            for i, e in enumerate(events)
        ]
        self.log.extend(stored)
        return stored

    async def events(
        self,
        *,
        job_id: str | None = None,
        since_id: int | None = None,
        kind: str | None = None,
        limit: int = 1000,
        newest_first: bool = False,
    ) -> list[Event]:
        found = [
            e
            for e in self.log
            if (kind is None or e.kind == kind)
            and (job_id is None or e.job_id == job_id)
            and (since_id is None or (e.id or 0) > since_id)
        ]
        return (found[::-1] if newest_first else found)[:limit]


async def test_an_audit_chain_needs_only_an_event_store() -> None:
    """The audit chain runs on a store that is only an EventStore (not a whole Store)."""
    sink = ListEvents()
    assert isinstance(sink, EventStore) and not isinstance(sink, Store)
    keyring = Keyring({"k1": b"k" * 32})
    audit = AuditLog(sink, keyring)
    await audit.record_many([("decision", {"n": i}, None) for i in range(3)])
    assert await verify_audit(sink, keyring) == 3
