"""Regressions for problems a review found: each test failed before its fix."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from session_keeper import (
    Accepted,
    BrowserGoneError,
    Grant,
    LeaseHeldError,
    Readback,
    SessionKeeper,
    SqliteStore,
    StepContext,
    StoreCorrupt,
    StoreError,
    TransientFailure,
)
from session_keeper._backend import Cookie
from session_keeper._store import Projections
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests.jobs import conftest as jobs_conftest
from tests.jobs.conftest import FakeCatalogue, World, contract, identity, target

#: The job-loop fake world (FakeBackend, FakeClock, SqliteStore), as in tests/jobs.
world = jobs_conftest.world

KEY = bytes(range(32))
SITE = "billing.example"


class FailingSaveStore(SqliteStore):
    """A SqliteStore whose next save_keeper_state fails (a full disk, a dropped connection)."""

    fail_next_save = False

    async def save_keeper_state(
        self,
        keeper_id: str,
        state: Mapping[str, object],
        *,
        projections: Projections | None = None,
    ) -> None:
        if self.fail_next_save:
            self.fail_next_save = False
            raise StoreError("disk full")
        await super().save_keeper_state(keeper_id, state, projections=projections)


# -- keeper ------------------------------------------------------------------------------


async def test_record_login_racing_a_restart_cannot_vouch_for_a_missing_login() -> None:
    """A record_login whose cookie read straddles a crash+relaunch must not make decide() act."""
    clock, backend = FakeClock(), FakeBackend()
    async with SessionKeeper(backend, clock=clock, grants=[Grant("billing", SITE)]) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE)  # a session cookie: a SIGKILL takes it
        session = backend.current
        assert session is not None
        original = session.cookies
        entered, gate = asyncio.Event(), asyncio.Event()

        async def slow_cookies() -> Sequence[Cookie]:
            jar = await original()
            entered.set()
            await gate.wait()  # the CDP answer is in flight
            return jar

        setattr(session, "cookies", slow_cookies)  # noqa: B010
        recording = asyncio.create_task(keeper.record_login("billing", SITE))
        await entered.wait()
        await backend.crash()
        await keeper.ensure("research")  # another conversation relaunches: browser-2
        gate.set()
        with contextlib.suppress(BrowserGoneError):
            await recording
        new = backend.current
        assert new is not None
        assert not [c for c in await new.cookies() if c.applies_to(SITE)]  # nobody signed in
        decision = keeper.decide("billing", SITE, "write")
        assert decision.outcome != "act", decision


async def test_failed_save_on_the_alive_path_does_not_swallow_restart_facts(
    tmp_path: Path,
) -> None:
    """If ensure() raises because its save failed, the restart must still be reported later."""
    clock, backend = FakeClock(), FakeBackend()
    async with (
        FailingSaveStore(tmp_path / "k.db", clock=clock) as store,
        SessionKeeper(backend, clock=clock, store=store, fingerprint_key=KEY) as keeper,
    ):
        await keeper.ensure("a")
        await keeper.ensure("b")
        await keeper.tab("b", "https://docs.example/guide")
        await backend.crash()
        await keeper.ensure("a")  # relaunch; b is owed "restarted, lost tab:b"
        await keeper.persist()  # no background save left to absorb the failure
        store.fail_next_save = True
        with pytest.raises(StoreError):
            await keeper.ensure("b")
        again = await keeper.ensure("b")
        assert again.restarted, "b was never told the browser restarted"
        assert [str(x) for x in again.lost] == ["tab:b"]


async def test_configured_grants_are_not_duplicated_by_each_restart_of_our_process(
    tmp_path: Path,
) -> None:
    """Restoring saved grants next to the configured ones must not multiply them per process."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        for _ in range(3):
            keeper = SessionKeeper(
                backend,
                clock=clock,
                store=store,
                fingerprint_key=KEY,
                grants=[Grant("billing", SITE)],
            )
            async with keeper:
                await keeper.ensure("billing")
        assert len(keeper.grants()) == 1, keeper.grants()


async def test_a_configured_one_use_grant_spent_before_a_process_restart_stays_spent(
    tmp_path: Path,
) -> None:
    """A uses=1 grant acted on in process 1 must not grant again in process 2."""
    clock, backend = FakeClock(), FakeBackend()

    def make(store: SqliteStore) -> SessionKeeper[FakePage]:
        return SessionKeeper(
            backend,
            clock=clock,
            store=store,
            fingerprint_key=KEY,
            grants=[Grant("billing", SITE, actions={"write"}, uses=1)],
        )

    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with make(store) as first:
            await first.ensure("billing")
            await backend.sign_in(SITE, persistent=True)
            await first.record_login("billing", SITE)
            assert first.decide("billing", SITE, "write").outcome == "act"
        async with make(store) as second:
            await second.ensure("billing")
            second.confirm_login("billing", SITE)
            assert second.decide("billing", SITE, "write").outcome != "act"


async def test_a_saved_grant_the_new_config_refuses_changes_nothing(tmp_path: Path) -> None:
    """Loading a document that fails half way (unknown action) must leave the keeper unchanged."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        wide = SessionKeeper(
            backend,
            clock=clock,
            store=store,
            fingerprint_key=KEY,
            actions={"read", "write", "admin"},
            grants=[
                Grant("billing", SITE, actions={"read"}),
                Grant("ops", SITE, actions={"admin"}),
            ],
        )
        async with wide:
            await wide.ensure("billing")
        narrow = SessionKeeper(backend, clock=clock, store=store, fingerprint_key=KEY)
        for _ in range(2):
            with pytest.raises(ValueError, match="unknown action"):
                await narrow.ensure("billing")
        # Nothing may have been applied: no generation, no half-restored grants.
        assert (narrow.generation, narrow.grants()) == (0, ())
        await narrow.aclose()


async def test_a_token_in_a_tab_url_does_not_reach_the_store(tmp_path: Path) -> None:
    """A magic-link / OAuth callback URL's token must not be persisted as the tab's verified URL."""
    canary = "CANARYtoken7f3a9"
    clock, backend = FakeClock(), FakeBackend()
    async with (
        SqliteStore(tmp_path / "k.db", clock=clock) as store,
        SessionKeeper(backend, clock=clock, store=store, fingerprint_key=KEY) as k,
    ):
        await k.ensure("billing")
        await k.tab("billing", f"https://{SITE}/auth/callback?code={canary}")
    for path in await asyncio.to_thread(lambda: list(tmp_path.iterdir())):
        assert canary.encode() not in await asyncio.to_thread(path.read_bytes), path


async def test_a_tampered_pending_generation_is_refused_as_corrupt(tmp_path: Path) -> None:
    """A non-int since_generation in the saved document must raise StoreCorrupt, not load."""
    clock, backend = FakeClock(), FakeBackend()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        async with SessionKeeper(backend, clock=clock, store=store, fingerprint_key=KEY) as k:
            await k.ensure("b")
            await k.tab("b", "https://docs.example/")
            await backend.crash()
            await k.ensure("a")  # b is owed a restart
        doc = await store.load_keeper_state("default")
        assert doc is not None
        pending = doc["pending"]
        assert isinstance(pending, dict)
        pending["b"]["since_generation"] = "two"
        await store.save_keeper_state("default", doc)
        fresh = SessionKeeper(backend, clock=clock, store=store, fingerprint_key=KEY)
        try:
            with pytest.raises(StoreCorrupt):
                await fresh.ensure("b")
        finally:
            await fresh.aclose()


# -- job loop ----------------------------------------------------------------------------


async def test_failed_resubmit_of_an_unknown_write_goes_to_a_person_not_to_failed(
    world: World,
) -> None:
    """An unknown write re-submitted after a definite 'absent' and failing again must pause."""
    await world.sign_in()
    await world.loop().submit(contract(required_fields=()))
    submits: list[int] = []

    async def step(ctx: StepContext[FakePage]) -> Accepted:
        async def submit(page: FakePage) -> Mapping[str, object]:
            submits.append(1)
            raise TransientFailure("connection reset")

        async def readback(page: FakePage) -> Readback:
            return Readback(status="absent")

        await ctx.write("refund-1", {"invoice": "1"}, submit, readback, idempotent=True)
        return ctx.accept([], None, page_identity="catalogue page 1")

    loop = world.loop()
    first = await loop.run("audit", step, target=target, expect_identity=identity)
    assert first.state == "awaiting_human"
    await loop.resume("audit", decided_by="ann")
    second = await loop.run("audit", step, target=target, expect_identity=identity)
    assert second.state == "awaiting_human", (second.state, second.reason)


async def test_a_run_that_gives_up_after_repeated_lease_loss_releases_its_lease(
    world: World,
) -> None:
    """After MAX_RECLAIMS the run says it gave the job up, so it must not keep holding it."""
    await world.sign_in()
    await world.loop().submit(contract())
    cat = FakeCatalogue()

    async def stalling(ctx: StepContext[FakePage]) -> Accepted:
        world.clock.advance(timedelta(seconds=31))  # longer than the 30 s lease
        return await cat.step(ctx)

    out = await world.loop().run("audit", stalling, target=target, expect_identity=identity)
    assert out.lease_lost and out.state != "done"
    try:
        other = await world.store.claim("audit", "w2", timedelta(seconds=30))
    except LeaseHeldError as exc:  # pragma: no cover - the failure this test shows
        pytest.fail(f"the run gave the job up but still holds its lease: {exc}")
    await world.store.release(other)


async def test_a_token_in_a_step_error_message_does_not_reach_the_event_log(
    world: World,
) -> None:
    """Browser errors quote URLs (OAuth codes, magic links); the loop must not store them raw."""
    canary = "CANARYcode91b2"
    await world.sign_in()
    await world.loop().submit(contract(max_attempts=5))
    cat = FakeCatalogue(
        raise_next=[
            BrowserGoneError(f'page.goto: net::ERR_ABORTED at "https://{SITE}/cb?code={canary}"')
        ]
    )
    out = await world.loop().run("audit", cat.step, target=target, expect_identity=identity)
    assert out.state == "done"
    for event in await world.store.events(job_id="audit"):
        assert canary not in repr(event.data), event


async def test_a_step_that_keeps_killing_the_controller_exhausts_the_attempt_budget(
    world: World,
) -> None:
    """Attempts are spent per dispatch: a crash-looping step must not escape max_attempts."""
    await world.sign_in()
    await world.loop().submit(contract(max_attempts=2))
    dispatched: list[int] = []

    async def deadly(ctx: StepContext[FakePage]) -> Accepted:
        dispatched.append(ctx.attempt)
        raise KeyboardInterrupt  # the page takes the controller down (OOM, segfault...)

    for _ in range(4):
        with contextlib.suppress(KeyboardInterrupt):
            await world.loop().run("audit", deadly, target=target, expect_identity=identity)
        world.clock.advance(timedelta(seconds=31))  # the dead controller's lease expires
    assert len(dispatched) <= 2, f"dispatched {len(dispatched)} times with max_attempts=2"


async def test_the_no_progress_limit_is_not_reset_by_a_controller_restart(world: World) -> None:
    """No accepted checkpoint for longer than the limit, across runs: the next run must stop."""
    await world.sign_in()
    await world.loop().submit(contract(no_progress_limit_s=60))
    dispatched: list[int] = []

    async def stuck(ctx: StepContext[FakePage]) -> Accepted:
        dispatched.append(1)
        world.clock.advance(timedelta(seconds=40))  # works a while, accepts nothing...
        raise KeyboardInterrupt  # ...and the controller dies

    for _ in range(4):
        with contextlib.suppress(KeyboardInterrupt):
            await world.loop().run("audit", stuck, target=target, expect_identity=identity)
    assert len(dispatched) <= 2, f"{len(dispatched) * 40}s without progress, limit 60s"
    assert (await world.store.load_checkpoint("audit")).state == "stopped"
