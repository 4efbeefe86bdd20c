"""Soak: real-Chromium turns over many conversations with random kills; is anything growing?

One SessionKeeper on real Chromium and a SQLite store. Each turn picks a conversation
(seeded), calls ``ensure`` and opens or navigates its tab on the local docs site.
Between turns the browser's main process is SIGKILLed at random (about one turn in
100). Measured at the first turn, after the warm-up (turn 100) and at the end: our
process's open file descriptors and RSS, Chromium's processes and their summed PSS,
and the saved state's size (the store's database and WAL). Told-once is checked on
the way: every conversation that had a tab in a killed browser hears ``restarted``
once, on its next turn, and no conversation hears it twice for one restart.

Usage: ``python scripts/soak_chromium.py [--turns 1000] [--conversations 100] [--seed N]``.
Prints ``SOAK {json}`` last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from session_keeper import Durability, PlaywrightBackend, SessionKeeper
from session_keeper.errors import BrowserGoneError
from session_keeper.stores import SqliteStore
from session_keeper.testing import CHROMIUM_TEST_ARGS, LocalSites


def descendants(root: int) -> list[int]:
    """Every live descendant process of ``root`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_kb(pid: int, field: str = "VmRSS:", source: str = "status") -> int:
    """Resident set size of ``pid`` in kB (``field="Pss:", source="smaps_rollup"``: its
    proportional share, so shared pages are not counted once per process); 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def fd_count(pid: int) -> int:
    """Open file descriptors of ``pid`` (0 if it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def is_chromium(pid: int) -> bool:
    """Whether ``pid`` is a Chromium process (browser, renderer, GPU, utility...)."""
    try:
        return "chrom" in Path(f"/proc/{pid}/comm").read_text().lower()
    except OSError:
        return False


def sample(db: Path) -> dict[str, Any]:
    """The resource figures at this moment."""
    tree = descendants(os.getpid())
    chromium = [p for p in tree if is_chromium(p)]
    wal = Path(str(db) + "-wal")
    return {
        "fds": len(os.listdir("/proc/self/fd")),
        # The Playwright driver (a node process) holds the browser's pipes.
        "driver_fds": sum(fd_count(p) for p in tree if p not in chromium),
        "rss_mb": round(rss_kb(os.getpid()) / 1024, 1),
        "chromium_processes": len(chromium),
        "chromium_pss_mb": round(
            sum(rss_kb(p, "Pss:", "smaps_rollup") for p in chromium) / 1024, 1
        ),
        # The database and its WAL together: what a restart would read back.
        "saved_state_kb": round(
            (db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)) / 1024, 1
        ),
        "wal_kb": round(wal.stat().st_size / 1024, 1) if wal.exists() else 0.0,
    }


async def soak(turns: int, conversations: int, seed: int, kill_every: int) -> dict[str, Any]:
    """Run the soak; return what it measured."""
    rng = random.Random(seed)
    convs = [f"c{n}" for n in range(conversations)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, LocalSites() as sites:
        db = Path(tmp) / "keeper.db"
        backend = PlaywrightBackend(
            Path(tmp) / "profile", host_resolver_rules=sites.host_resolver_rules,
            args=CHROMIUM_TEST_ARGS,
        )  # fmt: skip
        kills = told = missed = told_twice = retried = 0
        tabbed: set[str] = set()  # conversations with a tab in the current browser
        owed: set[str] = set()  # had a tab in a killed browser, not told yet
        told_for: set[tuple[str, int]] = set()
        samples: dict[str, dict[str, Any]] = {}
        async with (
            SqliteStore(db) as store,
            SessionKeeper(backend, durability=Durability(store=store)) as keeper,
        ):
            for n in range(1, turns + 1):
                conv = rng.choice(convs)
                url = sites.url("docs.example", f"/?c={conv}&t={n}")
                heard = False
                for attempt in range(3):
                    try:
                        turn = await keeper.ensure(conv)
                        if turn.restarted:
                            heard = True
                            if (conv, kills) in told_for:
                                told_twice += 1
                            told_for.add((conv, kills))
                        tab = await keeper.tab(conv, url)
                        await tab.evaluate("1")
                        tabbed.add(conv)
                        if conv in owed:  # judged once the turn went through
                            told += heard
                            missed += not heard
                            owed.discard(conv)
                        break
                    except BrowserGoneError:
                        # Killed, not yet noticed when the turn began: the next try relaunches.
                        retried += 1
                        await asyncio.sleep(0.05 * (attempt + 1))
                else:
                    raise RuntimeError(f"turn {n} failed three times")
                if n in (1, min(100, turns), turns):
                    samples[{1: "start", turns: "end"}.get(n, "warm")] = {
                        **sample(db),
                        "open_tabs": len(tabbed),
                    }
                if n < turns and rng.randrange(kill_every) == 0:
                    assert backend.current is not None and backend.current.pid is not None
                    os.kill(backend.current.pid, signal.SIGKILL)
                    kills += 1
                    owed |= tabbed
                    tabbed = set()
                if n % 100 == 0:
                    print(f"turn {n}: {kills} kills, {sample(db)}", file=sys.stderr, flush=True)
        return {
            "turns": turns, "conversations": conversations, "seed": seed, "kills": kills,
            "told": told, "missed": missed, "told_twice": told_twice,
            "owed_at_end": len(owed), "retried_turns": retried,
            "seconds": round(time.monotonic() - started, 1), **{
                f"{k}_{when}": v for when, s in samples.items() for k, v in s.items()
            },
        }  # fmt: skip


def main() -> None:
    """Parse arguments, run, print the SOAK line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--kill-every", type=int, default=100, help="one kill per N turns")
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(2**32))
    args = parser.parse_args()
    result = asyncio.run(soak(args.turns, args.conversations, args.seed, args.kill_every))
    print("SOAK " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
