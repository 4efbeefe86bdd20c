"""Row 8: 1,000 conversations on one browser, then a crash.

    python benchmarks/scale_crash.py [--conversations 1000] [--tabs 20] [--crashes 3]

One keeper (real Chromium, SQLite store) serves ``--conversations`` conversations;
``--tabs`` of them hold an open tab. Per crash, the browser's main process is SIGKILLed
from outside and, once the keeper knows, every conversation calls ``ensure()`` at once
(one coroutine each), then once more. Counted, not assumed:

- relaunches: browser generations started by the crash (1 is right);
- told once: conversations with a tab whose first ``ensure()`` said ``restarted`` and
  whose second did not (all of them is right); conversations with nothing in the
  browser lost nothing and are not told (0 is right); lost tabs reported (``--tabs``);
- latency: p99 of ``ensure()`` with the browser alive (each conversation once), and
  p99 of the ``ensure()`` calls that met the crash (they wait for the one relaunch).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from benchmarks.recovery import kill, until
from session_keeper import Durability, PlaywrightBackend, SessionKeeper
from session_keeper.facts import TurnFacts
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[int(0.99 * (len(ordered) - 1))]


async def timed(keeper: SessionKeeper[Any], conversation: str) -> tuple[float, TurnFacts]:
    """One ensure() and its latency in ms."""
    start = time.perf_counter()
    facts = await keeper.ensure(conversation)
    return (time.perf_counter() - start) * 1e3, facts


async def run(conversations: int, tabs: int, crashes: int) -> list[dict[str, float]]:
    """Per crash: relaunches, told-once count, lost tabs told, steady and crash p99 (ms)."""
    names = [f"c{i:04d}" for i in range(conversations)]
    with_tab = names[:: max(1, conversations // tabs)][:tabs]
    out: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-crash-") as tmp_name, LocalSites() as sites:
        tmp = Path(tmp_name)
        async with SqliteStore(tmp / "keeper.db") as store:
            keeper = SessionKeeper(
                PlaywrightBackend(tmp / "profile", host_resolver_rules=sites.host_resolver_rules),
                durability=Durability(store=store),
            )
            async with keeper:
                for name in names:
                    await keeper.ensure(name)
                for n, name in enumerate(with_tab):
                    await keeper.tab(name, sites.url("docs.example", f"/guide?c={n}"))
                for crash in range(crashes):
                    steady = [(await timed(keeper, name))[0] for name in names]
                    before = keeper.generation
                    kill(tmp / "profile")
                    await until(lambda: not keeper.alive, "the keeper to learn of the kill")
                    first = await asyncio.gather(*(timed(keeper, name) for name in names))
                    second = await asyncio.gather(*(timed(keeper, name) for name in names))
                    affected = set(with_tab)
                    told_once = sum(
                        1
                        for name, (_, a), (_, b) in zip(names, first, second, strict=True)
                        if name in affected and a.restarted and not b.restarted
                    )
                    # A conversation with nothing in the browser lost nothing: not told.
                    told_unaffected = sum(
                        1
                        for name, (_, a), (_, b) in zip(names, first, second, strict=True)
                        if name not in affected and (a.restarted or b.restarted)
                    )
                    tabs_told = sum(1 for _, f in first if f.lost_tab is not None)
                    row = {
                        "relaunches": float(keeper.generation - before),
                        "told_once": float(told_once),
                        "told_unaffected": float(told_unaffected),
                        "tabs_told": float(tabs_told),
                        "steady_p99": p99(steady),
                        "crash_p99": p99([ms for ms, _ in first]),
                        "after_p99": p99([ms for ms, _ in second]),
                    }
                    out.append(row)
                    print(
                        f"crash {crash + 1}: relaunches {row['relaunches']:.0f}, told once "
                        f"{told_once}/{len(with_tab)} affected, told {told_unaffected}/"
                        f"{conversations - len(with_tab)} unaffected, lost tabs told "
                        f"{tabs_told}/{len(with_tab)}, "
                        f"p99 ensure() alive {row['steady_p99']:.3f} ms, meeting the crash "
                        f"{row['crash_p99']:.0f} ms, after it {row['after_p99']:.3f} ms",
                        flush=True,
                    )
                    # The tabs are reopened for the next crash, as their agents would.
                    for n, name in enumerate(with_tab):
                        await keeper.tab(name, sites.url("docs.example", f"/guide?c={n}"))
    return out


def main() -> None:
    """Parse options, run, emit row 8's records."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--tabs", type=int, default=20)
    parser.add_argument("--crashes", type=int, default=3)
    args = parser.parse_args()
    rows = asyncio.run(run(args.conversations, args.tabs, args.crashes))
    relaunches = sorted({int(r["relaunches"]) for r in rows})
    told = min(int(r["told_once"]) for r in rows)
    unaffected = max(int(r["told_unaffected"]) for r in rows)
    tabs_told = min(int(r["tabs_told"]) for r in rows)
    counts = (
        f"per crash: relaunches {relaunches}; the {args.tabs} conversations with a tab told"
        f" exactly once: at least {told}; the {args.conversations - args.tabs} with nothing"
        f" in the browser told: at most {unaffected}; lost tabs reported: at least {tabs_told}"
    )
    n = f"{args.conversations:,}"
    emit(
        "8",
        compared=f"p99 ensure() over {n} conversations, browser alive",
        ratios=[r["steady_p99"] for r in rows],
        goal=None,
        direction="<=",
        unit=" ms",
        detail=counts,
    )
    emit(
        "8",
        compared=f"p99 ensure() of the {n} calls that met a SIGKILL (one relaunch shared)",
        ratios=[r["crash_p99"] for r in rows],
        goal=None,
        direction="<=",
        unit=" ms",
        detail=f"{len(rows)} crashes; after the crash p99 "
        f"{statistics.median(r['after_p99'] for r in rows):.3f} ms",
    )


if __name__ == "__main__":
    main()
