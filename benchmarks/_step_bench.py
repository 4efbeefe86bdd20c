"""What the per-step engine benchmarks share (``temporal_step.py``, ``dbos_step.py``): the
one loopback page the arms load, the bare arm's browser and its work, the floor arm's
store, the rounds with the arms' order rotating, and the BENCH records with the RESULT line.

Three arms run on the same engine: *integration* (the keeper's browser step), *bare* (the
same Playwright work in a plain activity / step) and *floor*: the bare work plus the one
durable commit per step the integration cannot skip. A step's turn is recorded in the store
before the step is told its facts (so a retry is told the same ones, and a fact is never
told twice): one SQLite commit, fsynced, on the same disk. The floor shows how much of the
integration's cost over *bare* is that commit, and the integration is held to ≤ 1.10× of it.
"""

from __future__ import annotations

import contextlib
import http.server
import statistics
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from playwright.async_api import Page, async_playwright

from benchmarks._report import emit
from session_keeper import find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper.stores import SqliteStore
from session_keeper.testing import StoreOperation, StoreStatement, run_store_operation

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
    """The bare and floor arms' browser (one Playwright page, launched once) and the
    floor arm's store."""

    page: Page | None = None
    store: SqliteStore | None = None


@contextlib.asynccontextmanager
async def bare_browser(floor_db: Path) -> AsyncIterator[None]:
    """Launch the bare arm's Chromium (the same build the keeper finds) and open the floor
    arm's store at ``floor_db`` for the block."""
    async with async_playwright() as pw, SqliteStore(floor_db) as store:
        browser = await pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        Bare.page = await browser.new_page()
        Bare.store = store
        try:
            yield
        finally:
            Bare.page = Bare.store = None
            await browser.close()


async def bare_work(url: str) -> int:
    """The bare arm's step: the same goto + evaluate with nothing around it."""
    assert Bare.page is not None
    await Bare.page.goto(url)
    answer: int = await Bare.page.evaluate("1 + 1")
    return answer


def _turn_record() -> StoreOperation[None]:
    yield StoreStatement(
        "floor_commit",
        "INSERT INTO keeper_heads (keeper_id, body, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (keeper_id) DO UPDATE SET body = excluded.body, "
        "updated_at = excluded.updated_at",
        ("floor", '{"turn": "t"}', datetime.now(UTC)),
        answer="none",
    )


async def floor_work(url: str) -> int:
    """The floor arm's step: the bare work, then one durable commit (a turn's record)."""
    assert Bare.store is not None
    answer = await bare_work(url)
    await run_store_operation(Bare.store, _turn_record)
    return answer


async def rotate(arms: Mapping[str, Timed], rounds: int, steps: int) -> dict[str, list[float]]:
    """A warm-up of each arm, then ``rounds`` rounds of ``steps`` steps, the arms' order
    rotating between rounds (each arm goes first as often). Per-round ms per step, by arm."""
    names = list(arms)
    out: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        await arms[name](2)  # warm-up: the launch, the first connections
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            out[name].append(await arms[name](steps))
    return out


def report(row: str, compared: str, ms: Mapping[str, list[float]], said: str) -> None:
    """Emit row ``row``'s BENCH records (integration vs bare, and vs the floor; goals
    ≤ 1.10×) and print the RESULT line, ``said`` appended."""
    kept, bare, floor = ms["integration"], ms["bare"], ms["floor"]
    ratios = [k / b for k, b in zip(kept, bare, strict=True)]
    to_floor = [k / f for k, f in zip(kept, floor, strict=True)]
    k, b, f = (statistics.median(x) for x in (kept, bare, floor))
    emit(
        row,
        compared=compared,
        ratios=ratios,
        goal=1.10,
        direction="<=",
        detail=f"integration {k:.1f} ms, bare {b:.1f} ms, floor {f:.1f} ms per step (medians)",
    )
    emit(
        row,
        compared=f"{compared.split(':')[0]}: integration vs bare + one durable commit (floor)",
        ratios=to_floor,
        goal=1.10,
        direction="<=",
        detail=f"the floor is {f / b:.2f}x bare (one fsynced SQLite commit per step)",
    )
    print(
        f"RESULT integration_ms={k:.1f} bare_ms={b:.1f} floor_ms={f:.1f} "
        f"ratio={statistics.median(ratios):.2f} to_floor={statistics.median(to_floor):.2f} "
        f"{said}"
    )
