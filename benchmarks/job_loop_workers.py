"""The curve beside row 5: durable job-loop pages/s vs the number of workers, on PostgreSQL.

    python benchmarks/job_loop_workers.py [--workers 1,2,4,8] [--rounds 2]

One keeper on one real Chromium, one throwaway PostgreSQL (``TemporaryPostgres``:
``fsync=on``, ``synchronous_commit=on``). For N workers, N catalogue audits (24 pages
each, as in ``job_loop.py``) are submitted and N ``JobLoop`` instances, each with its
own worker id and its own conversation (tab), run them concurrently: leased, fenced,
one durable commit per page. Pages/s is all committed pages over the wall time; each
N is run ``--rounds`` times (sizes interleaved) and the median kept. Prints a ``CURVE
{json}`` line that ``benchmarks/run_all.py`` plots.
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

import attrs
from playwright.async_api import Page

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.catalogue_audit import (
    CONVERSATION,
    SITE,
    catalogue_step,
    contract,
    expect_identity,
    human_signs_in,
    make_target,
)
from demos.sites import CATALOGUE_PAGES, DemoSites
from session_keeper import Durability, Grant, PlaywrightBackend, SessionKeeper
from session_keeper.jobs import JobLoop
from session_keeper.stores import PostgresStore
from session_keeper.testing import TemporaryPostgres

MAX_WORKERS = 8


async def one_size(
    keeper: SessionKeeper[Page], store: PostgresStore, base: str, workers: int, tag: str
) -> float:
    """Run ``workers`` audits at once, one JobLoop each; committed pages per second."""
    jobs = [f"bench-{tag}-{w}" for w in range(workers)]
    for w, job_id in enumerate(jobs):
        await store.submit_job(
            attrs.evolve(contract(), job_id=job_id, extra={"conversation": f"worker-{w}"})
        )
    loops = [JobLoop(keeper, store, f"worker-{w}") for w in range(workers)]
    start = time.perf_counter()
    outs = await asyncio.gather(
        *(
            loop.run(job_id, catalogue_step, target=make_target(base),
                     expect_identity=expect_identity)
            for loop, job_id in zip(loops, jobs, strict=True)
        )
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    for out in outs:
        if out.state != "done" or out.new_records != CATALOGUE_PAGES * 10:
            raise RuntimeError(f"a job ended {out.state} with {out.new_records} records")
    return workers * CATALOGUE_PAGES / elapsed


async def run(sizes: list[int], rounds: int) -> list[tuple[int, float, float, float]]:
    """(workers, median, min, max pages/s) per size."""
    rates: dict[int, list[float]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp_name, DemoSites() as sites:
        tmp = Path(tmp_name)
        base = sites.url(SITE, "").rstrip("/")
        pg = TemporaryPostgres()
        pg.start()
        try:
            async with PostgresStore(pg.dsn, max_size=max(sizes) + 2) as store:
                grants = [Grant(f"worker-{w}", SITE, actions={"read"}) for w in range(max(sizes))]
                rules = sites.host_resolver_rules
                keeper = SessionKeeper(
                    PlaywrightBackend(tmp / "profile", host_resolver_rules=rules),
                    durability=Durability(store=store),
                    grants=[Grant(CONVERSATION, SITE, actions={"read"}), *grants],
                )
                async with keeper:
                    await human_signs_in(keeper, base)
                    await one_size(keeper, store, base, 1, "warm")
                    for r in range(rounds):
                        order = sizes if r % 2 == 0 else sizes[::-1]
                        for n in order:
                            rate = await one_size(keeper, store, base, n, f"{r}-{n}")
                            rates[n].append(rate)
                            print(f"round {r + 1}: {n} workers {rate:.1f} pages/s", flush=True)
        finally:
            pg.stop()
    return [(n, statistics.median(v), min(v), max(v)) for n, v in rates.items()]


def main() -> None:
    """Run and print the CURVE line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(x) for x in args.workers.split(",")]
    if max(sizes) > MAX_WORKERS or min(sizes) < 1:
        parser.error(f"workers must be between 1 and {MAX_WORKERS}")
    points = asyncio.run(run(sizes, args.rounds))
    for n, med, lo, hi in points:
        print(f"workers={n}: {med:.1f} pages/s (min {lo:.1f}, max {hi:.1f})")
    print("CURVE " + json.dumps({"name": "job_loop_workers", "points": points}))


if __name__ == "__main__":
    main()
