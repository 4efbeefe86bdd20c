"""Row 1: what a turn costs the agent on a live browser, against one CDP round trip.

A turn is ``await keeper.ensure(conv)`` plus ``await keeper.tab(conv)`` (the handle an
LLM tool holds); the yardstick is one ``page.evaluate("1")`` on the same page — the
cheapest thing any browser tool does. Rounds alternate the two; each round times
``--calls`` of each. Goal: ≤ 0.01× would mean a turn costs a hundredth of one round
trip. Last lines: a ``BENCH`` record and ``RESULT turn_us=... evaluate_us=... ratio=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper import PlaywrightBackend, SessionKeeper, find_chromium


async def run(rounds: int, calls: int) -> tuple[list[float], list[float]]:
    """Per-round mean µs of a turn and of one evaluate, rounds interleaved."""
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as tmp:
        backend = PlaywrightBackend(Path(tmp) / "profile", executable_path=find_chromium())
        keeper = SessionKeeper(backend)
        async with keeper:
            await keeper.ensure("c")
            await keeper.tab("c")
            page = await keeper.unguarded_page("c")
            turn: list[float] = []
            rtt: list[float] = []

            async def turns() -> float:
                start = time.perf_counter()
                for _ in range(calls):
                    await keeper.ensure("c")
                    await keeper.tab("c")
                return (time.perf_counter() - start) / calls * 1e6

            async def evals() -> float:
                start = time.perf_counter()
                for _ in range(calls):
                    await page.evaluate("1")
                return (time.perf_counter() - start) / calls * 1e6

            await turns()  # warm-up
            await evals()
            for i in range(rounds):
                if i % 2 == 0:
                    turn.append(await turns())
                    rtt.append(await evals())
                else:
                    rtt.append(await evals())
                    turn.append(await turns())
            return turn, rtt


def main() -> None:
    """Run, print per-round figures, the BENCH record and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    turn, rtt = asyncio.run(run(args.rounds, args.calls))
    ratios = [t / r for t, r in zip(turn, rtt, strict=True)]
    for n, (t, r) in enumerate(zip(turn, rtt, strict=True), 1):
        print(f"round {n}: turn {t:.1f} us, evaluate {r:.1f} us, ratio {t / r:.4f}")
    t, r = statistics.median(turn), statistics.median(rtt)
    emit(
        "1",
        compared="ensure() + keeper.tab(conv) on a live browser vs one page.evaluate('1')",
        ratios=ratios,
        goal=0.01,
        direction="<=",
        detail=f"turn {t:.1f} µs, evaluate {r:.1f} µs (medians, {args.calls} calls/round)",
    )
    print(f"RESULT turn_us={t:.1f} evaluate_us={r:.1f} ratio={statistics.median(ratios):.4f}")


if __name__ == "__main__":
    main()
