"""What the per-step engine benchmarks share (``temporal_step.py``, ``dbos_step.py``): the
one loopback page both arms load, the bare arm's browser and its work, the rounds with the
arms' order alternating, and the BENCH record with the RESULT line."""

from __future__ import annotations

import contextlib
import http.server
import statistics
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from playwright.async_api import Page, async_playwright

from benchmarks._report import emit
from session_keeper import find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS

#: Runs one workflow of ``n`` steps of one arm; returns ms per step.
Timed = Callable[[int], Awaitable[float]]


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>step</title><p>one page</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def one_page() -> Iterator[str]:
    """The URL of one small page served on loopback while the block runs."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


class Bare:
    """The bare arm's browser: one Playwright page, launched once."""

    page: Page | None = None


@contextlib.asynccontextmanager
async def bare_browser() -> AsyncIterator[None]:
    """Launch the bare arm's Chromium (the same build the keeper finds) for the block."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        Bare.page = await browser.new_page()
        try:
            yield
        finally:
            Bare.page = None
            await browser.close()


async def bare_work(url: str) -> int:
    """The bare arm's step: the same goto + evaluate with nothing around it."""
    assert Bare.page is not None
    await Bare.page.goto(url)
    answer: int = await Bare.page.evaluate("1 + 1")
    return answer


async def alternate(
    kept: Timed, bare: Timed, rounds: int, steps: int
) -> tuple[list[float], list[float]]:
    """A warm-up of each arm, then ``rounds`` rounds of ``steps`` steps, the arms' order
    alternating between rounds. Per-round ms per step: (integration, bare)."""
    kept_ms: list[float] = []
    bare_ms: list[float] = []
    await kept(2)  # warm-up: the launch, the first connections
    await bare(2)
    for i in range(rounds):
        if i % 2 == 0:
            kept_ms.append(await kept(steps))
            bare_ms.append(await bare(steps))
        else:
            bare_ms.append(await bare(steps))
            kept_ms.append(await kept(steps))
    return kept_ms, bare_ms


def report(row: str, compared: str, kept: list[float], bare: list[float], said: str) -> None:
    """Emit row ``row``'s BENCH record (goal ≤ 1.10×) and print the RESULT line, ``said``
    appended."""
    ratios = [k / b for k, b in zip(kept, bare, strict=True)]
    k, b = statistics.median(kept), statistics.median(bare)
    emit(
        row,
        compared=compared,
        ratios=ratios,
        goal=1.10,
        direction="<=",
        detail=f"integration {k:.1f} ms, bare {b:.1f} ms per step (medians)",
    )
    print(
        f"RESULT integration_ms={k:.1f} bare_ms={b:.1f} "
        f"ratio={statistics.median(ratios):.2f} {said}"
    )
