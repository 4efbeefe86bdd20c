"""Issue 22: one durable write costs the same at 100 and at 10,000 (or 100,000) conversations.

For each store (SQLite, and PostgreSQL on a :class:`TemporaryPostgres` when one starts)
and each size N, one keeper on a FakeBackend (the library's own cost, no browser) holds
N conversations holding what real ones hold: each a tab, a named turn and a grant (on one
of the keeper's ten recorded logins), and one in every hundred a pending borrow request
(the setup is printed). All sizes stay open side by side; each round times, on every size
in turn, one of each durable write:

- ``ensure(conversation, turn=<new id>)`` (saved before it returns),
- a counted ``decide()`` then ``persist()``,
- ``grant()`` then ``persist()``,
- ``mark_verified()`` (a new verified time) then ``persist()``.

Each round also times LangGraph's checkpointer saving the same change (a checkpoint
whose state is the one conversation's changed record, its next version) on the same
kind of store with the same durability: ``SqliteSaver.put`` and
``AsyncSqliteSaver.aput`` (WAL, ``synchronous=FULL``), or ``PostgresSaver.put`` and
``AsyncPostgresSaver.aput`` (their own temporary server, ``synchronous_commit=on``),
when installed. ``put`` blocks the caller's thread (and so an event loop); ``aput`` is
what an asyncio application uses, as this keeper is one.

Prints, per store and write, a ``BENCH`` row of the per-round cost ratio largest / 100
(goal <= 1.5x), ``BENCH`` rows of the write at the largest size / LangGraph's put and
aput (goal <= 1.0x), and a ``RESULT`` line with the medians and the growth exponent
(log cost ratio / log size ratio: 0 is flat, 1 is linear). The last line is a ``CURVE``
of every write's median cost per size and store, which ``make bench`` plots.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from benchmarks._stores import stores_per_size
from session_keeper import Durability, Grant, SessionKeeper
from session_keeper.stores import Store
from session_keeper.testing import FakeBackend, FakeClock, FakePage, TemporaryPostgres

SITE = "billing.example"
#: The keeper's ten recorded logins (one signed-in site each).
LOGIN_SITES = (SITE, *(f"s{i}.example" for i in range(1, 10)))
#: One conversation in this many has a borrow request pending.
BORROW_EVERY = 100
SETUP = (
    "each conversation holds a tab (its URL verified), a named turn and a grant on one of "
    f"the keeper's {len(LOGIN_SITES)} recorded logins; one in {BORROW_EVERY} has a borrow "
    "request pending"
)
WRITES = ("ensure_turn", "decide", "grant", "mark_verified")
#: How many conversations are registered per batch while building a keeper.
CHUNK = 2000


class Sized:
    """One keeper holding ``n`` conversations, and the next fresh ids for its writes."""

    def __init__(self, n: int, keeper: SessionKeeper[FakePage], clock: FakeClock) -> None:
        self.n = n
        self.keeper = keeper
        self.clock = clock
        self.turn = 0

    async def write(self, what: str) -> float:
        """Seconds one durable write of kind ``what`` takes."""
        keeper = self.keeper
        self.turn += 1
        self.clock.advance(timedelta(seconds=1))
        conversation = f"c{(self.turn * 7919) % self.n}"
        start = time.perf_counter()
        if what == "ensure_turn":
            await keeper.ensure(conversation, turn=f"t{self.turn}")
        elif what == "decide":
            keeper.decide("c0", SITE, "read")
            await keeper.persist()
        elif what == "grant":
            keeper.grant(Grant(conversation, SITE, actions={"read"}))
            await keeper.persist()
        else:
            keeper.mark_verified("c2")
            await keeper.persist()
        return time.perf_counter() - start


#: The LangGraph checkpointers compared: the blocking ``put`` and the asyncio ``aput``
#: (what an asyncio application such as this keeper's would use).
SAVER_MODES = ("put", "aput")


@asynccontextmanager
async def langgraph_saver(
    kind: str, tmp: Path, mode: str
) -> AsyncIterator[Callable[[int], Awaitable[float]] | None]:
    """Seconds one ``put`` (or ``aput``) of LangGraph's checkpointer for ``kind`` takes,
    at the store's durability (``None``: that checkpointer is not installed)."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver: Any
    async with AsyncExitStack() as stack:
        if kind == "sqlite":
            if mode == "put":
                import sqlite3

                from langgraph.checkpoint.sqlite import SqliteSaver

                conn = sqlite3.connect(tmp / "langgraph-put.db", check_same_thread=False)
                stack.callback(conn.close)
                saver = SqliteSaver(conn)
                saver.setup()
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")  # the SqliteStore's durability
            else:
                import aiosqlite
                from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

                aconn = await stack.enter_async_context(
                    aiosqlite.connect(tmp / "langgraph-aput.db")
                )
                saver = AsyncSqliteSaver(aconn)
                await saver.setup()
                await aconn.execute("PRAGMA journal_mode=WAL")
                await aconn.execute("PRAGMA synchronous=FULL")
        else:
            try:
                from langgraph.checkpoint.postgres import PostgresSaver
                from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
                from psycopg import AsyncConnection, Connection
            except ImportError:
                yield None
                return
            pg = TemporaryPostgres()
            pg.start()
            stack.callback(pg.stop)
            dsn = pg.create_database("langgraph")
            if mode == "put":
                pconn = Connection.connect(dsn, autocommit=True)
                stack.callback(pconn.close)
                pconn.execute("SET synchronous_commit TO on")  # the PostgresStore's
                saver = PostgresSaver(pconn)  # type: ignore[arg-type]
                saver.setup()
            else:
                apconn = await AsyncConnection.connect(dsn, autocommit=True)
                stack.push_async_callback(apconn.close)
                await apconn.execute("SET synchronous_commit TO on")
                saver = AsyncPostgresSaver(apconn)  # type: ignore[arg-type]
                await saver.setup()

        config: Any = {"configurable": {"thread_id": "c2", "checkpoint_ns": ""}}

        async def put(step: int) -> float:
            # The same change as one keeper write: one conversation's record, next version.
            nonlocal config
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {
                "conversation": {
                    "id": "c2",
                    "turn": f"t{step}",
                    "tab_url": "https://docs.example/c2",
                    "verified_at": f"2026-01-01T00:00:{step % 60:02d}+00:00",
                    "generation": 1,
                }
            }
            checkpoint["channel_versions"] = {"conversation": step}
            metadata: Any = {"source": "loop", "step": step, "parents": {}}
            start = time.perf_counter()
            if mode == "put":
                config = saver.put(config, checkpoint, metadata, {"conversation": step})
            else:
                config = await saver.aput(config, checkpoint, metadata, {"conversation": step})
            return time.perf_counter() - start

        yield put


async def _build(store: Store, n: int, stack: AsyncExitStack) -> Sized:
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    keeper: SessionKeeper[FakePage] = SessionKeeper(
        backend,
        clock=clock,
        durability=Durability(store=store),
        grants=[
            Grant("c0", SITE, uses=10**9),
            # Each conversation granted one of the signed-in sites, as real ones are.
            *(Grant(f"c{i}", LOGIN_SITES[i % len(LOGIN_SITES)]) for i in range(n)),
        ],
    )
    await stack.enter_async_context(keeper)
    for lo in range(0, n, CHUNK):
        names = [f"c{i}" for i in range(lo, min(n, lo + CHUNK))]
        # Concurrent callers share the keeper's writes: a batch is a few saves, not CHUNK.
        await asyncio.gather(*(keeper.ensure(c, turn="t0") for c in names))
        await asyncio.gather(
            *(keeper.unguarded_page(c, f"https://docs.example/{c}") for c in names)
        )
        await keeper.persist()
    for site in LOGIN_SITES:
        await keeper.unguarded_page("c1", f"https://{site}/login")
        await backend.sign_in(site)
        await keeper.record_login("c1", site)
    await keeper.unguarded_page("c1", "https://docs.example/c1")
    for i in range(3, n, BORROW_EVERY):
        keeper.request_borrow(
            f"c{i}",
            "s5.example",
            "write",
            reason="to file the report",
            expires_in=timedelta(days=30),
        )
    await keeper.persist()
    assert len(keeper.logins()) == len(LOGIN_SITES)
    assert len(keeper.grants()) == n + 1
    return Sized(n, keeper, clock)


async def run(
    kind: str, sizes: list[int], rounds: int
) -> tuple[dict[str, dict[int, list[float]]], dict[str, list[float]]]:
    """Per write, per size: the seconds of each round; and LangGraph's put / aput per
    round (a mode is left out when its checkpointer for ``kind`` is not installed)."""
    times: dict[str, dict[int, list[float]]] = {w: {n: [] for n in sizes} for w in WRITES}
    peers: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rows-") as tmp:
        async with (
            stores_per_size(kind, sizes, Path(tmp), "bench_rows") as stores,
            AsyncExitStack() as keepers,
        ):
            savers = {}
            for mode in SAVER_MODES:
                saver = await keepers.enter_async_context(langgraph_saver(kind, Path(tmp), mode))
                if saver is not None:
                    savers[mode] = saver
                    peers[mode] = []
            sized = []
            for n, store in zip(sizes, stores, strict=True):
                built = time.perf_counter()
                sized.append(await _build(store, n, keepers))
                print(f"{kind}: built {n} conversations in {time.perf_counter() - built:.1f}s")
            for step in range(3):  # warm-up, not counted
                for s in sized:
                    for what in WRITES:
                        await s.write(what)
                for saver in savers.values():
                    await saver(step)
            for r in range(rounds):
                order = sized if r % 2 == 0 else list(reversed(sized))
                for s in order:
                    for what in WRITES:
                        times[what][s.n].append(await s.write(what))
                for mode, saver in savers.items():
                    peers[mode].append(await saver(1000 + r))
    return times, peers


def report(
    kind: str,
    sizes: list[int],
    times: dict[str, dict[int, list[float]]],
    peers: dict[str, list[float]],
) -> None:
    """BENCH rows (largest / smallest, per round; largest / LangGraph's put and aput)
    and RESULT lines (medians, exponents)."""
    small, big = sizes[0], sizes[-1]
    base = "SqliteSaver" if kind == "sqlite" else "PostgresSaver"
    for what in WRITES:
        for mode, peer in peers.items():
            saver = f"{base}.put" if mode == "put" else f"Async{base}.aput"
            emit(
                "16",
                compared=f"{what} on {kind} at {big:,} conversations vs LangGraph "
                f"{saver} of the same change",
                ratios=[a / b for a, b in zip(times[what][big], peer, strict=True)],
                goal=1.0,
                direction="<=",
                detail=f"ours {statistics.median(times[what][big]) * 1e3:.2f} ms, "
                f"{saver} {statistics.median(peer) * 1e3:.2f} ms (medians)",
            )
        per_round = [b / a for a, b in zip(times[what][small], times[what][big], strict=True)]
        medians = {n: statistics.median(times[what][n]) for n in sizes}
        exponents = [
            math.log(medians[hi] / medians[lo]) / math.log(hi / lo)
            for lo, hi in itertools.pairwise(sizes)
        ]
        emit(
            "16",
            compared=f"{what} on {kind}: cost at {big:,} conversations / at {small:,}",
            ratios=per_round,
            goal=1.5,
            direction="<=",
            detail=", ".join(f"{n:,}: {medians[n] * 1e3:.2f} ms" for n in sizes),
        )
        spans = ", ".join(
            f"{lo:,}->{hi:,}: {e:+.3f}"
            for (lo, hi), e in zip(itertools.pairwise(sizes), exponents, strict=True)
        )
        print(
            f"RESULT {kind} {what}: median "
            + ", ".join(f"{n:,}={medians[n] * 1e3:.2f}ms" for n in sizes)
            + f"; ratio {big:,}/{small:,} = {medians[big] / medians[small]:.2f}x; "
            f"growth exponent {spans}",
            flush=True,
        )


def main() -> None:
    """Run each store and print its rows."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,10000")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    print(f"SETUP {SETUP}", flush=True)
    series: dict[str, list[list[float]]] = {}
    for kind in args.stores.split(","):
        times, peers = asyncio.run(run(kind, sizes, args.rounds))
        if not peers:
            print(f"RESULT {kind}: LangGraph's checkpointer for it is not installed")
        report(kind, sizes, times, peers)
        for what in WRITES:
            series[f"{kind}: {what}"] = [
                [n, statistics.median(times[what][n]) * 1e3] for n in sizes
            ]
    # The plot of cost vs conversations (make bench draws it from this line).
    print("CURVE " + json.dumps({"name": "write_cost", "series": series}))


if __name__ == "__main__":
    main()
