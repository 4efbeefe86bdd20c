"""What a tab's console said since the model last looked, as Playwright MCP's ``### Events``
tell it: lines of a ``console-*.log`` in the output directory, or the entries inline."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Grant, Guard, SessionKeeper
from session_keeper._security.credentials import Secret
from session_keeper.errors import InvalidArgument
from session_keeper.mcp import KeeperMCP
from session_keeper.mcp._console_log import INLINE_ENTRIES
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, page_server, structured, text
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]

CANARY = "canary-console-7f3a91"
PAGES = {
    "/load": "<script>console.warn('Warning message'); console.error('Error message1');"
    "console.error('Error message2');</script><p>loaded</p>",
    "/button": "<button onclick=\"console.error('Button clicked')\">Click me</button>",
    "/other": "<script>console.error('Other page message')</script><p>other</p>",
    "/levels": "<script>console.log('a log'); console.error('an error');"
    "console.debug('a debug')</script>",
    "/secret": f"<script>console.log('token is {CANARY}')</script>",
}
EVENTS = re.compile(r"### Events\n- New console entries: (\S+?\.log)#L(\d+)(?:-L(\d+))?")


@pytest.fixture
def pages() -> Iterator[str]:
    """Pages that log as they load, served on loopback; yields the origin."""
    with page_server(PAGES) as origin:
        yield origin


def _told(result_text: str) -> tuple[Path, int, int]:
    """The log file and the line range a result's Events name (links are relative to
    the server's directory)."""
    m = EVENTS.search(result_text)
    assert m is not None, result_text
    first = int(m.group(2))
    return Path.cwd() / m.group(1), first, int(m.group(3) or first)


async def _go(client: Any, url: str, conversation: str = "t") -> Any:
    return await call(client, "browser_navigate", {"url": url}, conversation=conversation)


def _logs(directory: Path) -> list[Path]:
    return sorted(directory.glob("**/console-*.log"))


async def test_a_result_names_the_console_lines_logged_since_the_last_result(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str, tmp_path: Path
) -> None:
    """With an output directory each tab's console goes to a console-*.log there, in
    Playwright MCP's line format, and each result names only the lines new since the
    last one; browser_navigate starts the next document's log."""
    out = tmp_path / "out"
    async with served(playwright_backend, output_dir=out) as (_keeper, client):
        loaded = await _go(client, f"{pages}/load")
        log, first, last = _told(text(loaded))
        assert (first, last) == (1, 3)
        assert log.parent == out.resolve() and re.fullmatch(r"console-.+\.log", log.name)
        lines = log.read_text(encoding="utf-8").splitlines()
        warned = r"\[ *\d+ms\] \[WARNING\] Warning message @ http://127\.0\.0\.1:\d+/load:\d+"
        assert re.fullmatch(warned, lines[0]), lines
        assert "[ERROR] Error message2" in lines[2]
        assert structured(loaded)["events"].startswith("- New console entries:")

        quiet = await call(client, "browser_snapshot", conversation="t")
        assert "### Events" not in text(quiet)

        await call(client, "browser_navigate", {"url": f"{pages}/button"}, conversation="t")
        snap = str(structured(await call(client, "browser_snapshot", conversation="t"))["snapshot"])
        ref = re.search(r"button \"Click me\" \[ref=((?:f\d+)?e\d+)\]", snap)
        assert ref is not None, snap
        for expected in (1, 2):
            clicked = await call(
                client, "browser_click", {"element": "Click me", "target": ref.group(1)},
                conversation="t",
            )  # fmt: skip
            second_log, first, last = _told(text(clicked))
            assert (first, last) == (expected, expected)
        assert len(_logs(out)) == 2  # one per navigated document
        assert second_log.read_text(encoding="utf-8").count("Button clicked") == 2


async def test_the_console_log_is_written_as_the_messages_arrive(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str, tmp_path: Path
) -> None:
    """A message is in the log file before any later result asks for it."""
    out = tmp_path / "out"
    async with served(playwright_backend, output_dir=out) as (_keeper, client):
        await call(client, "browser_navigate", {"url": f"{pages}/none"}, conversation="t")
        said = "() => { for (let i = 0; i < 5; i++) console.error('Evaluated message ' + i); }"
        await call(client, "browser_evaluate", {"function": said}, conversation="t")
        logs: list[Path] = []
        for _ in range(100):  # the messages may still be on their way from the browser
            logs = list(out.glob("console-*.log"))
            if logs and "Evaluated message 4" in logs[0].read_text(encoding="utf-8"):
                break
            await asyncio.sleep(0.05)
        assert len(logs) == 1
        content = logs[0].read_text(encoding="utf-8")
        assert all(f"Evaluated message {i}" in content for i in range(5)), content


async def test_console_level_keeps_only_messages_at_least_that_severe(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str, tmp_path: Path
) -> None:
    """console_level="error" tells of errors only; "debug" of every message."""
    for level, shown, hidden in (
        ("error", ["an error"], ["a log", "a debug"]),
        ("debug", ["an error", "a log", "a debug"], []),
    ):
        out = tmp_path / level
        async with served(playwright_backend, output_dir=out, console_level=level) as (_k, client):
            loaded = await call(
                client, "browser_navigate", {"url": f"{pages}/levels"}, conversation="t"
            )
            _told(text(loaded))
            (log,) = out.glob("console-*.log")
            content = log.read_text(encoding="utf-8")
            assert all(s in content for s in shown) and not any(h in content for h in hidden)


async def test_without_an_output_directory_the_new_entries_are_listed_in_the_result(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str, tmp_path: Path
) -> None:
    """With no directory nothing is written: the result lists the newest entries (at
    most INLINE_ENTRIES, saying how many came before them), and the next result none."""
    async with served(playwright_backend) as (_keeper, client):
        loaded = await _go(client, f"{pages}/load")
        listed = "### Events\n- New console entries (3):\n  - [WARNING] Warning message @ "
        assert listed in text(loaded)
        many = f"() => {{ for (let i = 0; i < {INLINE_ENTRIES + 5}; i++) console.log('m' + i); }}"
        # The browser sends a script's messages before the script's answer.
        said = await call(client, "browser_evaluate", {"function": many}, conversation="t")
        events = structured(said)["events"]
        assert f"  - [LOG] m{INLINE_ENTRIES + 4} @" in events and "m4 @" not in events, events
        assert events.count("\n  - ") == INLINE_ENTRIES + 1  # the entries and the "earlier"
        again = await call(client, "browser_snapshot", conversation="t")
        assert "### Events" not in text(again)
    assert not _logs(tmp_path)


async def test_a_logged_secret_is_shown_by_its_name_never_written(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str, tmp_path: Path
) -> None:
    """A --secrets value a page logs is <secret>NAME</secret> in the log file and in the
    result: the canary is in neither."""
    out = tmp_path / "out"
    secrets = {"API_TOKEN": Secret(CANARY)}
    async with served(playwright_backend, output_dir=out, secrets=secrets) as (_k, client):
        loaded = await _go(client, f"{pages}/secret")
        _told(text(loaded))
        (log,) = out.glob("console-*.log")
        content = log.read_text(encoding="utf-8")
        assert "token is <secret>API_TOKEN</secret>" in content
        assert CANARY not in content and CANARY not in text(loaded)
    async with served(playwright_backend, secrets=secrets) as (_k, client):
        inline = await _go(client, f"{pages}/secret")
        assert "token is <secret>API_TOKEN</secret>" in text(inline)
        assert CANARY not in text(inline) and CANARY not in str(structured(inline))


async def test_another_conversations_console_is_never_in_a_result(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str
) -> None:
    """Conversation u's page logging tells conversation t nothing."""
    async with served(playwright_backend) as (_keeper, client):
        await call(client, "browser_navigate", {"url": f"{pages}/none"}, conversation="t")
        other = await call(client, "browser_navigate", {"url": f"{pages}/other"}, conversation="u")
        assert "Other page message" in text(other)
        mine = await call(client, "browser_snapshot", conversation="t")
        assert "Other page message" not in text(mine)


def test_an_unknown_console_level_is_refused(playwright_backend: BackendFactory) -> None:
    """KeeperMCP(console_level=) takes Playwright MCP's four levels only."""
    keeper = SessionKeeper(playwright_backend(), grants=[Grant("billing", "billing.example")])
    Guard(keeper)
    with pytest.raises(InvalidArgument, match="console level is one of error, warning"):
        KeeperMCP(keeper, console_level="verbose")


async def test_with_no_snapshots_and_no_directory_results_tell_of_no_console_entries(
    playwright_backend: BackendFactory, sites: LocalSites, pages: str
) -> None:
    """action_snapshots="none" (as few tokens as may be) lists no entries inline, as
    Playwright MCP's --snapshot-mode none; browser_console_messages still has them."""
    async with served(playwright_backend, action_snapshots="none") as (_keeper, client):
        loaded = await _go(client, f"{pages}/load")
        assert "### Events" not in text(loaded) and "Error message1" not in text(loaded)
        listed = await call(client, "browser_console_messages", conversation="t")
        assert "Error message1" in text(listed)
