"""KeeperPool: routing, a bound on open browsers (LRU closed as an idle sweep), profile
leases with fencing, ensure() semantics unchanged."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from session_keeper import Durability, Grant, SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    KeeperClosedError,
    ProfileHeld,
    ProfileLeaseLost,
    UnsavedChanges,
)
from session_keeper.pool import KeeperPool, PinnedRouting, SiteRouting, SpreadRouting
from session_keeper.stores import SqliteStore, Store
from session_keeper.testing import FakeBackend, FakeClock, FakePage

TTL = timedelta(seconds=30)
PINS = {"a": "p0", "a2": "p0", "b": "p1", "c": "p2", "d": "p3"}


def pool_of(
    backends: dict[str, FakeBackend],
    store: Store,
    clock: FakeClock,
    *,
    owner: str = "pool-a",
    max_open: int = 2,
    **kw: object,
) -> KeeperPool[FakePage]:
    """A pool over ``backends`` pinned by PINS unless a policy is given."""
    kw.setdefault("policy", PinnedRouting(PINS))
    return KeeperPool(
        backends,
        store=store,
        owner=owner,
        max_open=max_open,
        lease_ttl=TTL,
        clock=clock,
        **kw,  # type: ignore[arg-type]
    )


async def test_a_pool_never_has_more_than_max_open_browsers(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Turns on four profiles with max_open=2: at most two fake browsers alive, ever."""
    async with pool_of(backends, store, clock) as pool:
        for conversation in ["a", "b", "c", "d", "a", "c", "b", "d"]:
            await pool.ensure(conversation)
            alive = [name for name, b in backends.items() if b.current is not None]
            assert len(alive) <= 2
            assert pool.profile_of(conversation) in alive
        assert len(pool.stats().open_profiles) == 2
    assert all(b.current is None for b in backends.values())


async def test_the_least_recently_used_profile_is_evicted_and_its_conversations_told_once(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Opening a third profile closes the LRU one as an idle sweep; each of its
    conversations hears restarted + its lost tab exactly once; others hear nothing."""
    async with pool_of(backends, store, clock) as pool:
        for conversation in ["a", "a2", "b"]:
            await pool.ensure(conversation)
            await pool.tab(conversation, f"https://{conversation}.example/")
        await pool.ensure("b")  # p1 is now the most recently used; p0 the LRU
        await pool.ensure("c")
        assert pool.stats().open_profiles == ("p1", "p2")
        assert pool.stats().evictions == 1
        assert (await pool.ensure("b")).restarted is False
        first = await pool.ensure("a")
        assert first.restarted and [str(x) for x in first.lost] == ["tab:a"]
        assert first.previous_generation == 1 and first.generation == 2
        again = await pool.ensure("a")
        assert not again.restarted and again.lost == ()
        other = await pool.ensure("a2")
        assert other.restarted and [str(x) for x in other.lost] == ["tab:a2"]
        assert not (await pool.ensure("a2")).restarted


async def test_an_evicted_profile_forgets_its_logins_by_default(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Eviction is an idle close: the login cookies leave the profile, and the owner
    is told the login is lost when its profile comes back."""
    async with pool_of(backends, store, clock, max_open=1) as pool:
        await pool.ensure("a")
        keeper = pool.keeper("a")
        await keeper.unguarded_page("a", "https://billing.example/login")
        await backends["p0"].sign_in("billing.example", persistent=True)
        await keeper.record_login("a", "billing.example")
        await pool.ensure("b")
        assert backends["p0"].profile == ()
        turn = await pool.ensure("a")
        assert turn.restarted
        assert [str(x) for x in turn.lost] == ["login:billing.example", "tab:a"]


async def test_a_held_profile_is_not_evicted_until_its_turn_ends(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """With every slot inside a turn, a new profile waits; it opens when one ends."""
    async with pool_of(backends, store, clock, max_open=1) as pool:
        async with pool.hold("a") as keeper:
            await keeper.ensure("a")
            waiting = asyncio.create_task(pool.ensure("b"))
            for _ in range(20):
                await asyncio.sleep(0)
            assert not waiting.done()
            assert keeper.alive and backends["p1"].current is None
        facts = await waiting
        assert facts.conversation == "b" and backends["p0"].current is None


async def test_ensure_through_the_pool_keeps_the_keepers_facts(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """A crash under an open profile is reported by the pool's ensure() exactly as by the
    keeper's: once, to the conversation that had a tab, with one relaunch."""
    async with pool_of(backends, store, clock) as pool:
        await pool.ensure("a")
        await pool.tab("a", "https://a.example/")
        await backends["p0"].crash()
        turns = await asyncio.gather(pool.ensure("a"), pool.ensure("a2"))
        assert [t.restarted for t in turns] == [True, False]
        assert [str(x) for x in turns[0].lost] == ["tab:a"]
        assert backends["p0"].launches == 2
        assert pool.stats().evictions == 0


async def test_routing_by_site_account_pin_and_spread(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Account beats site, a pin beats both, the spread is stable, and a conversation
    keeps its first profile whatever it passes later."""
    policy = PinnedRouting(
        {"pinned": "p3"},
        fallback=SiteRouting(
            {"billing.example": "p1"}, accounts={"ana": "p2"}, fallback=SpreadRouting()
        ),
    )
    async with pool_of(backends, store, clock, policy=policy, max_open=4) as pool:
        await pool.ensure("by-site", site="https://billing.example/x")
        await pool.ensure("by-account", site="billing.example", account="ana")
        await pool.ensure("pinned", site="billing.example", account="ana")
        await pool.ensure("spread")
        assert [pool.profile_of(c) for c in ("by-site", "by-account", "pinned")] == [
            "p1",
            "p2",
            "p3",
        ]
        spread = SpreadRouting().route(
            "spread", site=None, account=None, profiles=("p0", "p1", "p2", "p3")
        )
        assert pool.profile_of("spread") == spread
        await pool.ensure("by-site", account="ana")
        assert pool.profile_of("by-site") == "p1"


async def test_a_policy_that_names_no_or_an_unknown_profile_is_refused(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """No route, or a route to a profile the pool lacks: InvalidArgument, nothing opened."""
    policy = SiteRouting({"billing.example": "elsewhere"})
    async with pool_of(backends, store, clock, policy=policy) as pool:
        with pytest.raises(InvalidArgument, match="names no profile"):
            await pool.ensure("x")
        with pytest.raises(InvalidArgument, match="unknown profile"):
            await pool.ensure("y", site="billing.example")
        assert pool.stats().opened == 0 and pool.profile_of("y") is None


async def test_two_pools_never_open_one_profile(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """A profile another pool leases raises ProfileHeld and launches nothing; once it is
    given back, the other pool opens it with a larger token."""
    other_backends = {name: FakeBackend(clock=clock) for name in backends}
    async with pool_of(backends, store, clock, owner="pool-a") as a:
        await a.ensure("a")
        async with pool_of(other_backends, store, clock, owner="pool-b") as b:
            with pytest.raises(ProfileHeld, match="pool-a"):
                await b.ensure("a")
            assert other_backends["p0"].launches == 0
            assert await a.close_profile("p0")
            await b.ensure("a")
            lease = await store.profile_lease("p0")
            assert lease is not None and (lease.owner, lease.token) == ("pool-b", 2)


async def test_a_pool_whose_lease_expired_is_fenced_and_its_late_saves_refused(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Pool A stalls past its lease; pool B takes the profile over. A's keeper can no
    longer save (ProfileLeaseLost, nothing written), and A's next renewal closes its
    browser on that profile and drops it."""
    other_backends = {name: FakeBackend(clock=clock) for name in backends}
    async with pool_of(backends, store, clock, owner="pool-a") as a:
        await a.ensure("a")
        stale_keeper = a.keeper("a")
        clock.advance(TTL)
        async with pool_of(other_backends, store, clock, owner="pool-b") as b:
            await b.ensure("b")
            await b.ensure("a")  # takes p0 over: pool-a's lease expired
            saved = await saved_document(store, "profile:p0")
            stale_keeper.grant(Grant("a", "late.example"))
            with pytest.raises(UnsavedChanges) as info:
                await stale_keeper.persist()
            causes: list[BaseException] = []
            cause: BaseException | None = info.value
            while cause is not None:
                causes.append(cause)
                cause = cause.__cause__
            assert any(isinstance(c, ProfileLeaseLost) for c in causes)
            assert await saved_document(store, "profile:p0") == saved
            await a.renew()
            assert a.stats().fenced == 1 and "p0" not in a.stats().open_profiles
            assert backends["p0"].current is None
            assert other_backends["p0"].current is not None


async def test_confirm_lease_renews_a_held_lease_and_fences_one_taken_over(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """confirm_lease() renews a lease still ours; once pool A stalled past its lease and
    pool B took the profile over, it raises ProfileLeaseLost with A's browser on it
    closed (before anything else could drive it), and it refuses a conversation with no
    open profile."""
    other_backends = {name: FakeBackend(clock=clock) for name in backends}
    async with pool_of(backends, store, clock, owner="pool-a") as a:
        with pytest.raises(InvalidArgument):
            await a.confirm_lease("a")  # no turn yet: nothing to confirm
        await a.ensure("a")
        clock.advance(TTL * 2 / 3)
        await a.confirm_lease("a")  # renewed: a full ttl from now
        clock.advance(TTL * 2 / 3)
        lease = await store.profile_lease("p0")
        assert lease is not None and lease.owner == "pool-a"
        await a.confirm_lease("a")
        clock.advance(TTL)
        async with pool_of(other_backends, store, clock, owner="pool-b") as b:
            await b.ensure("a")  # takes p0 over
            with pytest.raises(ProfileLeaseLost):
                await a.confirm_lease("a")
            assert a.stats().fenced == 1 and backends["p0"].current is None


async def test_confirm_lease_after_the_renewer_fenced_the_profile_is_a_lost_lease(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """The process stalls past its lease and the pool's renewer, waking first, fences the
    profile: a write's confirm_lease() then says ProfileLeaseLost (a retry on a fresh
    keeper may succeed), not a usage error a step would never retry."""
    async with pool_of(backends, store, clock, owner="pool-a") as a:
        await a.ensure("a")
        clock.advance(TTL)
        await a.renew()  # not renewed in time: fenced, the lease given back
        assert a.stats().fenced == 1
        with pytest.raises(ProfileLeaseLost, match="no longer open"):
            await a.confirm_lease("a")
        await a.ensure("a")  # a fresh keeper on the profile confirms again
        await a.confirm_lease("a")


async def test_confirm_write_records_the_intent_once_and_a_fenced_pool_records_none(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """confirm_write() renews the lease and says first only for a key no holder recorded;
    a pool whose lease was taken over records nothing (ProfileLeaseLost, its browser
    closed), and the new holder finds the key the old one recorded."""
    other_backends = {name: FakeBackend(clock=clock) for name in backends}
    async with pool_of(backends, store, clock, owner="pool-a") as a:
        await a.ensure("a")
        clock.advance(TTL * 2 / 3)
        assert await a.confirm_write("a", "run-1:2:refund") is True
        lease = await store.profile_lease("p0")
        assert lease is not None and lease.expires_at == clock.now() + TTL
        assert await a.confirm_write("a", "run-1:2:refund") is False
        with pytest.raises(InvalidArgument):
            await a.confirm_write("a", "")
        clock.advance(TTL)
        async with pool_of(other_backends, store, clock, owner="pool-b") as b:
            await b.ensure("a")  # takes p0 over
            with pytest.raises(ProfileLeaseLost):
                await a.confirm_write("a", "run-1:3:refund")
            assert a.stats().fenced == 1 and backends["p0"].current is None
            assert await b.confirm_write("a", "run-1:3:refund") is True
            assert await b.confirm_write("a", "run-1:2:refund") is False


async def test_bad_pool_arguments_are_refused(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """Typed errors for no profiles, a bad max_open, policy, ttl, owner or conversation."""
    with pytest.raises(InvalidArgument):
        KeeperPool({}, store=store, owner="x")
    with pytest.raises(InvalidArgument):
        KeeperPool(backends, store=store, owner="x", max_open=0)
    with pytest.raises(InvalidArgumentType):
        KeeperPool(backends, store=store, owner="x", max_open="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType):
        KeeperPool(backends, store=store, owner="x", policy=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        KeeperPool(backends, store=store, owner="x", lease_ttl=timedelta(0))
    with pytest.raises(InvalidArgument):
        KeeperPool(backends, store=store, owner="")
    async with pool_of(backends, store, clock) as pool:
        with pytest.raises(InvalidArgument):
            await pool.ensure("")
        with pytest.raises(InvalidArgumentType):
            await pool.ensure("a", site=3)  # type: ignore[arg-type]
        assert pool.stats().opened == 0
    with pytest.raises(KeeperClosedError):
        await pool.ensure("a")


async def test_a_keeper_factory_must_use_the_fenced_store(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """A factory that builds its keeper on another store is refused (its saves would not
    be fenced), and the profile's lease is given back."""

    def wrong(profile: str, backend: FakeBackend, fenced: Store) -> SessionKeeper[FakePage]:
        return SessionKeeper(
            backend, durability=Durability(store=store, keeper_id=profile), clock=clock
        )

    async with pool_of(backends, store, clock, keeper_factory=wrong) as pool:
        with pytest.raises(InvalidArgument, match="keeper_factory"):
            await pool.ensure("a")
    assert await store.profile_lease("p0") is None


async def test_a_pool_sweep_closes_idle_profiles_and_gives_their_leases_back(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """pool.sweep() sweeps each open keeper; a profile whose browser idled out is closed
    and its lease released, a busy one stays."""
    async with pool_of(backends, store, clock) as pool:
        await pool.ensure("a")
        for _ in range(33):  # 11 minutes, the leases renewed as the pool's renewer would
            clock.advance(timedelta(seconds=20))
            await pool.renew()
        await pool.ensure("b")
        reports = await pool.sweep()
        assert reports["p0"].closed_browser is not None
        assert reports["p1"].closed_browser is None
        assert pool.stats().open_profiles == ("p1",)
        assert await store.profile_lease("p0") is None
        assert backends["p0"].current is None and backends["p1"].current is not None


async def test_a_turn_on_an_open_profile_never_waits_behind_another_profiles_eviction(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """While the pool evicts one profile (its browser slow to close) to open another, a
    turn on a third, open profile completes without waiting for it."""
    async with pool_of(backends, store, clock) as pool:
        for conversation in ("a", "b", "a"):  # p0 and p1 open, p1 least recently used
            await pool.ensure(conversation)
        session = backends["p1"].current
        assert session is not None
        gate = asyncio.Event()
        close = session.close

        async def slow_close() -> None:
            await gate.wait()
            await close()

        session.close = slow_close  # type: ignore[method-assign]
        opening = asyncio.create_task(pool.ensure("c"))  # evicts p1, stuck closing it
        try:
            for _ in range(20):
                await asyncio.sleep(0)
            live = asyncio.create_task(pool.ensure("a"))
            # A hang bound, not a timing: without the lock-free path neither task ends.
            done, _ = await asyncio.wait(
                {live, opening}, timeout=30, return_when=asyncio.FIRST_COMPLETED
            )
            assert done == {live} and not opening.done()
            assert not live.result().restarted
        finally:
            gate.set()
        assert (await opening).conversation == "c"


async def test_aclose_wakes_a_caller_waiting_for_a_slot_with_keeper_closed_error(
    backends: dict[str, FakeBackend], store: SqliteStore, clock: FakeClock
) -> None:
    """A caller waiting for a free slot learns the pool closed when it closes, not never."""
    pool = pool_of(backends, store, clock, max_open=1)
    async with pool, pool.hold("a") as keeper:
        await keeper.ensure("a")
        waiting = asyncio.create_task(pool.ensure("b"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()
        await pool.aclose()
        for _ in range(20):
            await asyncio.sleep(0)
        assert waiting.done()
        with pytest.raises(KeeperClosedError):
            await waiting
