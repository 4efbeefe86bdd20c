"""Row 4: after a crash, the keeper's recovery vs what a plain Playwright program does.

    python benchmarks/recovery.py [--rounds 7] [--tabs 10]

Both sides run ``--tabs`` agents (one page each, on distinct local pages) on one
persistent Chromium profile; the browser's main process is SIGKILLed from outside and
the clock starts once each side knows it is dead (detection is row 3).

- **keeper**: every agent calls ``ensure(conv)`` (the first one relaunches; each hears
  its lost tab and its last URL once, saved to a SQLite store before it is told) and
  reopens the tab there with ``keeper.tab(conv, facts.lost_tab.last_url)``;
- **plain**: ``launch_persistent_context`` on the same profile with the same flags,
  then ``--tabs`` ``new_page()`` + ``goto(url)`` to URLs it already knew;
- **floor** (unless ``--no-floor``): the plain program plus the browser work the keeper's
  guarantees need and nothing of the keeper: service and shared workers blocked, the
  input watch (its binding and script, context-wide) in place before the first page, the
  jar read once at launch (what no sign-in can claim) and after each navigation (the
  login evidence's baseline). It is what a keeper with no Python, no store and no
  waiting of its own would take; the keeper over it is the keeper's own cost.

The agents run concurrently on every side (each tab's ``new_page`` + ``goto`` beside the
others': the browser takes them in parallel). Rounds alternate which side goes first, and
every kill comes ``SETTLE_S`` after the last recovery (of either side) ended, so neither
side meets the other's browser still busy with the tabs it just loaded. The ratio is
keeper / plain per round (≤ 1.0 is the goal).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, Playwright, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper import Durability, PlaywrightBackend, SessionKeeper, find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper._browser.page_activity import _WATCH_JS, BINDING
from session_keeper._browser.process import find_browser_pid
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites

#: Seconds each recovery's browser is left to settle before the next kill: a browser
#: that just loaded its tabs goes on working for a while (measured without this pause,
#: whichever side went second in a round was 15-20 % slower).
SETTLE_S = 2.0


def kill(profile: Path) -> None:
    """SIGKILL the Chromium on ``profile`` from outside, as a crash would."""
    pid = find_browser_pid(profile)
    if pid is None:
        raise RuntimeError(f"no Chromium runs on {profile}")
    os.kill(pid, signal.SIGKILL)


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Poll ``predicate()`` every 5 ms for up to 10 s."""
    deadline = time.monotonic() + 10
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def keeper_round(keeper: SessionKeeper[Any], profile: Path, urls: list[str]) -> float:
    """Kill, wait for the keeper to know, then time ensure() + reopen at the last URLs."""
    await asyncio.sleep(SETTLE_S)
    kill(profile)
    await until(lambda: not keeper.alive, "the keeper to learn of the kill")
    start = time.perf_counter()

    async def agent(n: int) -> str:
        facts = await keeper.ensure(f"agent-{n}")
        lost = facts.lost_tab
        if not facts.restarted or lost is None or lost.last_url is None:
            raise RuntimeError(f"agent-{n} was not told its lost tab: {facts}")
        await keeper.tab(f"agent-{n}", lost.last_url)
        return lost.last_url

    reopened = await asyncio.gather(*(agent(n) for n in range(len(urls))))
    took = time.perf_counter() - start
    if reopened != urls:
        raise RuntimeError(f"reopened {reopened}, expected {urls}")
    return took


async def launch_plain(pw: Playwright, profile: Path, rules: str) -> BrowserContext:
    """The plain program's browser: same Chromium, same flags, same kind of profile."""
    return await pw.chromium.launch_persistent_context(
        str(profile),
        executable_path=find_chromium(),
        args=[*CHROMIUM_ARGS, f"--host-resolver-rules={rules}"],
        headless=True,
    )


async def plain_round(
    pw: Playwright, context: BrowserContext, profile: Path, rules: str, urls: list[str]
) -> tuple[float, BrowserContext]:
    """Kill, wait for Playwright's close, then time a relaunch + one navigation per URL."""
    closed = asyncio.Event()
    context.on("close", lambda _: closed.set())
    await asyncio.sleep(SETTLE_S)
    kill(profile)
    await asyncio.wait_for(closed.wait(), 10)
    start = time.perf_counter()
    context = await launch_plain(pw, profile, rules)

    async def agent(url: str) -> None:
        page = await context.new_page()
        await page.goto(url)

    await asyncio.gather(*(agent(u) for u in urls))
    took = time.perf_counter() - start
    return took, context


async def launch_floor(pw: Playwright, profile: Path, rules: str) -> BrowserContext:
    """The floor's browser: as the keeper's backend launches it (workers blocked)."""
    return await pw.chromium.launch_persistent_context(
        str(profile),
        executable_path=find_chromium(),
        args=[*CHROMIUM_ARGS, "--disable-shared-workers", f"--host-resolver-rules={rules}"],
        headless=True,
        service_workers="block",
    )


async def floor_round(
    pw: Playwright, context: BrowserContext, profile: Path, rules: str, urls: list[str]
) -> tuple[float, BrowserContext]:
    """As :func:`plain_round`, with the browser work the keeper's guarantees need."""
    closed = asyncio.Event()
    context.on("close", lambda _: closed.set())
    await asyncio.sleep(SETTLE_S)
    kill(profile)
    await asyncio.wait_for(closed.wait(), 10)
    start = time.perf_counter()
    context = await launch_floor(pw, profile, rules)
    await asyncio.gather(
        context.expose_binding(BINDING, lambda *_: None),
        context.add_init_script(_WATCH_JS),
        context.cookies(),
    )

    async def agent(url: str) -> None:
        page = await context.new_page()
        await page.goto(url)
        await context.cookies()

    await asyncio.gather(*(agent(u) for u in urls))
    took = time.perf_counter() - start
    return took, context


async def run(
    rounds: int, tabs: int, *, floor: bool = True
) -> tuple[list[float], list[float], list[float]]:
    """Interleaved rounds; per-round seconds for the keeper, plain Playwright and the floor
    (empty without ``floor``)."""
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp_name, LocalSites() as sites:
        tmp = Path(tmp_name)
        rules = sites.host_resolver_rules
        paths = ["/", "/guide", "/api", "/popup"]
        urls = [sites.url("docs.example", f"{paths[n % 4]}?tab={n}") for n in range(tabs)]
        ours: list[float] = []
        plain: list[float] = []
        floors: list[float] = []
        async with SqliteStore(tmp / "keeper.db") as store, async_playwright() as pw:
            keeper = SessionKeeper(
                PlaywrightBackend(tmp / "keeper-profile", host_resolver_rules=rules),
                durability=Durability(store=store),
            )
            async with keeper:
                for n, url in enumerate(urls):
                    await keeper.ensure(f"agent-{n}")
                    await keeper.tab(f"agent-{n}", url)
                context = await launch_plain(pw, tmp / "plain-profile", rules)
                for url in urls:
                    await (await context.new_page()).goto(url)
                floor_profile = tmp / "floor-profile"
                floor_context = await launch_floor(pw, floor_profile, rules) if floor else None
                if floor_context is not None:
                    for url in urls:
                        await (await floor_context.new_page()).goto(url)
                # One unmeasured round each: the first relaunch warms the disk cache.
                await keeper_round(keeper, tmp / "keeper-profile", urls)
                _, context = await plain_round(pw, context, tmp / "plain-profile", rules, urls)
                if floor_context is not None:
                    _, floor_context = await floor_round(
                        pw, floor_context, floor_profile, rules, urls
                    )
                for n in range(rounds):
                    if n % 2 == 0:
                        ours.append(await keeper_round(keeper, tmp / "keeper-profile", urls))
                    took, context = await plain_round(
                        pw, context, tmp / "plain-profile", rules, urls
                    )
                    plain.append(took)
                    if floor_context is not None:
                        took, floor_context = await floor_round(
                            pw, floor_context, floor_profile, rules, urls
                        )
                        floors.append(took)
                    if n % 2 == 1:
                        ours.append(await keeper_round(keeper, tmp / "keeper-profile", urls))
                    shown = f", floor {floors[-1] * 1e3:.0f} ms" if floors else ""
                    print(
                        f"round {n + 1}: keeper {ours[-1] * 1e3:.0f} ms, "
                        f"plain {plain[-1] * 1e3:.0f} ms{shown}, "
                        f"ratio {ours[-1] / plain[-1]:.2f}",
                        flush=True,
                    )
                await context.close()
                if floor_context is not None:
                    await floor_context.close()
    return ours, plain, floors


def main() -> None:
    """Parse options, run, emit the row."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tabs", type=int, default=10)
    parser.add_argument(
        "--no-floor", action="store_true", help="leave out the floor (plain + the guarantees' work)"
    )
    args = parser.parse_args()
    ours, plain, floors = asyncio.run(run(args.rounds, args.tabs, floor=not args.no_floor))
    floor = ""
    if floors:
        over_plain = statistics.median(f / p for f, p in zip(floors, plain, strict=True))
        under_ours = statistics.median(a / f for a, f in zip(ours, floors, strict=True))
        floor = (
            f"; floor (plain + the browser work the keeper's guarantees need) "
            f"{statistics.median(floors) * 1e3:.0f} ms, floor/plain {over_plain:.2f}x, "
            f"keeper/floor {under_ours:.2f}x"
        )
    emit(
        "4",
        compared=f"relaunch + {args.tabs} lost tabs reopened at their last URLs (keeper) "
        f"vs relaunch + {args.tabs} navigations (plain Playwright)",
        ratios=[a / b for a, b in zip(ours, plain, strict=True)],
        goal=1.0,
        direction="<=",
        detail=f"keeper {statistics.median(ours) * 1e3:.0f} ms, "
        f"plain {statistics.median(plain) * 1e3:.0f} ms (medians; from the known death){floor}",
    )


if __name__ == "__main__":
    main()
