"""What the Guard costs a signed-in page load: guarded vs unguarded, interleaved in one run.

Two real Chromium browsers on the local sites, each signed in to ``billing.example``
(the conversation holds an unlimited grant there): one behind a :class:`Guard`, one
without. Each round loads ``/gallery`` (a page with 40 subresources of the signed-in
site, none cached) twice in each browser and times each load
(``page.goto(..., wait_until="load")``). Rounds are interleaved so machine noise hits
both sides alike: each round loads each page four times, ``A B B A`` (the order flips
every round), and its ratio is the guarded pair's total over the plain pair's, so a
load that drifts slower through the round, or the first load after the other browser
ran, weighs on both sides alike. Each round also loads the same page with its 40 images on
``docs.example``, a site nobody signed in to (what a real page's CDN assets are): the
Guard's watch does not pause those. Row 9's ``BENCH`` records
(:mod:`benchmarks._report`) carry the per-round ratios; the last line is::

    RESULT guarded_ms=... plain_ms=... ratio=... rounds=N subresources=40

(the signed-in page: medians of the rounds' pairs, per load; ``ratio`` is guarded /
plain). A load that fails prints the Guard's blocks, so a refusal shows its reason.

Usage: ``python benchmarks/guard_overhead.py [--rounds N] [--subresources N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.async_api import Page

from benchmarks._report import emit
from session_keeper import Grant, Guard, IdleTimeouts, PlaywrightBackend, SessionKeeper
from session_keeper.testing import LocalSites

BILLING = "billing.example"


async def signed_in(keeper: SessionKeeper[Page], sites: LocalSites) -> Page:
    """Sign the billing conversation in; return its tab."""
    await keeper.ensure("billing")
    page = await keeper.unguarded_page("billing", sites.url(BILLING, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", "correct horse")
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("billing", BILLING)
    return page


async def load_ms(page: Page, url: str, subresources: int) -> float:
    """One page load, in milliseconds; checks every subresource arrived."""
    start = time.perf_counter()
    await page.goto(url, wait_until="load")
    elapsed = (time.perf_counter() - start) * 1000
    loaded = await page.evaluate(
        "() => [...document.images].filter(i => i.complete && i.naturalWidth > 0).length"
    )
    assert loaded == subresources, f"only {loaded} of {subresources} images loaded"
    return elapsed


Times = dict[str, dict[str, list[float]]]


async def run(rounds: int, subresources: int) -> Times:
    """``rounds`` interleaved ``A B B A`` rounds of each page: ``times[page][browser]``, per
    round the mean of that browser's two loads in milliseconds (pages ``signed-in`` and
    ``elsewhere``, browsers ``guarded``/``plain``)."""
    with LocalSites() as sites, tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
        keepers: dict[str, SessionKeeper[Page]] = {}
        for name in ("guarded", "plain"):
            backend = PlaywrightBackend(
                Path(tmp) / name, host_resolver_rules=sites.host_resolver_rules
            )
            keepers[name] = SessionKeeper(
                backend,
                grants=[Grant("billing", BILLING, actions={"read", "write"})],
                # The rounds use the page directly (no ensure()): on a loaded machine they
                # outlast the default idle close, which would end the run mid-way.
                idle_timeouts=IdleTimeouts(browser=timedelta(hours=6)),
            )
        guard = Guard(keepers["guarded"])
        urls = {
            "signed-in": sites.url(BILLING, f"/gallery?n={subresources}"),
            "elsewhere": sites.url(BILLING, f"/gallery?n={subresources}&from=docs.example"),
        }
        times: Times = {kind: {"guarded": [], "plain": []} for kind in urls}
        async with keepers["guarded"], keepers["plain"]:
            pages = {name: await signed_in(k, sites) for name, k in keepers.items()}
            for name in pages:  # warm-up: first loads pay for process start-up
                for url in urls.values():
                    for _ in range(2):
                        await load_ms(pages[name], url, subresources)
            for i in range(rounds):
                first, second = ("guarded", "plain") if i % 2 == 0 else ("plain", "guarded")
                for kind, url in urls.items():
                    pair = {"guarded": 0.0, "plain": 0.0}
                    for name in (first, second, second, first):
                        try:
                            pair[name] += await load_ms(pages[name], url, subresources)
                        except Exception:
                            print(f"a {name} load failed; the Guard's blocks: {guard.blocks}")
                            raise
                    for name, total in pair.items():
                        times[kind][name].append(total / 2)
        return times


def main() -> None:
    """Run the benchmark, emit row 9's records and print the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--subresources", type=int, default=40)
    args = parser.parse_args()
    times = asyncio.run(run(args.rounds, args.subresources))
    n = args.subresources
    compared = {
        "signed-in": f"page with {n} subresources, signed in: Guard on vs off",
        "elsewhere": f"signed-in page, its {n} subresources on an unprotected site: "
        "Guard on vs off",
    }
    for kind, label in compared.items():
        guarded, plain = times[kind]["guarded"], times[kind]["plain"]
        emit(
            "9",
            compared=label,
            ratios=[a / b for a, b in zip(guarded, plain, strict=True)],
            goal=1.05,
            direction="<=",
            detail=f"guarded {statistics.median(guarded):.0f} ms, "
            f"plain {statistics.median(plain):.0f} ms (medians; {2 * len(guarded)} loads"
            " a side, rounds A B B A)",
        )
    guarded, plain = times["signed-in"]["guarded"], times["signed-in"]["plain"]
    g, p = statistics.median(guarded), statistics.median(plain)
    print(f"guarded: {', '.join(f'{t:.0f}' for t in guarded)}")
    print(f"plain:   {', '.join(f'{t:.0f}' for t in plain)}")
    print(
        f"RESULT guarded_ms={g:.1f} plain_ms={p:.1f} ratio={g / p:.3f} "
        f"rounds={args.rounds} subresources={args.subresources}"
    )


if __name__ == "__main__":
    main()
