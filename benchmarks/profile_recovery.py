"""Profile row 4: where a keeper's relaunch + reopened tabs spends its time, per phase.

    python benchmarks/profile_recovery.py [--rounds 5] [--tabs 10] [--no-store] [--wait-close]

Runs the rounds of ``benchmarks/recovery.py`` (keeper and plain Playwright, interleaved)
with timing wrappers around the keeper's phases: the restart (launch, the ledger measured
against the jar, the launch jar read), each save, each page opened (the input watch's
install, ``new_page``, the ``on_page`` callbacks: the Guard's, when one is installed), each
navigation and each jar read. Prints each round's launch and what came after it (and, for
both sides, the time from the kill to the moment the side knew, and this process's CPU);
then, per phase, the medians over rounds of its first start and last end (ms from the
known death), of its summed durations and of its number of calls.

``--no-store``: a keeper without a store. ``--wait-close``: the keeper's clock starts at
Playwright's ``close`` event of the dead browser, where the plain program's does.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, BrowserType, Playwright, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.recovery import SETTLE_S, kill, launch_plain, until
from session_keeper import Durability, PlaywrightBackend, SessionKeeper
from session_keeper._browser.page_activity import PageActivity
from session_keeper._browser.playwright_session import PlaywrightSession
from session_keeper._keeper.lifecycle.browser_lifetime import BrowserLifetime
from session_keeper._keeper.lifecycle.conversations import Conversations
from session_keeper._keeper.lifecycle.restart_accounting import RestartAccounting
from session_keeper._keeper.saving.persistence import KeeperPersistence
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

Span = tuple[str, float, float]
Summary = dict[str, tuple[float, float, float, float]]

#: (phase, start, end) in perf_counter seconds, for the round being measured.
SPANS: list[Span] = []
KILLED = "kill -> known"


def timed(cls: type, name: str, phase: str) -> None:
    """Wrap ``cls.name`` (a coroutine function) so that each call records a span."""
    original: Callable[..., Any] = getattr(cls, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            SPANS.append((phase, t0, time.perf_counter()))

    setattr(cls, name, wrapper)


def instrument() -> None:
    """Wrap the phases of a restart and of a tab's reopening."""
    timed(BrowserLifetime, "restart", "restart (whole)")
    timed(PlaywrightBackend, "launch", "restart: launch")
    timed(BrowserType, "launch_persistent_context", "launch_persistent_context")
    timed(RestartAccounting, "measure_logins", "restart: ledger measured")
    timed(RestartAccounting, "protect_unexplained", "restart: unexplained logins")
    timed(Conversations, "deliver", "ensure: facts saved, then told")
    timed(KeeperPersistence, "save", "store: save() calls")
    timed(SqliteStore, "save_keeper_rows", "store: save_keeper_rows")
    timed(PlaywrightSession, "cookies", "jar reads")
    timed(PlaywrightSession, "open_page", "tab: open_page")
    timed(PageActivity, "_install", "tab: input watch install")
    timed(BrowserContext, "new_page", "context.new_page")
    timed(PlaywrightSession, "_announce", "tab: on_page callbacks (Guard)")
    timed(PlaywrightSession, "goto", "tab: goto")


async def keeper_round(
    keeper: SessionKeeper[Any], profile: Path, urls: list[str], wait_close: bool
) -> Summary:
    """Kill; from the known death, every agent's ensure() and its tab reopened."""
    backend = keeper.backend
    assert isinstance(backend, PlaywrightBackend)
    old = backend.current
    assert old is not None
    closed = asyncio.Event()
    old.context.on("close", lambda _: closed.set())
    await asyncio.sleep(SETTLE_S)
    killed = time.perf_counter()
    kill(profile)
    await until(lambda: not keeper.alive, "the keeper to learn of the kill")
    if wait_close:
        await asyncio.wait_for(closed.wait(), 10)
    SPANS.clear()
    start, cpu = time.perf_counter(), time.process_time()

    async def agent(n: int) -> None:
        t0 = time.perf_counter()
        facts = await keeper.ensure(f"agent-{n}")
        t1 = time.perf_counter()
        SPANS.append(("agent: ensure", t0, t1))
        lost = facts.lost_tab
        assert lost is not None and lost.last_url is not None
        await keeper.tab(f"agent-{n}", lost.last_url)
        SPANS.append(("agent: tab(url)", t1, time.perf_counter()))

    await asyncio.gather(*(agent(n) for n in range(len(urls))))
    SPANS.append(("TOTAL", start, time.perf_counter()))
    SPANS.append(("CPU", start, start + time.process_time() - cpu))
    SPANS.append((KILLED, killed, start))
    return summarise(SPANS, start)


async def plain_round(
    pw: Playwright, context: BrowserContext, profile: Path, rules: str, urls: list[str]
) -> tuple[BrowserContext, Summary]:
    """Kill; from Playwright's close event, a relaunch and one new page + goto per URL."""
    closed = asyncio.Event()
    context.on("close", lambda _: closed.set())
    await asyncio.sleep(SETTLE_S)
    killed = time.perf_counter()
    kill(profile)
    await asyncio.wait_for(closed.wait(), 10)
    spans: list[Span] = []
    start, cpu = time.perf_counter(), time.process_time()
    context = await launch_plain(pw, profile, rules)
    spans.append(("launch", start, time.perf_counter()))

    async def agent(url: str) -> None:
        t0 = time.perf_counter()
        page = await context.new_page()
        t1 = time.perf_counter()
        spans.append(("new_page", t0, t1))
        await page.goto(url)
        spans.append(("goto", t1, time.perf_counter()))

    await asyncio.gather(*(agent(u) for u in urls))
    spans.append(("TOTAL", start, time.perf_counter()))
    spans.append(("CPU", start, start + time.process_time() - cpu))
    spans.append((KILLED, killed, start))
    return context, summarise(spans, start)


def summarise(spans: list[Span], start: float) -> Summary:
    """Per phase: first start, last end (ms from ``start``), summed ms, calls."""
    by: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for phase, a, b in spans:
        by[phase].append((a, b))
    out: Summary = {}
    for phase, items in by.items():
        total = sum(b - a for a, b in items) * 1e3
        if phase in (KILLED, "CPU"):
            out[phase] = (0.0, 0.0, total, 1.0)
            continue
        first = (min(a for a, _ in items) - start) * 1e3
        last = (max(b for _, b in items) - start) * 1e3
        out[phase] = (first, last, total, float(len(items)))
    return out


def report(title: str, rounds: list[Summary]) -> None:
    """Print the medians of each phase over ``rounds``."""
    print(f"\n{title} (medians over {len(rounds)} rounds; ms from the known death)")
    print(f"{'phase':40} {'from':>8} {'to':>8} {'sum':>8} {'calls':>6}")
    phases = {p for r in rounds for p in r}
    for p in sorted(phases, key=lambda p: statistics.median(r[p][0] for r in rounds if p in r)):
        vals = [r[p] for r in rounds if p in r]
        med = [statistics.median(v[i] for v in vals) for i in range(4)]
        print(f"{p:40} {med[0]:8.0f} {med[1]:8.0f} {med[2]:8.0f} {med[3]:6.0f}")


async def run(rounds: int, tabs: int, *, no_store: bool, wait_close: bool) -> None:
    """Interleaved rounds (as recovery.py), then the per-phase report for both sides."""
    instrument()
    ours: list[Summary] = []
    theirs: list[Summary] = []
    with tempfile.TemporaryDirectory(prefix="prof-recovery-") as tmp_name, LocalSites() as sites:
        tmp = Path(tmp_name)
        rules = sites.host_resolver_rules
        paths = ["/", "/guide", "/api", "/popup"]
        urls = [sites.url("docs.example", f"{paths[n % 4]}?tab={n}") for n in range(tabs)]
        async with SqliteStore(tmp / "keeper.db") as store, async_playwright() as pw:
            keeper = SessionKeeper(
                PlaywrightBackend(tmp / "keeper-profile", host_resolver_rules=rules),
                durability=Durability(store=None if no_store else store),
            )
            async with keeper:
                for n, url in enumerate(urls):
                    await keeper.ensure(f"agent-{n}")
                    await keeper.tab(f"agent-{n}", url)
                context = await launch_plain(pw, tmp / "plain-profile", rules)
                for url in urls:
                    await (await context.new_page()).goto(url)
                # One unmeasured round each: the first relaunch warms the disk cache.
                await keeper_round(keeper, tmp / "keeper-profile", urls, wait_close)
                context, _ = await plain_round(pw, context, tmp / "plain-profile", rules, urls)
                for n in range(rounds):
                    if n % 2 == 0:
                        ours.append(
                            await keeper_round(keeper, tmp / "keeper-profile", urls, wait_close)
                        )
                    context, summary = await plain_round(
                        pw, context, tmp / "plain-profile", rules, urls
                    )
                    theirs.append(summary)
                    if n % 2 == 1:
                        ours.append(
                            await keeper_round(keeper, tmp / "keeper-profile", urls, wait_close)
                        )
                    k, p = ours[-1], theirs[-1]
                    print(
                        f"round {n + 1}: keeper {k['TOTAL'][1]:.0f} ms "
                        f"(launch {k['restart: launch'][1]:.0f}, "
                        f"after it {k['TOTAL'][1] - k['restart: launch'][1]:.0f}), "
                        f"plain {p['TOTAL'][1]:.0f} ms (launch {p['launch'][1]:.0f}, "
                        f"after it {p['TOTAL'][1] - p['launch'][1]:.0f}); kill -> known: "
                        f"keeper {k[KILLED][2]:.0f}, plain {p[KILLED][2]:.0f}; "
                        f"CPU keeper {k['CPU'][2]:.0f}, plain {p['CPU'][2]:.0f}",
                        flush=True,
                    )
                await context.close()
    report("keeper", ours)
    report("plain Playwright", theirs)


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tabs", type=int, default=10)
    parser.add_argument("--no-store", action="store_true", help="a keeper without a store")
    parser.add_argument(
        "--wait-close", action="store_true", help="the keeper's clock starts at Playwright's close"
    )
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.tabs, no_store=args.no_store, wait_close=args.wait_close))


if __name__ == "__main__":
    main()
