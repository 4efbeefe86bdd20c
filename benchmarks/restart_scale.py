"""Issue 22: a restart told to N conversations, their turns arriving one at a time, costs N.

For each store (SQLite, and PostgreSQL on a :class:`TemporaryPostgres` when one starts)
and each size N (default 100, 1,000 and 10,000), one keeper on a FakeBackend (the
library's own cost, no browser) holds N conversations, each with a tab. Each round
crashes the browser, relaunches it with one conversation's turn, and then gives every
other conversation its turn *one at a time* (each ``ensure()`` awaited before the next
starts, as turns of a chat service arrive), every one of them told of the restart and its
lost tab (counted, not assumed). Then each conversation reopens its tab, for the next
round.

The figure is the whole telling's time per conversation at the largest size over the
smallest, per round (goal <= 1.5x: linear total time; quadratic would be 100x), and the
growth exponent of the total (log time ratio / log size ratio: 1 is linear, 2 quadratic).
It also measures the keeper's memory per conversation with ``tracemalloc`` (traced
bytes of the largest keeper over the smallest's, per conversation; flat is the goal):

    RESULT sqlite: per conversation 100=..ms, ...; exponent ...; memory ... B/conversation

Usage: ``python benchmarks/restart_scale.py [--sizes 100,1000,10000] [--rounds N]
[--stores sqlite,postgres]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import math
import statistics
import sys
import tempfile
import time
import tracemalloc
from contextlib import AsyncExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from benchmarks._stores import stores_per_size
from session_keeper import Durability, SessionKeeper
from session_keeper.stores import Store
from session_keeper.testing import FakeBackend, FakeClock, FakePage

#: How many conversations open their tab at once while a keeper is built.
CHUNK = 2000


class Sized:
    """One keeper holding ``n`` conversations with a tab each."""

    def __init__(
        self, n: int, keeper: SessionKeeper[FakePage], backend: FakeBackend, traced: int
    ) -> None:
        self.n, self.keeper, self.backend, self.traced = n, keeper, backend, traced
        self.names = [f"c{i}" for i in range(n)]

    async def reopen(self) -> None:
        """Every conversation opens its tab again (concurrently: not what is timed)."""
        for lo in range(0, self.n, CHUNK):
            chunk = self.names[lo : lo + CHUNK]
            await asyncio.gather(
                *(self.keeper.unguarded_page(c, f"https://docs.example/{c}") for c in chunk)
            )
        await self.keeper.persist()

    async def telling(self) -> float:
        """Crash, then each conversation's turn one at a time: seconds of the telling."""
        await self.backend.crash()
        told = 0
        start = time.perf_counter()
        for conversation in self.names:
            facts = await self.keeper.ensure(conversation)
            told += facts.restarted and any(x.kind == "tab" for x in facts.lost)
        elapsed = time.perf_counter() - start
        assert told == self.n, f"{told} of {self.n} conversations told of their lost tab"
        return elapsed


async def _build(store: Store, n: int, stack: AsyncExitStack) -> Sized:
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    keeper: SessionKeeper[FakePage] = SessionKeeper(
        backend, clock=clock, durability=Durability(store=store)
    )
    await stack.enter_async_context(keeper)
    sized = Sized(n, keeper, backend, 0)
    for lo in range(0, n, CHUNK):
        await asyncio.gather(*(keeper.ensure(c) for c in sized.names[lo : lo + CHUNK]))
    await sized.reopen()
    gc.collect()
    sized.traced = tracemalloc.get_traced_memory()[0] - before
    return sized


async def run(
    kind: str, sizes: list[int], rounds: int
) -> tuple[dict[int, list[float]], dict[int, int]]:
    """Per size: the seconds of each round's telling, and the traced bytes of its keeper."""
    times: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        async with (
            stores_per_size(kind, sizes, Path(tmp), "bench_restart") as stores,
            AsyncExitStack() as keepers,
        ):
            sized: list[Sized] = []
            tracemalloc.start()
            try:
                for n, store in zip(sizes, stores, strict=True):
                    built = time.perf_counter()
                    sized.append(await _build(store, n, keepers))
                    print(
                        f"{kind}: built {n:,} conversations in {time.perf_counter() - built:.1f}s"
                    )
            finally:
                tracemalloc.stop()  # it slows every allocation: not during the timed part
            for s in sized:  # warm-up, not counted
                await s.telling()
                await s.reopen()
            for r in range(rounds):
                for s in sized if r % 2 == 0 else list(reversed(sized)):
                    times[s.n].append(await s.telling())
                    await s.reopen()
    return times, {s.n: s.traced for s in sized}


def report(
    kind: str, sizes: list[int], times: dict[int, list[float]], traced: dict[int, int]
) -> None:
    """The BENCH rows (per-conversation cost, memory per conversation) and a RESULT line."""
    small, big = sizes[0], sizes[-1]
    per = {n: [t / n for t in times[n]] for n in sizes}
    per_round = [b / a for a, b in zip(per[small], per[big], strict=True)]
    medians = {n: statistics.median(times[n]) for n in sizes}
    exponents = [
        math.log(medians[hi] / medians[lo]) / math.log(hi / lo)
        for lo, hi in itertools.pairwise(sizes)
    ]
    spans = ", ".join(
        f"{lo:,}->{hi:,} {e:.2f}"
        for (lo, hi), e in zip(itertools.pairwise(sizes), exponents, strict=True)
    )
    emit(
        "17",
        compared=f"a restart told to {big:,} conversations one turn at a time, per conversation "
        f"vs at {small:,} ({kind})",
        ratios=per_round,
        goal=1.5,
        direction="<=",
        detail=", ".join(f"{n:,}: {statistics.median(per[n]) * 1e3:.2f} ms" for n in sizes)
        + f" per conversation (medians); total's growth exponent {spans} (1 = linear)",
    )
    bytes_per = {n: traced[n] / n for n in sizes}
    emit(
        "17",
        compared=f"keeper memory per conversation (tab, facts, rows) at {big:,} vs at {small:,} "
        f"({kind})",
        ratios=[bytes_per[big] / bytes_per[small]],
        goal=1.5,
        direction="<=",
        detail=", ".join(f"{n:,}: {bytes_per[n] / 1024:.1f} KiB" for n in sizes)
        + " traced per conversation (tracemalloc)",
    )
    print(
        f"RESULT {kind}: per conversation "
        + ", ".join(f"{n:,}={statistics.median(per[n]) * 1e3:.3f}ms" for n in sizes)
        + f"; total growth exponent {spans}; memory "
        + ", ".join(f"{n:,}={bytes_per[n]:.0f}B" for n in sizes)
        + " per conversation",
        flush=True,
    )


def main() -> None:
    """Run each store and print its rows."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args()
    sizes = sorted(int(x) for x in args.sizes.split(","))
    for kind in args.stores.split(","):
        times, traced = asyncio.run(run(kind, sizes, args.rounds))
        report(kind, sizes, times, traced)


if __name__ == "__main__":
    main()
