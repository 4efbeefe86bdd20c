"""A tool's result reads the page's title and snapshot together (no browser needed)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from session_keeper.mcp._page import read_together


async def _after(seconds: float, value: str, started: list[str]) -> str:
    started.append(value)
    await asyncio.sleep(seconds)
    return value


async def _fails(seconds: float, message: str) -> str:
    await asyncio.sleep(seconds)
    raise RuntimeError(message)


async def test_both_reads_run_at_once_and_keep_their_order() -> None:
    started: list[str] = []
    loop = asyncio.get_running_loop()
    begun = loop.time()
    title, shot = await read_together(_after(0.5, "title", started), _after(0.5, "shot", started))
    assert (title, shot) == ("title", "shot")
    assert started == ["title", "shot"]
    # Together: about one wait, not two (one after the other takes 1 s at least).
    assert loop.time() - begun < 1.0


async def test_the_first_reads_error_wins_and_neither_is_left_unheard() -> None:
    unheard: list[object] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unheard.append(context))
    with pytest.raises(RuntimeError, match="title"):
        await read_together(_fails(0.05, "title"), _fails(0.01, "shot"))
    with pytest.raises(RuntimeError, match="shot"):
        await read_together(_after(0.01, "title", []), _fails(0.02, "shot"))
    gc.collect()
    await asyncio.sleep(0)
    assert unheard == []
