"""How long from a browser's SIGKILL until the session knows it is gone.

Starts real Chromium on one persistent profile, opens a page, SIGKILLs the browser's
main process from outside (as a crash would: not through ``session.kill()``), and
measures the time until ``alive`` is ``False`` and the ``on_close`` callback has run.
Relaunching on the same profile after each kill also exercises stale-lock cleanup.

Three modes are measured: Playwright's events alone (``watch_process=False``);
events plus the kernel's pidfd exit notice (``process_poll_interval=None``); and the
default, which also looks at ``/proc/<pid>`` every 20 ms for a queued SIGKILL or an
exit in progress. The last line is the default mode's figure::

    RESULT crash_to_fact_ms_median=... p_max=... trials=N

Usage: ``python benchmarks/crash_detection.py [--trials N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import tempfile
import time
from typing import Any

from session_keeper import PlaywrightBackend, find_chromium
from session_keeper.seams import CloseCause

PAGE = "data:text/html,<h1>crash me</h1><script>setInterval(() => {}, 10)</script>"


async def one_trial(backend: PlaywrightBackend) -> float:
    """Launch, SIGKILL from outside, return ms from the signal to the recorded fact."""
    session = await backend.launch()
    page = await session.open_page("bench")
    await session.goto(page, PAGE)
    assert session.pid is not None, "the backend did not find the browser's pid"
    done = asyncio.Event()
    stamp: list[float] = []

    def on_close(cause: CloseCause) -> None:
        stamp.append(time.perf_counter())
        assert cause == "crashed", cause
        assert not session.alive
        done.set()

    session.on_close(on_close)
    # Let the page settle, then kill at a random moment: a fixed delay could line the
    # kill up with the session's /proc look and flatter (or spoil) the figure.
    await asyncio.sleep(random.uniform(0.2, 0.3))
    start = time.perf_counter()
    os.kill(session.pid, signal.SIGKILL)
    await asyncio.wait_for(done.wait(), 10)
    return (stamp[0] - start) * 1000


async def measure(trials: int, **options: Any) -> list[float]:
    """Run ``trials`` kills on one profile with backend ``options``; latencies in ms."""
    with tempfile.TemporaryDirectory(prefix="sk-bench-") as profile:
        backend = PlaywrightBackend(profile, executable_path=find_chromium(), **options)
        try:
            return [await one_trial(backend) for _ in range(trials)]
        finally:
            await backend.aclose()


def summary(label: str, values: list[float]) -> str:
    return (
        f"{label:<28} min={min(values):6.1f} ms  median={statistics.median(values):6.1f} ms  "
        f"max={max(values):6.1f} ms  (n={len(values)})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    opts = parser.parse_args()
    if opts.trials < 1:
        parser.error("--trials must be at least 1")

    events_only = await measure(opts.trials, watch_process=False)
    pidfd = await measure(opts.trials, process_poll_interval=None)
    default = await measure(opts.trials)
    print(summary("events only", events_only))
    print(summary("events + pidfd", pidfd))
    print(summary("default (+ /proc look 20ms)", default))
    print(
        f"RESULT crash_to_fact_ms_median={statistics.median(default):.1f} "
        f"p_max={max(default):.1f} trials={len(default)}"
    )


if __name__ == "__main__":
    asyncio.run(main())
