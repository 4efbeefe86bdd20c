"""Soak: 100,000 turns of a chat service that also runs jobs stay bounded with retention on.

One keeper on a FakeBackend and a FakeClock (the library's own state, no browser), on a
SQLite store. Conversations come and go as a chat service's do: each block of 1,000 turns
belongs to 100 new conversations (10 turns each, one in ten opens a tab), so 100,000 turns
meet 10,000 conversations; the clock moves 10 s a turn. Every 1,000 turns a 5-page durable
job runs (its events and results), the sweep runs (it forgets conversations idle for a day)
and retention prunes events and results older than 6 hours; every 5,000 turns the browser
crashes. Every 10,000 turns it samples the store's tables, its file size and the keeper's
memory (RSS), and at the end prints::

    SOAK {"turns": ..., "samples": [...], "bounded": true, ...}

``bounded`` holds when every measure at the end is at most 1.25x (plus a small slack) its
value at turn 30,000, when the service reached its steady state (a day of conversations);
events are judged per stored job (see :func:`bounded`). Exits 1 when it does not.

Usage: ``python scripts/soak_retention.py [--turns 100000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sqlite3
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.job_loop_scale import catalogue, contract, identity, target
from session_keeper import Durability, Grant, IdleTimeouts, SessionKeeper
from session_keeper.jobs import JobLoop
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage, job_loop_testing

SITE = "catalogue.example"
BLOCK = 1000
PER_BLOCK = 100
SAMPLE_EVERY = 10_000
STEADY_AT = 30_000
TABLES = ("events", "event_archive", "results", "jobs", "keeper_rows", "keeper_tabs")


def rss_kb() -> int:
    """This process's resident set size, in KiB (tracemalloc would slow every turn)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def sample(db: Path, turn: int, keeper: SessionKeeper[FakePage]) -> dict[str, Any]:
    """The store's table sizes and file size, and the keeper's memory (RSS), now."""
    gc.collect()
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    files = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    return {
        "turn": turn,
        **counts,
        "store_kb": round(files / 1024, 1),
        "rss_kb": rss_kb(),
        "tabs_known": len(keeper.tabs()),
    }


async def soak(turns: int, db: Path) -> list[dict[str, Any]]:
    """Run the soak; the samples, oldest first."""
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    samples: list[dict[str, Any]] = []
    async with SqliteStore(db, clock=clock) as store:
        keeper: SessionKeeper[FakePage] = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store),
            idle_timeouts=IdleTimeouts(browser=timedelta(hours=1), conversation=timedelta(days=1)),
        )
        async with keeper:

            async def sign_in() -> None:
                # A person signs the reader in (again after a crash took the login).
                await keeper.ensure("reader")
                await keeper.unguarded_page("reader", f"https://{SITE}/login")
                await backend.sign_in(SITE, persistent=True)
                await keeper.record_login("reader", SITE, account="reader")

            await sign_in()
            loop = JobLoop(keeper, store, "w1", lease_ttl=timedelta(seconds=30))

            async def fake_sleep(seconds: float) -> None:
                clock.advance(timedelta(seconds=seconds))

            job_loop_testing(loop, sleep=fake_sleep)
            for t in range(turns):
                block = t // BLOCK
                conversation = f"chat-{block * PER_BLOCK + t % PER_BLOCK}"
                await keeper.ensure(conversation, turn=f"t{t}")
                if t % 10 == 0:
                    await keeper.unguarded_page(conversation, f"https://docs.example/{t}")
                clock.advance(timedelta(seconds=10))
                if t % 5000 == 4999:
                    await backend.crash()
                    await sign_in()
                if t % BLOCK == BLOCK - 1:
                    job = f"job-{block}"
                    keeper.grant(Grant(f"job:{job}", SITE, actions={"read"}))
                    await loop.submit(contract(job))
                    out = await loop.run(job, catalogue(5), target=target, expect_identity=identity)
                    assert out.state == "done", out
                    # The job's grant lasts for its run, so its conversation holds nothing
                    # after it and is forgotten like any other.
                    keeper.revoke(f"job:{job}", SITE)
                    await keeper.sweep()
                    await store.prune_events(older_than=timedelta(hours=6))
                    await store.prune_results(older_than=timedelta(hours=6))
                    await keeper.persist()
                if (t + 1) % SAMPLE_EVERY == 0:
                    samples.append(sample(db, t + 1, keeper))
                    print(json.dumps(samples[-1]), flush=True)
    return samples


def bounded(samples: list[dict[str, Any]]) -> dict[str, bool]:
    """Per measure: whether the last sample is at most 1.25x (+ slack) the steady one.

    Turns write no events; jobs do, and retention keeps, for each job still stored, its
    newest event of each kind (the job loop reads them), and the jobs themselves (so a
    contract never runs twice). So ``events`` is judged per stored job; ``jobs`` and
    ``event_archive`` (one sealed row per pruning pass) grow by design and are reported.
    """
    steady = next((s for s in samples if s["turn"] >= STEADY_AT), None)
    if steady is None or steady is samples[-1]:
        return {}
    last = samples[-1]
    verdicts = {
        k: last[k] <= 1.25 * steady[k] + 50
        for k in ("results", "keeper_rows", "keeper_tabs", "tabs_known", "store_kb", "rss_kb")
    }
    per_job = [x["events"] / max(1, x["jobs"]) for x in (steady, last)]
    verdicts["events per job"] = per_job[1] <= 1.25 * per_job[0]
    return verdicts


def main() -> None:
    """Run the soak and print the SOAK line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soak-retention-") as tmp:
        samples = asyncio.run(soak(args.turns, Path(tmp) / "keeper.db"))
    verdicts = bounded(samples)
    result = {
        "turns": args.turns,
        "seconds": round(time.monotonic() - started, 1),
        "samples": samples,
        "bounded": bool(verdicts) and all(verdicts.values()),
        "grew": sorted(k for k, ok in verdicts.items() if not ok),
    }
    print("SOAK " + json.dumps(result))
    sys.exit(0 if result["bounded"] else 1)


if __name__ == "__main__":
    main()
