"""Rows 13-15 (issue 22): lookups that do not scan, an audit chain checked once per open.

- Row 13: ``decide()`` with 50,000 grants in the keeper vs with 10 (the asking
  conversation holds one grant on the site either way). Rounds alternate the two
  keepers; each round times ``--calls`` decides on each. Goal ≤ 2×.
- Row 14: opening a keeper (``async with SessionKeeper(...)``: its saved state and its
  audit chain) on a store holding 100,000 audit entries, with a fresh keyring each
  time (no derived key cached). Goal ≤ 0.2 s.
- Row 15: a burst of ``--burst`` counted decisions drained to the store by one
  ``persist()``: audit entries written per second (no goal; issue 22 measured 693/s
  with one transaction per entry).

FakeBackend throughout, so each figure is the library's own cost. ``--postgres`` runs
rows 14 and 15 on a throwaway PostgreSQL as well.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit, emit_unmeasured
from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import FakeBackend, FakeClock, FakePage, TemporaryPostgres

SITE = "billing.example"
RAW_KEY = bytes(range(32))
StoreFactory = Callable[[], AbstractAsyncContextManager[Store]]


def keyring() -> Keyring:
    """A fresh keyring over the same key: nothing derived is cached yet."""
    return Keyring([("k1", RAW_KEY)])


def grants(n: int) -> list[Grant]:
    """``n`` grants: the asker's one on SITE, the rest other conversations' on 5 sites."""
    others = [Grant(f"c{i}", SITE if i % 5 == 0 else f"s{i % 5}.example") for i in range(n - 1)]
    return [Grant("asker", SITE, actions={"read"}), *others]


async def signed_in(keeper: SessionKeeper[FakePage], backend: FakeBackend) -> None:
    """The owner signs in to SITE: decide() then answers from the grants."""
    await keeper.ensure("owner")
    await keeper.ensure("asker")
    await backend.sign_in(SITE, persistent=True)
    await keeper.record_login("owner", SITE)


def time_block(keeper: SessionKeeper[FakePage]) -> float:
    """µs of one counted decide(), averaged over a block of 100 (to see past the timer)."""
    start = time.perf_counter()
    for _ in range(100):
        keeper.decide("asker", SITE, "read")
    return (time.perf_counter() - start) * 1e6 / 100


async def row_13(tmp: Path, rounds: int, calls: int, big: int) -> None:
    """decide() at ``big`` grants vs at 10, rounds interleaved."""
    keepers: dict[int, SessionKeeper[FakePage]] = {}
    stores: list[SqliteStore] = []
    for n in (10, big):
        store = SqliteStore(tmp / f"decide-{n}.db")
        await store.open()
        stores.append(store)
        backend = FakeBackend()
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            backend,
            durability=Durability(store=store, audit=AuditLog(store, keyring())),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
            grants=grants(n),
        )
        await keeper.__aenter__()
        await signed_in(keeper, backend)
        keepers[n] = keeper
    try:
        small_us: list[float] = []
        big_us: list[float] = []
        for r in range(rounds):
            # Blocks alternate between the two keepers: the machine's drift hits both.
            blocks: dict[int, list[float]] = {10: [], big: []}
            for b in range(calls // 100):
                for n in (10, big) if b % 2 == 0 else (big, 10):
                    blocks[n].append(time_block(keepers[n]))
            small_us.append(statistics.median(blocks[10]))
            big_us.append(statistics.median(blocks[big]))
            for keeper in keepers.values():
                # The queued audit entries go out between rounds, not inside the timing.
                await keeper.persist()
            print(
                f"round {r + 1}: decide() {big_us[-1]:.1f} us at {big} grants, "
                f"{small_us[-1]:.1f} us at 10",
                flush=True,
            )
        ratios = [b / s for b, s in zip(big_us, small_us, strict=True)]
        emit(
            "13",
            compared=f"decide() at {big:,} grants vs at 10 (FakeBackend, SQLite, audit on)",
            ratios=ratios,
            goal=2.0,
            direction="<=",
            detail=f"median {statistics.median(big_us):.1f} µs vs "
            f"{statistics.median(small_us):.1f} µs per decide",
        )
    finally:
        for keeper in keepers.values():
            await keeper.aclose()
        for store in stores:
            await store.close()


async def fill_chain(store: Store, entries: int) -> None:
    """``entries`` audit entries, written as a keeper writes them (batches of 1,000)."""
    audit = AuditLog(store, keyring(), clock=FakeClock())
    for start in range(0, entries, 1000):
        count = min(1000, entries - start)
        await audit.record_many(
            [
                ("decision", {"conversation": f"c{start + i}", "outcome": "act"}, None)
                for i in range(count)
            ]
        )


async def open_keeper(store: Store) -> float:
    """Seconds to open a keeper (saved state + audit chain) on ``store``."""
    keeper: SessionKeeper[FakePage] = SessionKeeper(
        FakeBackend(),
        durability=Durability(store=store, audit=AuditLog(store, keyring())),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
    )
    start = time.perf_counter()
    await keeper.__aenter__()
    elapsed = time.perf_counter() - start
    await keeper.aclose()
    return elapsed


async def row_14(make_store: StoreFactory, name: str, rounds: int, entries: int) -> None:
    """Open a keeper on ``entries`` audit entries."""
    async with make_store() as store:
        start = time.perf_counter()
        await fill_chain(store, entries)
        filled = time.perf_counter() - start
        seconds = [await open_keeper(store) for _ in range(rounds)]
        start = time.perf_counter()
        checked = await verify_audit(store, keyring())
        full = time.perf_counter() - start
    for r, s in enumerate(seconds):
        print(f"round {r + 1}: open with {entries:,} audit entries ({name}) {s * 1e3:.1f} ms")
    emit(
        "14",
        compared=f"open a keeper with {entries:,} audit entries ({name})",
        ratios=seconds,
        goal=0.2,
        direction="<=",
        unit=" s",
        detail=f"full verify_audit of the {checked:,} entries {full:.2f} s; "
        f"writing them in batches of 1,000 {entries / filled:,.0f} entries/s",
    )


async def row_15(make_store: StoreFactory, name: str, rounds: int, burst: int) -> None:
    """Entries/s of a burst of counted decisions drained by one persist()."""
    rates: list[float] = []
    async with make_store() as store:
        backend = FakeBackend()
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            backend,
            durability=Durability(store=store, audit=AuditLog(store, keyring())),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
            grants=[Grant("asker", SITE, actions={"read"})],
        )
        async with keeper:
            await signed_in(keeper, backend)
            await keeper.persist()
            for r in range(rounds):
                for _ in range(burst):
                    keeper.decide("asker", SITE, "read")
                start = time.perf_counter()
                await keeper.persist()
                rate = burst / (time.perf_counter() - start)
                rates.append(rate)
                print(f"round {r + 1}: audit burst drain ({name}) {rate:,.0f} entries/s")
    emit(
        "15",
        compared=f"audit entries drained per second, a burst of {burst:,} decisions ({name})",
        ratios=rates,
        goal=None,
        direction=">=",
        unit=" entries/s",
        detail="one transaction per batch of up to 1,000 entries",
    )


def sqlite_in(tmp: Path, label: str) -> StoreFactory:
    def make() -> AbstractAsyncContextManager[Store]:
        return SqliteStore(tmp / f"{label}.db")

    return make


def postgres_in(pg: TemporaryPostgres) -> StoreFactory:
    @asynccontextmanager
    async def make() -> AsyncIterator[Store]:
        async with PostgresStore(pg.create_database()) as store:
            yield store

    return make


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-lookups-") as tmp_name:
        tmp = Path(tmp_name)
        if not args.postgres_only:
            await row_13(tmp, args.rounds, args.calls, args.grants)
            await row_14(sqlite_in(tmp, "open"), "SQLite", args.rounds, args.entries)
            await row_15(sqlite_in(tmp, "burst"), "SQLite", args.rounds, args.burst)
        if not (args.postgres or args.postgres_only):
            return
        pg = TemporaryPostgres()
        try:
            pg.start()
        except Exception as exc:  # no PostgreSQL on this machine: say so in the table
            emit_unmeasured("14", compared="open with audit entries (PostgreSQL)", reason=str(exc))
            return
        try:
            await row_14(postgres_in(pg), "PostgreSQL", args.rounds, args.entries)
            await row_15(postgres_in(pg), "PostgreSQL", args.rounds, args.burst)
        finally:
            pg.stop()


def main() -> None:
    """Run the rows and print their BENCH lines."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--grants", type=int, default=50_000)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--postgres", action="store_true", help="rows 14-15 on PostgreSQL too")
    parser.add_argument("--postgres-only", action="store_true", help="only rows 14-15 on it")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
