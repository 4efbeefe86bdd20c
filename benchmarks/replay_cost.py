"""Rows 20–21: what recording a conversation's pages costs, per page, on real Chromium.

Three keepers side by side, open at once, each on its own browser and profile: recording
off; DOM snapshots (``SessionKeeper(replay=Replay(...))``: a masked snapshot after each
act, written to a directory); CDP screencast frames (``Page.startScreencast`` on the
conversation's page through a CDP session, JPEG quality 70, every frame acknowledged and
written to a directory: what a video-like recording costs). Each keeper's conversation
opens ``--pages`` pages of a local site (a 400-paragraph article with a form, its own
host per page) and on each page fills one input and clicks one button: one navigation and
two acts, timed together; the keepers take turns page by page, in an order that rotates.
After the pages, the PSS of each browser's whole process tree
(``/proc/<pid>/smaps_rollup``) and the bytes each recording wrote are read. Prints two
``BENCH`` records (per-round ratios of the median page time against recording off; PSS
and bytes per page as detail) and a ``RESULT`` line.

Usage: ``python benchmarks/replay_cost.py [--rounds N] [--pages N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.server
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from benchmarks.memory_per_conversation import browser_pid, tree_pss_kib
from session_keeper import IdleTimeouts, PlaywrightBackend, Replay, SessionKeeper, find_chromium

RULES = "MAP *.test 127.0.0.1"
MODES = ("off", "dom", "screencast")

_ARTICLE = "".join(
    f"<p>Paragraph {i}: the quick brown fox jumps over the lazy dog, again and again.</p>"
    for i in range(400)
)
_PAGE = (
    "<!doctype html><html><head><title>Article</title><style>p{margin:4px}</style></head>"
    "<body><h1>An article</h1><form><input id='q' type='text'><input type='password'>"
    "<button id='go' type='button' onclick=\"document.querySelector('h1').textContent="
    "'Clicked'\">Go</button></form>" + _ARTICLE + "</body></html>"
).encode()


class _Site(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(_PAGE)))
        self.end_headers()
        self.wfile.write(_PAGE)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class Side:
    """One keeper on its own browser, recording in one ``mode``."""

    def __init__(self, mode: str, r: int, tmp: Path) -> None:
        self.mode = mode
        self.profile = tmp / f"{mode}-{r}"
        self.out = tmp / f"{mode}-{r}-recording"
        self.out.mkdir()
        replay = Replay(directory=self.out, max_frames=10_000, max_bytes=10**10)
        self.keeper: SessionKeeper[Any] = SessionKeeper(
            PlaywrightBackend(
                self.profile, executable_path=find_chromium(), host_resolver_rules=RULES
            ),
            idle_timeouts=IdleTimeouts(browser=timedelta(hours=1)),
            replay=replay if mode == "dom" else None,
        )
        self.times: list[float] = []
        self.cdp: Any = None
        self.frames = 0

    async def start(self) -> None:
        await self.keeper.__aenter__()
        await self.keeper.ensure("c")
        self.tab = await self.keeper.tab("c")
        if self.mode != "screencast":
            return
        page = await self.keeper.unguarded_page("c")
        cdp = self.cdp = await page.context.new_cdp_session(page)

        def on_frame(params: dict[str, Any]) -> None:
            self.frames += 1
            (self.out / f"{self.frames:08d}.jpg").write_bytes(base64.b64decode(params["data"]))
            asyncio.get_running_loop().create_task(
                cdp.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]})
            )

        cdp.on("Page.screencastFrame", on_frame)
        await cdp.send(
            "Page.startScreencast",
            {"format": "jpeg", "quality": 70, "maxWidth": 1280, "maxHeight": 720},
        )

    async def page(self, url: str) -> None:
        start = time.perf_counter()
        await self.tab.goto(url)
        await self.tab.fill("#q", "some text")
        await self.tab.click("#go")
        self.times.append(time.perf_counter() - start)

    async def finish(self) -> tuple[float, int, int]:
        """Median page time (s), the browser tree's PSS (KiB), recording bytes."""
        pss = tree_pss_kib(browser_pid(str(self.profile)))
        if self.cdp is not None:
            await self.cdp.send("Page.stopScreencast")
        await self.keeper.aclose()
        return statistics.median(self.times), pss, _bytes(self.out)


async def run(rounds: int, pages: int, port: int) -> dict[str, list[tuple[float, int, int]]]:
    """Per mode, per round: (median page seconds, PSS KiB, bytes written).

    In a round the three keepers run at once and take turns page by page (the order
    rotating), so the machine's noise falls on each alike.
    """
    results: dict[str, list[tuple[float, int, int]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        for r in range(rounds):
            sides = [Side(mode, r, Path(tmp)) for mode in MODES]
            for side in sides:
                await side.start()
            for i in range(pages):
                k = (i + r) % 3
                for side in sides[k:] + sides[:k]:
                    await side.page(f"http://{side.mode}{i}.test:{port}/")
            await asyncio.sleep(1)  # the last frames land before memory is read
            for side in sides:
                results[side.mode].append(await side.finish())
    return results


def main() -> None:
    """Run, print the BENCH records and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=10)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        results = asyncio.run(run(args.rounds, args.pages, server.server_address[1]))
    finally:
        server.shutdown()
    off = results["off"]
    figures: dict[str, tuple[float, float, float]] = {}
    for row, mode, what in (
        ("20", "dom", "DOM snapshots (masked in the page)"),
        ("21", "screencast", "CDP screencast frames (JPEG 70)"),
    ):
        mine = results[mode]
        time_ratios = [m[0] / o[0] for m, o in zip(mine, off, strict=True)]
        pss_ratios = [m[1] / o[1] for m, o in zip(mine, off, strict=True)]
        per_page = statistics.median(m[2] for m in mine) / args.pages
        figures[mode] = (
            statistics.median(time_ratios),
            statistics.median(pss_ratios),
            per_page,
        )
        emit(
            row,
            compared=f"replay by {what} vs recording off: time per page (goto + fill + click)",
            ratios=time_ratios,
            goal=1.10 if mode == "dom" else None,
            direction="<=",
            detail=(
                f"{statistics.median(m[0] for m in mine) * 1000:.0f} ms vs "
                f"{statistics.median(o[0] for o in off) * 1000:.0f} ms per page; browser PSS "
                f"{statistics.median(pss_ratios):.2f}x "
                f"({statistics.median(m[1] for m in mine) / 1024:.0f} vs "
                f"{statistics.median(o[1] for o in off) / 1024:.0f} MiB); "
                f"{per_page / 1024:.0f} KiB written per page (medians of {args.rounds} rounds,"
                f" {args.pages} pages each)"
            ),
        )
    dom, cast = figures["dom"], figures["screencast"]
    print(
        f"RESULT dom_time_ratio={dom[0]:.3f} dom_pss_ratio={dom[1]:.3f} "
        f"dom_kib_per_page={dom[2] / 1024:.1f} screencast_time_ratio={cast[0]:.3f} "
        f"screencast_pss_ratio={cast[1]:.3f} screencast_kib_per_page={cast[2] / 1024:.1f} "
        f"rounds={args.rounds} pages={args.pages}"
    )


if __name__ == "__main__":
    main()
