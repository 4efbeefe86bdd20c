"""The curve behind row 8: ``ensure()`` latency vs the number of conversations on one browser.

Registers N conversations (``ensure`` each) on one live browser, then times ``--calls``
``ensure()`` calls spread over them, for growing N. Prints a ``CURVE {json}`` line that
``benchmarks/run_all.py`` plots (when matplotlib is installed) and links from
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from session_keeper import PlaywrightBackend, SessionKeeper, find_chromium


async def run(sizes: list[int], calls: int) -> list[tuple[int, float, float]]:
    """(N, median µs, p99 µs) of ensure() per size."""
    out: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        keeper = SessionKeeper(PlaywrightBackend(Path(tmp) / "p", executable_path=find_chromium()))
        async with keeper:
            known = 0
            for n in sizes:
                for i in range(known, n):
                    await keeper.ensure(f"c{i}")
                known = n
                times: list[float] = []
                for k in range(calls):
                    start = time.perf_counter()
                    await keeper.ensure(f"c{k % n}")
                    times.append((time.perf_counter() - start) * 1e6)
                times.sort()
                out.append((n, statistics.median(times), times[int(0.99 * (len(times) - 1))]))
    return out


def main() -> None:
    """Run and print the CURVE line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100,1000")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    points = asyncio.run(run([int(x) for x in args.sizes.split(",")], args.calls))
    for n, med, p99 in points:
        print(f"conversations={n}: ensure() median {med:.1f} us, p99 {p99:.1f} us")
    print("CURVE " + json.dumps({"name": "ensure_latency", "points": points}))


if __name__ == "__main__":
    main()
