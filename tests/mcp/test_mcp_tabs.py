"""A conversation's several tabs over MCP: ``browser_tabs`` new / select / close, guarded,
never another conversation's, and each named when a restart takes it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import (
    call,
    kill_chromium,
    restart,
    server_args,
    sign_in_billing,
    stdio_client,
    structured,
    text,
    with_login,
)
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]

CONVERSATIONS = ("--conversation", "billing", "--conversation", "research")


async def test_a_new_tab_is_the_conversations_own_and_the_guard_holds_in_it(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """browser_tabs new opens a tab that becomes current and is listed only for its own
    conversation; in it, another conversation's login is refused inside the browser (no
    request with the login reaches the site) and a file: URL is refused too."""
    args = server_args(tmp_path / "p", sites, chromium_path, *CONVERSATIONS)
    async with stdio_client(args) as client:
        await sign_in_billing(client, sites, conversation="billing")
        first = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")},
            conversation="research",
        )  # fmt: skip
        assert not first.is_error, text(first)
        opened = await call(
            client, "browser_tabs", {"action": "new", "url": sites.url("docs.example", "/guide")},
            conversation="research",
        )  # fmt: skip
        assert not opened.is_error, text(opened)
        listed = structured(opened)["tabs"]
        assert [(t["index"], t["current"], t["url"]) for t in listed] == [
            (0, False, sites.url("docs.example", "/")),
            (1, True, sites.url("docs.example", "/guide")),
        ]
        assert (
            f"- 1: (current) [{listed[1]['title']}]({sites.url('docs.example', '/guide')})"
            in text(opened)
        )
        # Tools now act on the new tab.
        shown = await call(client, "browser_snapshot", conversation="research")
        assert structured(shown)["url"] == sites.url("docs.example", "/guide")
        # With several tabs, a page result says which is current.
        assert text(shown).startswith("### Open tabs\n- 0: [")

        mark = len(sites.requests("billing.example"))
        stolen = await call(
            client, "browser_tabs",
            {"action": "new", "url": sites.url("billing.example", "/invoices")},
            conversation="research",
        )  # fmt: skip
        assert stolen.is_error and "signed in by billing" in text(stolen), text(stolen)
        local = await call(
            client, "browser_tabs", {"action": "new", "url": "file:///etc/passwd"},
            conversation="research",
        )  # fmt: skip
        assert local.is_error and "not the web" in text(local), text(local)
        assert "root:" not in text(local)
        assert with_login(sites, mark) == 0

        # The owner's list has its own tab only.
        own = structured(
            await call(client, "browser_tabs", {"action": "list"}, conversation="billing")
        )
        assert [t["url"] for t in own["tabs"]] == [sites.url("billing.example", "/invoices")]

        picked = await call(
            client, "browser_tabs", {"action": "select", "index": 0}, conversation="research"
        )
        assert structured(picked)["tabs"][0]["current"] is True
        snap = structured(await call(client, "browser_snapshot", conversation="research"))
        assert snap["url"] == sites.url("docs.example", "/")


async def test_a_restart_names_every_tab_it_took_once_and_again_for_a_retried_turn(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """After a SIGKILL the first result names the conversation's other tabs as lost (its
    tab is in the facts), a retry of that turn is told the same, the next turn is not."""
    profile = tmp_path / "p"
    args = server_args(profile, sites, chromium_path, *CONVERSATIONS)
    async with stdio_client(args) as client:
        await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")},
            conversation="research",
        )  # fmt: skip
        for path in ("/guide", "/api"):
            opened = await call(
                client, "browser_tabs", {"action": "new", "url": sites.url("docs.example", path)},
                conversation="research",
            )  # fmt: skip
            assert not opened.is_error, text(opened)
        kill_chromium(profile)
        deadline = time.monotonic() + 10
        while True:
            told = await call(client, "browser_status", conversation="research", turn="t-1")
            if restart(told) is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        facts = restart(told)
        assert facts is not None, text(told)
        lost = [sites.url("docs.example", "/guide"), sites.url("docs.example", "/api")]
        assert facts["lost_pages"] == lost
        assert f"your other tabs, not reopened: 1 ({lost[0]}), 2 ({lost[1]})" in text(told)
        again = await call(client, "browser_status", conversation="research", turn="t-1")
        assert restart(again) is not None and restart(again)["lost_pages"] == lost  # type: ignore[index]
        later = await call(client, "browser_status", conversation="research", turn="t-2")
        assert restart(later) is None
        after = structured(
            await call(client, "browser_tabs", {"action": "list"}, conversation="research")
        )
        assert len(after["tabs"]) == 1  # only the tab is reopened


async def test_closing_a_tab_keeps_the_current_one_or_makes_the_next_one_current(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """As Playwright MCP: closing another tab keeps the current tab current (its index
    moves down when an earlier tab closes); closing the current tab makes the tab that
    took its place current, else the last one."""

    def current(result: Any) -> str:
        return str(next(t["url"] for t in structured(result)["tabs"] if t["current"]))

    home, guide, api = (sites.url("docs.example", p) for p in ("/", "/guide", "/api"))
    async with served(playwright_backend) as (_keeper, client):
        await call(client, "browser_navigate", {"url": home}, conversation="t")
        for url in (guide, api):
            await call(client, "browser_tabs", {"action": "new", "url": url}, conversation="t")
        await call(client, "browser_tabs", {"action": "select", "index": 1}, conversation="t")
        later = await call(
            client, "browser_tabs", {"action": "close", "index": 2}, conversation="t"
        )
        assert current(later) == guide, text(later)
        await call(client, "browser_tabs", {"action": "new", "url": api}, conversation="t")
        mine = await call(client, "browser_tabs", {"action": "close"}, conversation="t")
        assert current(mine) == guide and len(structured(mine)["tabs"]) == 2, text(mine)
        again = await call(client, "browser_tabs", {"action": "close"}, conversation="t")
        assert current(again) == home and len(structured(again)["tabs"]) == 1, text(again)
