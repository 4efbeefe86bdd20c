"""The pool's lease renewer: a store briefly refusing renewals never leaves a profile
with two drivers — renewals are retried inside the lease, and a profile that cannot be
renewed in time is fenced (its browser closed) before its lease can lapse."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest

from session_keeper.errors import ProfileHeld, StoreBusy
from session_keeper.pool import KeeperPool, PinnedRouting
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage, watch_store_statements

# Short, so the renewer (paced in real time, every ttl/3) runs within the test; the
# lease itself lives on the fake clock, which only the test moves.
TTL = timedelta(seconds=0.3)


def pool_of(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock, owner: str
) -> KeeperPool[FakePage]:
    """A pool over ``backends``, conversation "a" pinned to p0."""
    return KeeperPool(
        backends,
        store=store,
        owner=owner,
        policy=PinnedRouting({"a": "p0"}),
        lease_ttl=TTL,
        clock=clock,
    )


def refuse_renewals(store: SqliteStore, times: int | None) -> list[str]:
    """Make the store raise StoreBusy on the first ``times`` renewals (all if None);
    returns the list of renewal outcomes seen so far ("busy" / "ok")."""
    seen: list[str] = []

    def hook(label: str) -> None:
        if label != "renew_profile":
            return
        if times is None or len(seen) < times:
            seen.append("busy")
            raise StoreBusy("the store stayed locked (injected)")
        seen.append("ok")

    watch_store_statements(store, hook)
    return seen


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` (a hang bound of ~10 s, not a timing)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


async def test_a_renewal_the_store_refuses_briefly_is_retried_and_the_lease_kept(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Three StoreBusy renewals in a row: the renewer retries inside the lease, renews
    it, the profile stays open and another pool still gets ProfileHeld past the
    original expiry."""
    seen = refuse_renewals(store, times=3)
    async with pool_of(backends, store, clock, "pool-a") as a:
        await a.ensure("a")
        first = await store.profile_lease("p0")
        assert first is not None
        clock.advance(0.2)  # inside the lease, before the fencing point
        await until(lambda: "ok" in seen)
        assert seen[:3] == ["busy"] * 3
        renewed = await store.profile_lease("p0")
        assert renewed is not None and renewed.expires_at > first.expires_at
        clock.advance(0.2)  # past the first lease's expiry
        other = {name: FakeBackend(clock=clock) for name in backends}
        async with pool_of(other, store, clock, "pool-b") as b:
            with pytest.raises(ProfileHeld):
                await b.ensure("a")
        assert other["p0"].launches == 0
        assert a.stats().fenced == 0 and backends["p0"].current is not None
    watch_store_statements(store, None)


async def test_a_profile_the_store_cannot_renew_is_fenced_before_its_lease_lapses(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Every renewal refused: the pool keeps retrying while the lease has room, then
    closes the profile's browser before the lease's expiry and gives it back, so the
    next holder is the only driver."""
    seen = refuse_renewals(store, times=None)
    async with pool_of(backends, store, clock, "pool-a") as a:
        await a.ensure("a")
        lease = await store.profile_lease("p0")
        assert lease is not None
        clock.advance(0.2)  # inside the lease, before the fencing point (ttl - ttl/6)
        await until(lambda: len(seen) >= 3)
        assert a.stats().fenced == 0 and backends["p0"].current is not None
        clock.advance(0.06)  # past the fencing point, still before the expiry
        await until(lambda: a.stats().fenced == 1)
        assert clock.now() < lease.expires_at
        assert backends["p0"].current is None
        assert "p0" not in a.stats().open_profiles
        other = {name: FakeBackend(clock=clock) for name in backends}
        async with pool_of(other, store, clock, "pool-b") as b:
            await b.ensure("a")  # given back: no need to wait for the expiry
            assert other["p0"].current is not None and backends["p0"].current is None
            watch_store_statements(store, None)
    watch_store_statements(store, None)
