"""Row 11: a KeeperPool of 10 profiles, at most 3 open browsers, 1,000 conversations, a crash.

Browsers are ``FakeBackend`` (in memory): a thousand conversations churning through 10
profiles with 3 slots relaunch a browser hundreds of times, which real Chromium on this
2-core machine would turn into a launch benchmark. Everything else is real: the pool,
its keepers, profile leases and every keeper save in a SqliteStore file (WAL,
``synchronous=FULL``).

Each conversation takes a first turn (``ensure`` + a tab), then ``--turns`` turns go to
random conversations (each: ``ensure``, then its tab again). In the middle, every
conversation of one profile takes a turn (so each has a tab in its browser), and that
browser crashes. Checked on every turn: ``restarted`` is true exactly when the
conversation's profile was closed (evicted or crashed) since its last turn, so every
affected conversation is told once and nobody else. Counted: relaunches against
crashes + evictions (a closure not yet followed by a relaunch — a profile closed at the
end — is *pending*). Timed: ``ensure()`` on a live browser, and on one that relaunches
(eviction of the least recently used profile, lease, load, launch).

Prints ``RESULT pool ...`` and ``BENCH`` records for ``benchmarks/run_all.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper.pool import KeeperPool, SpreadRouting
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def one_round(
    conversations: int, profiles: int, max_open: int, turns: int, seed: int
) -> dict[str, float]:
    rng = random.Random(seed)
    names = [f"p{i}" for i in range(profiles)]
    backends = {name: FakeBackend() for name in names}
    # How often each profile was closed (evicted or crashed), and what each conversation
    # saw of that count at its last turn: told iff the count moved since.
    closures = dict.fromkeys(names, 0)
    seen: dict[str, int] = {}
    live_ms: list[float] = []
    relaunch_ms: list[float] = []
    told = expected = wrong = 0
    crash_affected = crash_told = 0
    crashed: str | None = None
    crash_victims: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
        async with SqliteStore(Path(tmp) / "pool.db") as store:
            pool = KeeperPool(
                backends,
                store=store,
                owner="bench",
                policy=SpreadRouting(),
                max_open=max_open,
                lease_ttl=timedelta(minutes=5),
            )
            async with pool:

                async def turn(conversation: str) -> None:
                    nonlocal told, expected, wrong, crash_told
                    before_open = set(pool.stats().open_profiles)
                    before_evictions = pool.stats().evictions
                    profile = pool.profile_of(conversation)
                    launches = sum(b.launches for b in backends.values())
                    start = time.perf_counter()
                    facts = await pool.ensure(conversation)
                    elapsed = (time.perf_counter() - start) * 1e3
                    relaunched = sum(b.launches for b in backends.values()) > launches
                    (relaunch_ms if relaunched else live_ms).append(elapsed)
                    if pool.stats().evictions > before_evictions:
                        # The profile that left the open set had a live browser closed.
                        for gone in before_open - set(pool.stats().open_profiles):
                            closures[gone] += 1
                    profile = profile or pool.profile_of(conversation)
                    assert profile is not None
                    should = conversation in seen and closures[profile] > seen[conversation]
                    expected += should
                    told += facts.restarted
                    wrong += facts.restarted != should
                    if facts.restarted and conversation in crash_victims:
                        crash_told += 1
                        crash_victims.discard(conversation)
                    await pool.tab(conversation)
                    seen[conversation] = closures[profile]

                convs = [f"c{i}" for i in range(conversations)]
                for c in convs:
                    await turn(c)
                for n in range(turns):
                    if n == turns // 2:
                        # Every conversation of one profile takes a turn (a tab each in
                        # its live browser), then that browser crashes.
                        crashed = rng.choice(names)
                        for c in convs:
                            if pool.profile_of(c) == crashed:
                                await turn(c)
                        await backends[crashed].crash()
                        closures[crashed] += 1
                        crash_victims = {
                            c
                            for c in convs
                            if pool.profile_of(c) == crashed
                            and seen.get(c) == closures[crashed] - 1
                        }
                        crash_affected = len(crash_victims)
                    await turn(rng.choice(convs))
                # Every conversation the crash affected takes one more turn: each is told.
                for c in sorted(crash_victims):
                    await turn(c)
                stats = pool.stats()
                launched = [n for n, b in backends.items() if b.launches]
                relaunches = sum(b.launches for b in backends.values()) - len(launched)
                # A profile closed and not open now has one closure still to relaunch.
                pending = len([n for n in launched if n not in stats.open_profiles])
    return {
        "conversations": conversations,
        "turns": conversations + turns,
        "relaunches": relaunches,
        "crashes": 1,
        "evictions": stats.evictions,
        "pending": pending,
        "told": told,
        "expected": expected,
        "wrong": wrong,
        "crash_affected": crash_affected,
        "crash_told": crash_told,
        "p99_live_ms": p99(live_ms),
        "p99_relaunch_ms": p99(relaunch_ms),
        "live_n": len(live_ms),
        "relaunch_n": len(relaunch_ms),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--profiles", type=int, default=10)
    parser.add_argument("--max-open", type=int, default=3)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for r in range(args.rounds):
        res = await one_round(args.conversations, args.profiles, args.max_open, args.turns, r)
        rounds.append(res)
        balance = res["crashes"] + res["evictions"] - res["pending"]
        print(
            f"round {r}: relaunches={res['relaunches']:.0f} crashes=1 "
            f"evictions={res['evictions']:.0f} pending={res['pending']:.0f} "
            f"(crashes+evictions-pending={balance:.0f}) told={res['told']:.0f}/"
            f"{res['expected']:.0f} wrong={res['wrong']:.0f} crash told "
            f"{res['crash_told']:.0f}/{res['crash_affected']:.0f} "
            f"p99 live={res['p99_live_ms']:.2f}ms (n={res['live_n']:.0f}) "
            f"relaunch={res['p99_relaunch_ms']:.2f}ms (n={res['relaunch_n']:.0f})",
            flush=True,
        )
    ok = all(
        r["wrong"] == 0
        and r["crash_told"] == r["crash_affected"]
        and r["relaunches"] == r["crashes"] + r["evictions"] - r["pending"]
        for r in rounds
    )
    live = [r["p99_live_ms"] for r in rounds]
    relaunch = [r["p99_relaunch_ms"] for r in rounds]
    last = rounds[-1]
    emit(
        "11",
        compared="p99 pool.ensure() on a live browser (FakeBackend, SqliteStore)",
        ratios=live,
        goal=None,
        direction="<=",
        unit=" ms",
        detail=(
            f"{args.conversations} conversations, {args.profiles} profiles, "
            f"≤ {args.max_open} open, {args.turns} turns, 1 crash; told once: "
            f"{'yes' if ok else 'NO'}"
        ),
    )
    emit(
        "11",
        compared="p99 pool.ensure() that relaunches (evict LRU, lease, load, launch)",
        ratios=relaunch,
        goal=None,
        direction="<=",
        unit=" ms",
        detail=(
            f"relaunches {last['relaunches']:.0f} = 1 crash + {last['evictions']:.0f} "
            f"evictions - {last['pending']:.0f} pending (last round)"
        ),
    )
    print(
        f"RESULT pool conversations={args.conversations} profiles={args.profiles} "
        f"max_open={args.max_open} rounds={args.rounds} told_once={'yes' if ok else 'NO'} "
        f"wrong={sum(r['wrong'] for r in rounds):.0f} "
        f"crash_told={last['crash_told']:.0f}/{last['crash_affected']:.0f} "
        f"relaunches={last['relaunches']:.0f} crashes=1 evictions={last['evictions']:.0f} "
        f"pending={last['pending']:.0f} "
        f"p99_live_ms={max(live):.2f} p99_relaunch_ms={max(relaunch):.2f}",
        flush=True,
    )
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
