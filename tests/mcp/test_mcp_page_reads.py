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


async def _meets(mine: asyncio.Event, theirs: asyncio.Event, value: str) -> str:
    # Returns only once the other read has started: reads in turn would never meet.
    mine.set()
    await theirs.wait()
    return value


async def _fails(seconds: float, message: str) -> str:
    await asyncio.sleep(seconds)
    raise RuntimeError(message)


async def test_both_reads_run_at_once_and_keep_their_order() -> None:
    """The title and the snapshot are read together (each waits for the other to have
    started), and come back in the order asked."""
    one, two = asyncio.Event(), asyncio.Event()
    title, shot = await asyncio.wait_for(
        read_together(_meets(one, two, "title"), _meets(two, one, "shot")), timeout=10
    )
    assert (title, shot) == ("title", "shot")


async def test_the_first_reads_error_wins_and_neither_is_left_unheard() -> None:
    """When a read fails, the title's error is raised first, as reading in turn would,
    and no failed read is left for asyncio to report as never retrieved."""
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
