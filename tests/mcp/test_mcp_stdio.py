"""The MCP server over stdio, driven by the official ``mcp`` client, on real Chromium."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from session_keeper.mcp import TOOL_NAMES
from session_keeper.testing import LocalSites

from .conftest import (
    ROOT,
    call,
    kill_chromium,
    restart,
    server_args,
    sign_in_billing,
    stdio_client,
    structured,
    text,
)

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]

PLAYWRIGHT_MCP_NAMES = (
    "browser_navigate", "browser_navigate_back", "browser_snapshot", "browser_click",
    "browser_type", "browser_wait_for", "browser_take_screenshot", "browser_tabs",
    "browser_close", "browser_press_key", "browser_hover", "browser_select_option",
    "browser_fill_form", "browser_evaluate", "browser_resize", "browser_drag",
    "browser_console_messages", "browser_handle_dialog", "browser_network_requests",
    "browser_network_request", "browser_emulate_media", "browser_find", "browser_file_upload",
    "browser_drop",
)  # fmt: skip


#: The conversations this stdio client may pick with ``_meta`` (the first is its default).
STDIO_CONVERSATIONS = ("--conversation", "billing", "--conversation", "research")


async def test_stdio_tools_are_named_as_playwright_mcp_names_them_plus_the_keepers(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """The listing has Playwright MCP's names and the keeper's four, nothing unnamed."""
    args = server_args(tmp_path / "p", sites, chromium_path, *STDIO_CONVERSATIONS)
    async with stdio_client(args) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
    keepers = {
        "browser_status",
        "browser_logins",
        "browser_request_access",
        "browser_request_sign_in",
        "browser_record_login",
    }
    assert listed == set(PLAYWRIGHT_MCP_NAMES) | keepers == set(TOOL_NAMES)


async def test_stdio_kill_between_calls_is_told_to_each_conversation_once(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """Two conversations on one stdio server; after SIGKILL each hears restart+losses once."""
    profile = tmp_path / "profile"
    async with stdio_client(
        server_args(profile, sites, chromium_path, *STDIO_CONVERSATIONS)
    ) as client:
        await sign_in_billing(client, sites, conversation="billing")
        docs = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")},
            conversation="research",
        )  # fmt: skip
        assert not docs.is_error, text(docs)
        assert restart(docs) is None
        # Each conversation has its own tab: neither is handed the other's page.
        b = structured(await call(client, "browser_snapshot", conversation="billing"))
        r = structured(await call(client, "browser_snapshot", conversation="research"))
        assert b["url"] == sites.url("billing.example", "/invoices")
        assert r["url"] == sites.url("docs.example", "/")

        blocked = await call(
            client, "browser_navigate", {"url": sites.url("billing.example", "/invoices")},
            conversation="research",
        )  # fmt: skip
        assert blocked.is_error and "signed in by billing" in text(blocked)

        pid = kill_chromium(profile)

        told: dict[str, list[dict[str, object]]] = {"billing": [], "research": []}

        async def status(conversation: str) -> None:
            result = await call(client, "browser_status", conversation=conversation)
            assert not result.is_error, text(result)
            facts = restart(result)
            if facts is not None:
                assert result.content[0].type == "text"
                assert text(result).startswith("### Browser restart\n- RESTARTED")
                told[conversation].append(facts)

        # The server learns of the death from the browser's own events, tens of ms after
        # the process is gone (longer on a loaded machine): ask until it has told each
        # conversation, within a bound, then a few more times to prove it tells only once.
        deadline = time.monotonic() + 10
        while any(not v for v in told.values()) and time.monotonic() < deadline:
            for conversation in told:
                await status(conversation)
            await asyncio.sleep(0.05)
        for _ in range(3):
            for conversation in told:
                await status(conversation)
        if [len(v) for v in told.values()] != [1, 1]:
            st = structured(await call(client, "browser_status", conversation="billing"))
            # Say what the server believed, to tell a missed kill from a lost fact.
            raise AssertionError(f"told {told} after killing pid {pid}; server: {st}")
        billing, research = told["billing"][0], told["research"][0]
        assert billing["restarted"] is True and research["restarted"] is True
        assert billing["browser_id"] == "browser-2"
        assert sorted(f"{x['kind']}:{x['name']}" for x in billing["lost"]) == [  # type: ignore[attr-defined]
            "login:billing.example",
            "tab:billing",
        ]
        assert [f"{x['kind']}:{x['name']}" for x in research["lost"]] == ["tab:research"]  # type: ignore[attr-defined]
        # The blocked navigation never became the tab's verified URL.
        assert research["lost"][0]["last_url"] == sites.url("docs.example", "/")  # type: ignore[index]


async def test_a_stdio_client_acts_only_as_its_declared_conversations(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """``_meta`` on stdio picks only among the --conversation names; another is refused
    before the keeper is called, so a stdio client cannot borrow an undeclared identity."""
    args = server_args(tmp_path / "p", sites, chromium_path, *STDIO_CONVERSATIONS)
    async with stdio_client(args) as client:
        refused = await call(client, "browser_status", conversation="support")
        assert refused.is_error and "forbidden" in text(refused)
        assert structured(refused)["error"] == "forbidden"
        assert not (await call(client, "browser_status", conversation="research")).is_error


async def test_a_second_stdio_server_on_the_profile_points_to_http(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """A second stdio server started on a profile the first one holds is refused at its
    start (exit 2, one line), saying who holds it and what to do instead: one server
    over --http for both; the first one keeps serving."""
    args = server_args(tmp_path / "p", sites, chromium_path, *STDIO_CONVERSATIONS)
    async with stdio_client(args) as first:
        assert not (await call(first, "browser_status")).is_error
        second = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "session_keeper.mcp", *args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        out, err = await asyncio.wait_for(second.communicate(), timeout=60)
        assert not (await call(first, "browser_status")).is_error
    said = err.decode()
    assert second.returncode == 2 and out == b""
    assert said.count("\n") == 1, said
    assert said.startswith("session-keeper mcp: error: profile ")
    assert "held by another session-keeper mcp (pid " in said
    assert "(fix: " in said and "--http" in said
