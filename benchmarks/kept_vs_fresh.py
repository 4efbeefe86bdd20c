"""Row 2: a turn on the kept browser vs a fresh browser per turn, bare and with a navigation.

Kept: ``ensure(conv)`` + ``keeper.tab(conv)`` + one ``evaluate`` on the live browser.
Fresh: launch Chromium, open a page, the same ``evaluate``, close — what an agent pays
when it starts a browser per turn. The "navigation" variant adds one ``goto`` of a
loopback page to both. Rounds alternate the order; each round times ``--turns`` turns
of each. Prints one ``BENCH`` record per variant (kept/fresh, smaller is better) and a
``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.async_api import Playwright, async_playwright

from benchmarks._report import emit
from session_keeper import PlaywrightBackend, SessionKeeper, find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>turn</title><p>one page</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


async def fresh_turn(pw: Playwright, url: str | None) -> float:
    start = time.perf_counter()
    browser = await pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
    page = await browser.new_page()
    if url:
        await page.goto(url)
    await page.evaluate("1")
    elapsed = time.perf_counter() - start
    await browser.close()  # the close is not counted: an agent could leave it behind
    return elapsed * 1000


async def run(rounds: int, turns: int, url: str) -> dict[str, tuple[list[float], list[float]]]:
    """Per-round mean ms of kept and fresh turns, per variant."""
    out: dict[str, tuple[list[float], list[float]]] = {"bare": ([], []), "navigation": ([], [])}
    with tempfile.TemporaryDirectory(prefix="bench-kept-") as tmp:
        keeper = SessionKeeper(PlaywrightBackend(Path(tmp) / "p", executable_path=find_chromium()))
        async with keeper, async_playwright() as pw:
            await keeper.ensure("c")
            await keeper.tab("c")

            async def kept_turn(nav: str | None) -> float:
                start = time.perf_counter()
                await keeper.ensure("c")
                tab = await keeper.tab("c", nav)
                page = await keeper.unguarded_page("c")
                await page.evaluate("1")
                del tab
                return (time.perf_counter() - start) * 1000

            await kept_turn(url)  # warm-up both paths
            await fresh_turn(pw, url)
            for i in range(rounds):
                for variant, nav in (("bare", None), ("navigation", url)):
                    kept, fresh = out[variant]

                    async def kept_round(n: str | None = nav) -> float:
                        return statistics.mean([await kept_turn(n) for _ in range(turns)])

                    async def fresh_round(n: str | None = nav) -> float:
                        return statistics.mean([await fresh_turn(pw, n) for _ in range(turns)])

                    if i % 2 == 0:
                        kept.append(await kept_round())
                        fresh.append(await fresh_round())
                    else:
                        fresh.append(await fresh_round())
                        kept.append(await kept_round())
    return out


def main() -> None:
    """Run, print the BENCH records and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        out = asyncio.run(run(args.rounds, args.turns, url))
    finally:
        server.shutdown()
    result = []
    for variant, (kept, fresh) in out.items():
        ratios = [k / f for k, f in zip(kept, fresh, strict=True)]
        k, f = statistics.median(kept), statistics.median(fresh)
        emit(
            "2",
            compared=f"kept-browser turn vs fresh browser per turn ({variant})",
            ratios=ratios,
            goal=None,
            direction="<=",
            detail=f"kept {k:.1f} ms, fresh {f:.1f} ms (medians)",
        )
        result.append(f"{variant}_kept_ms={k:.1f} {variant}_fresh_ms={f:.1f}")
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
