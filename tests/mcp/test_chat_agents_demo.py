"""``demos/chat_agents.py``: three chats through the MCP server on real Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

from demos.chat_agents import run
from session_keeper.testing import LocalSites

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(240)]


async def test_chat_demo_tells_each_restart_once_and_leaks_nothing(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """A kill and an idle sweep: every chat told of each once; the borrow read once, no leak."""
    report = await run(sites, tmp_path / "profile", executable_path=chromium_path)
    assert report.told_twice == 0
    assert report.leaked_requests == 0
    assert report.borrowed_reads == 1
    assert report.relaunches == 2 == report.kills + report.sweeps
    assert {c.name: c.told for c in report.chats} == {
        "billing": [2, 3],
        "research": [2, 3],
        "support": [2, 3],
    }
    assert report.restarts_told == 6
    refused = [line for c in report.chats for line in c.lines if "REFUSED" in line]
    assert len(refused) == 2  # research without a grant; support's second, used-up try
    assert report.result_line() == (
        f"RESULT conversations=3 tool_calls={report.tool_calls} restarts_told=6 "
        "told_twice=0 leaked_requests=0 relaunches=2"
    )
