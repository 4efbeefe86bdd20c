"""The durable job loop's pages/s against a plain Playwright loop, side by side.

    python benchmarks/job_loop.py [--rounds 5]

Both read the same 24 catalogue pages (local test site, real Chromium, same flags,
same one-round-trip observation). The plain loop keeps nothing; the durable loop
runs through SessionKeeper + JobLoop + SqliteStore: lease, ensure(), identity and
field validation, then one fenced fsynced commit per page holding its results, its
artifact (written and read back) and its event. Rounds alternate between the two,
because this machine is noisy.
Last line: ``RESULT durable_pages_per_s=... raw_pages_per_s=... ratio_vs_raw=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import attrs
from playwright.async_api import BrowserContext, Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.catalogue_audit import (
    CONVERSATION,
    SITE,
    catalogue_step,
    contract,
    expect_identity,
    human_signs_in,
    make_target,
    observe,
)
from demos.sites import CATALOGUE_PAGES, CATALOGUE_PASSWORD, DemoSites
from session_keeper import Durability, Grant, PlaywrightBackend, SessionKeeper, find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper.jobs import JobLoop
from session_keeper.stores import SqliteStore


async def raw_round(page: Page, base: str) -> float:
    """Read every page with plain Playwright; return pages/s."""
    started = time.perf_counter()
    records = 0
    for n in range(1, CATALOGUE_PAGES + 1):
        await page.goto(f"{base}/items?page={n}")
        seen = await observe(page)
        if seen["identity"] != f"catalogue page {n}":
            raise RuntimeError("raw loop read the wrong page")
        records += len(seen["rows"])
    elapsed = time.perf_counter() - started
    assert records == CATALOGUE_PAGES * 10
    return CATALOGUE_PAGES / elapsed


async def durable_round(loop: JobLoop[Page], store: SqliteStore, base: str, n: int) -> float:
    """Run a fresh audit job to completion through the durable loop; return pages/s."""
    job_id = f"bench-{n}"
    await store.submit_job(
        attrs.evolve(contract(), job_id=job_id, extra={"conversation": CONVERSATION})
    )
    started = time.perf_counter()
    out = await loop.run(
        job_id, catalogue_step, target=make_target(base), expect_identity=expect_identity
    )
    elapsed = time.perf_counter() - started
    if out.state != "done" or out.new_records != CATALOGUE_PAGES * 10:
        raise RuntimeError(f"durable loop ended {out.state} with {out.new_records} records")
    return CATALOGUE_PAGES / elapsed


async def main(rounds: int) -> None:
    """Alternate raw and durable rounds; print the medians and their ratio."""
    with tempfile.TemporaryDirectory(prefix="bench-job-loop-") as tmp_name, DemoSites() as sites:
        tmp = Path(tmp_name)
        base = sites.url(SITE, "").rstrip("/")
        async with async_playwright() as pw:
            context: BrowserContext = await pw.chromium.launch_persistent_context(
                str(tmp / "raw-profile"),
                executable_path=find_chromium(),
                args=[*CHROMIUM_ARGS, f"--host-resolver-rules={sites.host_resolver_rules}"],
                headless=True,
            )
            raw_page = await context.new_page()
            await raw_page.goto(f"{base}/login")
            await raw_page.fill("input[name=password]", CATALOGUE_PASSWORD)
            async with raw_page.expect_navigation():
                await raw_page.click("button[type=submit]")

            async with SqliteStore(tmp / "bench.db") as store:
                backend = PlaywrightBackend(
                    tmp / "durable-profile", host_resolver_rules=sites.host_resolver_rules
                )
                keeper = SessionKeeper(
                    backend,
                    durability=Durability(store=store),
                    grants=[Grant(CONVERSATION, SITE, actions={"read"})],
                )
                async with keeper:
                    await human_signs_in(keeper, base)
                    loop = JobLoop(keeper, store, "bench-worker")
                    # Warm both paths once (page cache, JIT) before measuring.
                    await raw_round(raw_page, base)
                    await durable_round(loop, store, base, 0)
                    raw: list[float] = []
                    durable: list[float] = []
                    for n in range(1, rounds + 1):
                        raw.append(await raw_round(raw_page, base))
                        durable.append(await durable_round(loop, store, base, n))
                        print(
                            f"round {n}: raw {raw[-1]:.1f} pages/s, "
                            f"durable {durable[-1]:.1f} pages/s, ratio {durable[-1] / raw[-1]:.2f}"
                        )
            await context.close()
    r, d = statistics.median(raw), statistics.median(durable)
    paired = statistics.median(x / y for x, y in zip(durable, raw, strict=True))
    print(f"median of per-round ratios: {paired:.2f}")
    print(f"RESULT durable_pages_per_s={d:.1f} raw_pages_per_s={r:.1f} ratio_vs_raw={d / r:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(main(parser.parse_args().rounds))
