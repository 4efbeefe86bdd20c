"""Row 7: marginal memory (PSS) per conversation on one browser vs a browser per conversation.

PSS is summed from ``/proc/<pid>/smaps_rollup`` over Chromium's whole process tree (the
browser and every descendant: zygotes, GPU, network, renderers). One browser: the tree
with one conversation, then with ``--extra`` more, each on its own site (host names
mapped to loopback), so each gets its own renderer; marginal = the difference / extra.
A browser per conversation: the tree of a fresh browser with one page on one site.
Rounds alternate the order. Prints a ``BENCH`` record and a ``RESULT`` line.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.async_api import async_playwright

from benchmarks._report import emit
from session_keeper import PlaywrightBackend, SessionKeeper, find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS

RULES = "MAP *.test 127.0.0.1"


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>site</title><p>a page with a little script</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _ppids() -> dict[int, int]:
    out: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            out[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def browser_pid(marker: str) -> int:
    """The browser process: a Chromium whose command line names ``marker``, no --type."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(marker.encode() in a for a in cmd) and not any(
                a.startswith(b"--type=") for a in cmd
            ):
                return int(d.name)
    raise RuntimeError(f"no Chromium browser process with {marker!r} in its command line")


def tree_pss_kib(root: int) -> int:
    """PSS in KiB of ``root`` and all its descendants."""
    ppids = _ppids()
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in ppids.items() if pp == p and c not in tree]
        tree.update(kids)
        frontier += kids
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


async def run(rounds: int, extra: int, port: int) -> tuple[list[float], list[float]]:
    """Per-round marginal KiB per conversation and KiB per extra browser."""
    marginal: list[float] = []
    per_browser: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp:

        async def one_browser(r: int) -> float:
            profile = Path(tmp) / f"keeper-{r}"
            keeper = SessionKeeper(
                PlaywrightBackend(
                    profile, executable_path=find_chromium(), host_resolver_rules=RULES
                )
            )
            async with keeper:
                await keeper.ensure("c0")
                await keeper.tab("c0", f"http://site0.test:{port}/")
                await asyncio.sleep(1)
                pid = browser_pid(str(profile))
                base = tree_pss_kib(pid)
                for i in range(1, extra + 1):
                    await keeper.ensure(f"c{i}")
                    await keeper.tab(f"c{i}", f"http://site{i}.test:{port}/")
                await asyncio.sleep(1)
                return (tree_pss_kib(pid) - base) / extra

        async def fresh_browser(r: int) -> float:
            marker = f"bench-mem-fresh-{r}"
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(
                    executable_path=find_chromium(),
                    args=[*CHROMIUM_ARGS, f"--host-resolver-rules={RULES}", f"--{marker}"],
                )
                page = await browser.new_page()
                await page.goto(f"http://site0.test:{port}/")
                await asyncio.sleep(1)
                kib = tree_pss_kib(browser_pid(marker))
                await browser.close()
                return float(kib)

        for r in range(rounds):
            if r % 2 == 0:
                marginal.append(await one_browser(r))
                per_browser.append(await fresh_browser(r))
            else:
                per_browser.append(await fresh_browser(r))
                marginal.append(await one_browser(r))
    return marginal, per_browser


def main() -> None:
    """Run, print the BENCH record and the RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--extra", type=int, default=5)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        marginal, per_browser = asyncio.run(run(args.rounds, args.extra, server.server_address[1]))
    finally:
        server.shutdown()
    ratios = [m / b for m, b in zip(marginal, per_browser, strict=True)]
    m, b = statistics.median(marginal), statistics.median(per_browser)
    emit(
        "7",
        compared="marginal PSS per conversation (own site) on one browser vs a browser each",
        ratios=ratios,
        goal=0.1,
        direction="<=",
        detail=f"{m / 1024:.1f} MiB per conversation, {b / 1024:.1f} MiB per browser (medians)",
    )
    print(f"RESULT marginal_kib={m:.0f} per_browser_kib={b:.0f} ratio={m / b:.3f}")


if __name__ == "__main__":
    main()
