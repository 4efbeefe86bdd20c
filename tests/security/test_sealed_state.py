"""The keeper's sealed state: a grant written into the store without the key is refused."""

from __future__ import annotations

from pathlib import Path

from session_keeper import Durability, Grant, SessionKeeper
from session_keeper.errors import IntegrityError
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

KEYS = Keyring([("k1", bytes(range(32)))])


async def test_a_grant_forged_in_the_stored_document_is_never_honoured(
    tmp_path: Path,
) -> None:
    """A grant row written straight into the store (no audit entry) must not be honoured."""
    db = tmp_path / "k.db"
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    async with SqliteStore(db, clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(
                store=store, keyring=KEYS, audit=AuditLog(store, KEYS, clock=clock), keeper_id="k"
            ),
            grants=[Grant("billing", "billing.example")],
        )
        async with keeper:
            await keeper.ensure("billing")
            await backend.sign_in("billing.example", persistent=True)
            await keeper.record_login("billing", "billing.example")
            await keeper.persist()
        saved = await store.load_keeper_rows("k")
        assert saved is not None
        (key, body), *_ = [(k, b) for (kind, k), b in saved.rows.items() if kind == "grant"]
        # A copy of a real grant row, its MAC and all, and a head that counts it.
        await store.save_keeper_rows(
            "k",
            head={**saved.head, "rows": len(saved.rows) + 1},
            upserts=[("grant", key + "0", {**body, "conversation": "evil"})],
        )
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(
                store=store, keyring=KEYS, audit=AuditLog(store, KEYS, clock=clock), keeper_id="k"
            ),
        )
        outcome = "refused"
        try:
            async with keeper:
                await keeper.ensure("evil")
                await keeper.ensure("billing")
                await backend.sign_in("billing.example")
                await keeper.record_login("billing", "billing.example")
                outcome = keeper.decide("evil", "billing.example", "read").outcome
        except IntegrityError as exc:
            outcome = f"refused: {type(exc).__name__}"
        assert outcome != "act", outcome
