"""Durable page commits per second: SqliteStore, PostgresStore and LangGraph's SqliteSaver.

What is measured, for each system, is one acknowledged durable write of one page:

- ``SqliteStore.commit_page``: a fenced commit (lease + revision check, 10 result
  rows upserted by ``(job_id, source_record_id)``, checkpoint advanced, event
  appended) in one transaction; WAL with ``synchronous=FULL`` (the WAL is fsynced
  before the call returns).
- ``PostgresStore.commit_page``: the same on a :class:`TemporaryPostgres`
  (``fsync=on``, ``synchronous_commit=on``).
- LangGraph ``SqliteSaver.put`` of a checkpoint whose state holds the same 10
  records plus a cursor, on a connection set to WAL + ``synchronous=FULL`` so both
  SQLite contenders pay an fsync per acknowledged write.

Two workloads, each for every system: one writer (one job, commits back to back)
and ``--writers`` concurrent writers (that many jobs; coroutines for the stores,
threads sharing one saver for LangGraph, as LangGraph intends). The RESULT line
reports the concurrent workload; the one-writer medians are printed just above.

The machine is noisy, so the systems are measured in interleaved rounds (A, B, C,
then C, B, A, ...) and each system's median round is reported. The last line is::

    RESULT sqlite_commits_per_s=... postgres_commits_per_s=...
           langgraph_puts_per_s=... ratio_vs_langgraph=...

(on one line) with ``ratio = sqlite / langgraph``. Run it with
``python benchmarks/store_commit.py``; it needs the ``bench`` extra
(``pip install -e '.[bench]'``) and PostgreSQL binaries (or ``--no-postgres``).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper.jobs import JobContract, Lease, ResultRecord
from session_keeper.stores import PostgresStore, SqliteStore, Store
from session_keeper.testing import TemporaryPostgres

RECORDS_PER_PAGE = 10


def page_records(page: int) -> list[ResultRecord]:
    """Ten catalogue-like records for one page."""
    return [
        ResultRecord(
            source_record_id=f"sku-{page:07d}-{i}",
            data={"sku": f"sku-{page:07d}-{i}", "title": f"Item {i} of page {page}", "price": i},
        )
        for i in range(RECORDS_PER_PAGE)
    ]


class StoreBench:
    """Commits pages to one running job of a store."""

    def __init__(self, store: Store, job_id: str) -> None:
        self.store = store
        self.job_id = job_id
        self.lease: Lease | None = None
        self.revision = 0
        self.page = 0

    async def setup(self) -> None:
        """Submit, claim and start the benchmark job."""
        await self.store.submit_job(JobContract(job_id=self.job_id, start_cursor="page-0"))
        self.lease = await self.store.claim(self.job_id, "bench-worker", timedelta(hours=6))
        checkpoint = await self.store.transition(self.lease, 0, "running")
        self.revision = checkpoint.checkpoint_revision

    async def commit(self) -> None:
        """One fenced, durable page commit."""
        assert self.lease is not None
        self.page += 1
        result = await self.store.commit_page(
            self.lease,
            self.revision,
            page_records(self.page),
            f"page-{self.page + 1}",
            f"page-{self.page}",
        )
        assert result.new_records == RECORDS_PER_PAGE
        self.revision = result.checkpoint.checkpoint_revision


class LangGraphBench:
    """``SqliteSaver.put`` of a checkpoint holding the same page, WAL + synchronous=FULL."""

    def __init__(self, path: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        # One saver shared by every writer thread, as LangGraph intends (it locks).
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()  # sets WAL itself
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        mode = self.conn.execute("PRAGMA synchronous").fetchone()
        assert mode == (2,), mode
        self.configs: dict[int, Any] = {}
        self.pages: dict[int, int] = {}

    def put(self, writer: int) -> None:
        """One durable put of writer ``writer``'s next page."""
        from langgraph.checkpoint.base import empty_checkpoint

        page = self.pages.get(writer, 0) + 1
        self.pages[writer] = page
        config = self.configs.get(
            writer, {"configurable": {"thread_id": f"bench-{writer}", "checkpoint_ns": ""}}
        )
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {
            "records": [{"id": r.source_record_id, **r.data} for r in page_records(page)],
            "next_cursor": f"page-{page + 1}",
            "last_committed_step": f"page-{page}",
        }
        checkpoint["channel_versions"] = {"records": page, "next_cursor": page}
        self.configs[writer] = self.saver.put(
            config,
            checkpoint,
            {"source": "loop", "step": page, "parents": {}},
            {"records": page, "next_cursor": page},
        )

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class AsyncLangGraphBench:
    """``AsyncSqliteSaver.aput`` (aiosqlite) of the same checkpoint, WAL + synchronous=FULL:
    LangGraph's checkpointer for an asyncio application, as this store is one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.saver: Any = None
        self.conn: Any = None
        self.configs: dict[int, Any] = {}
        self.pages: dict[int, int] = {}

    async def open(self) -> None:
        """Connect, create the tables, set and check the durability."""
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        self.conn = await aiosqlite.connect(self.path)
        self.saver = AsyncSqliteSaver(self.conn)
        await self.saver.setup()
        await self.conn.execute("PRAGMA journal_mode=WAL")
        await self.conn.execute("PRAGMA synchronous=FULL")
        async with self.conn.execute("PRAGMA synchronous") as cursor:
            mode = await cursor.fetchone()
        assert tuple(mode) == (2,), mode

    async def put(self, writer: int) -> None:
        """One durable aput of writer ``writer``'s next page."""
        from langgraph.checkpoint.base import empty_checkpoint

        page = self.pages.get(writer, 0) + 1
        self.pages[writer] = page
        config = self.configs.get(
            writer, {"configurable": {"thread_id": f"bench-{writer}", "checkpoint_ns": ""}}
        )
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {
            "records": [{"id": r.source_record_id, **r.data} for r in page_records(page)],
            "next_cursor": f"page-{page + 1}",
            "last_committed_step": f"page-{page}",
        }
        checkpoint["channel_versions"] = {"records": page, "next_cursor": page}
        self.configs[writer] = await self.saver.aput(
            config,
            checkpoint,
            {"source": "loop", "step": page, "parents": {}},
            {"records": page, "next_cursor": page},
        )

    async def close(self) -> None:
        """Close the connection."""
        if self.conn is not None:
            await self.conn.close()


async def measure_async_langgraph(
    bench: AsyncLangGraphBench, writers: int, seconds: float
) -> float:
    """Aputs per second with ``writers`` coroutines putting until time is up."""
    count = 0
    start = time.perf_counter()
    deadline = start + seconds

    async def writer(index: int) -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await bench.put(index)
            count += 1

    await asyncio.gather(*(writer(i) for i in range(writers)))
    return count / (time.perf_counter() - start)


async def measure_stores(benches: list[StoreBench], seconds: float) -> float:
    """Commits per second with one coroutine per bench, all committing until time is up."""
    count = 0
    start = time.perf_counter()
    deadline = start + seconds

    async def writer(bench: StoreBench) -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            await bench.commit()
            count += 1

    await asyncio.gather(*(writer(b) for b in benches))
    return count / (time.perf_counter() - start)


def measure_langgraph(bench: LangGraphBench, writers: int, seconds: float) -> float:
    """Puts per second with ``writers`` threads putting until time is up."""
    counts = [0] * writers
    start = time.perf_counter()
    deadline = start + seconds

    def writer(index: int) -> None:
        while time.perf_counter() < deadline:
            bench.put(index)
            counts[index] += 1

    if writers == 1:
        writer(0)
    else:
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return sum(counts) / (time.perf_counter() - start)


async def run(
    rounds: int, seconds: float, writers: int, with_postgres: bool
) -> dict[tuple[str, int], float]:
    """Interleaved rounds; returns each (system, writers) median commits per second."""
    rates: dict[tuple[str, int], list[float]] = {}
    modes = sorted({1, writers})
    with tempfile.TemporaryDirectory(prefix="sk-bench-") as tmp:
        pg = TemporaryPostgres() if with_postgres else None
        if pg is not None:
            pg.start()
        try:
            sqlite_store = SqliteStore(Path(tmp) / "store.db")
            pg_store = PostgresStore(pg.dsn, max_size=writers) if pg is not None else None
            langgraph = LangGraphBench(Path(tmp) / "langgraph.db")
            langgraph_async = AsyncLangGraphBench(Path(tmp) / "langgraph-aio.db")
            await langgraph_async.open()
            async with sqlite_store:
                durability = await sqlite_store._in_thread(
                    lambda: (
                        sqlite_store._conn.execute("PRAGMA journal_mode").fetchone(),  # type: ignore[union-attr]
                        sqlite_store._conn.execute("PRAGMA synchronous").fetchone(),  # type: ignore[union-attr]
                    )
                )
                # The same durability as the LangGraph saver's connection: WAL, FULL (2).
                assert durability == (("wal",), (2,)), durability
                sqlite_benches = [StoreBench(sqlite_store, f"bench-{i}") for i in range(writers)]
                for bench in sqlite_benches:
                    await bench.setup()
                pg_benches: list[StoreBench] = []
                if pg_store is not None:
                    await pg_store.open()
                    pg_benches = [StoreBench(pg_store, f"bench-{i}") for i in range(writers)]
                    for bench in pg_benches:
                        await bench.setup()
                try:
                    # Warm-up: page cache, prepared statements, pool connections.
                    await measure_stores(sqlite_benches, 0.3)
                    measure_langgraph(langgraph, writers, 0.3)
                    await measure_async_langgraph(langgraph_async, writers, 0.3)
                    if pg_benches:
                        await measure_stores(pg_benches, 0.3)
                    names = ["sqlite", "langgraph", "langgraph_aput"]
                    names += ["postgres"] if pg_benches else []

                    async def one(name: str, m: int) -> float:
                        if name == "sqlite":
                            return await measure_stores(sqlite_benches[:m], seconds)
                        if name == "postgres":
                            return await measure_stores(pg_benches[:m], seconds)
                        if name == "langgraph_aput":
                            return await measure_async_langgraph(langgraph_async, m, seconds)
                        # LangGraph's writers are threads; keep the event loop free meanwhile.
                        return await asyncio.to_thread(measure_langgraph, langgraph, m, seconds)

                    for n in range(rounds):
                        for mode in modes:
                            # Alternate the order too, so no system always runs first.
                            order = names[::-1] if n % 2 else names
                            line = []
                            for name in order:
                                rate = await one(name, mode)
                                rates.setdefault((name, mode), []).append(rate)
                                line.append(f"{name}={rate:8.1f}/s")
                            print(f"round {n + 1} writers={mode}: " + "  ".join(line), flush=True)
                finally:
                    langgraph.close()
                    await langgraph_async.close()
                    if pg_store is not None:
                        await pg_store.close()
        finally:
            if pg is not None:
                pg.stop()
    for mode in modes:
        # Each round's SQLite and LangGraph runs are adjacent in time, so their ratio
        # is less exposed to the machine's drifting load than a ratio of medians.
        paired = [
            a / b for a, b in zip(rates[("sqlite", mode)], rates[("langgraph", mode)], strict=True)
        ]
        print(
            f"paired sqlite/langgraph ratio writers={mode}: median={statistics.median(paired):.2f} "
            f"rounds={' '.join(f'{r:.2f}' for r in paired)}"
        )
        med = {name: statistics.median(v) for (name, m), v in rates.items() if m == mode}
        postgres = f", PostgresStore {med['postgres']:.0f}/s" if "postgres" in med else ""
        emit(
            "6",
            compared=f"SqliteStore fenced commit vs SqliteSaver.put, {mode} writer(s)",
            ratios=paired,
            # At 1 writer the blocking put is reported, not a goal (issue 49): it holds its
            # caller's thread, an event loop, for the statement and the fsync.
            goal=None if mode == 1 else 1.0,
            direction=">=",
            detail=(
                f"SqliteStore {med['sqlite']:.0f}/s, SqliteSaver.put {med['langgraph']:.0f}/s"
                f"{postgres} (medians); both SQLite files WAL + synchronous=FULL, checked"
                " with PRAGMA in this run: one fsync per acknowledged write"
                + (
                    "; no goal at 1 writer: put runs its statement and fsync in the"
                    " caller's thread, blocking an event loop for the whole write, which"
                    " a store's commit never does (it hands over to a database thread)"
                    if mode == 1
                    else ""
                )
            ),
        )
        aput = [
            a / b
            for a, b in zip(rates[("sqlite", mode)], rates[("langgraph_aput", mode)], strict=True)
        ]
        emit(
            "6",
            compared=f"SqliteStore fenced commit vs AsyncSqliteSaver.aput, {mode} writer(s)",
            ratios=aput,
            # The peer with the same contract (an asyncio caller never blocked on disk).
            goal=1.0 if mode == 1 else None,
            direction=">=",
            detail=(
                f"SqliteStore {med['sqlite']:.0f}/s, AsyncSqliteSaver.aput "
                f"{med['langgraph_aput']:.0f}/s (medians; aiosqlite, WAL + synchronous=FULL):"
                " LangGraph's checkpointer for an asyncio caller"
            ),
        )
    return {k: statistics.median(v) for k, v in rates.items()}


def main() -> None:
    """Parse options, run, print the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.5, help="per system per round")
    parser.add_argument(
        "--writers", type=int, default=8, help="concurrent jobs (each one writer) for RESULT"
    )
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    medians = asyncio.run(run(args.rounds, args.seconds, args.writers, not args.no_postgres))
    nan = float("nan")
    for mode in sorted({1, args.writers}):
        sqlite_rate = medians[("sqlite", mode)]
        langgraph_rate = medians[("langgraph", mode)]
        postgres_rate = medians.get(("postgres", mode), nan)
        print(
            f"median writers={mode}: sqlite={sqlite_rate:.1f}/s postgres={postgres_rate:.1f}/s "
            f"langgraph={langgraph_rate:.1f}/s ratio={sqlite_rate / langgraph_rate:.2f}"
        )
    sqlite_rate = medians[("sqlite", args.writers)]
    langgraph_rate = medians[("langgraph", args.writers)]
    postgres_rate = medians.get(("postgres", args.writers), nan)
    print(
        f"RESULT sqlite_commits_per_s={sqlite_rate:.1f} "
        f"postgres_commits_per_s={postgres_rate:.1f} "
        f"langgraph_puts_per_s={langgraph_rate:.1f} "
        f"ratio_vs_langgraph={sqlite_rate / langgraph_rate:.2f}"
    )


if __name__ == "__main__":
    main()
