"""The MCP server over streamable HTTP: many official clients, one keeper, one profile."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from session_keeper.mcp import TokenFile
from session_keeper.testing import LocalSites
from tests._chaos import record

from .conftest import (
    call,
    http_server,
    kill_chromium,
    restart,
    server_args,
    sign_in_billing,
    structured,
    text,
    token_http,
    with_login,
)

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]


async def test_http_clients_are_conversations_guarded_borrowing_once_and_told_once(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """Two token clients: block names the owner, the owner's client grants one use, a kill
    is told once each."""
    profile = tmp_path / "profile"
    tokens = TokenFile(tmp_path / "tokens.json")
    billing_token, research_token = tokens.add(["billing"])[1], tokens.add(["research"])[1]
    owner_asked: list[str] = []
    self_asked: list[str] = []

    async def owner(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        owner_asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    async def approves_itself(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self_asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True, "approver": "dana"})

    async with (
        http_server(server_args(profile, sites, chromium_path), tokens.path) as url,
        token_http(url, billing_token, mode="legacy", elicitation_callback=owner) as billing,
        # It names no conversation: its token's (only) one is its conversation.
        token_http(
            url, research_token, mode="legacy", elicitation_callback=approves_itself
        ) as research,
    ):
        await sign_in_billing(billing, sites)
        docs = await call(research, "browser_navigate", {"url": sites.url("docs.example", "/")})
        assert not docs.is_error, text(docs)
        conversation = str(structured(await call(research, "browser_status"))["conversation"])
        assert conversation == "research"

        invoices = sites.url("billing.example", "/invoices")
        mark = len(sites.requests("billing.example"))
        blocked = await call(research, "browser_navigate", {"url": invoices})
        assert blocked.is_error
        assert "signed in by billing" in text(blocked)
        assert "browser_request_access(site='billing.example', action='read')" in text(blocked)
        assert structured(blocked)["owner"] == "billing"
        assert structured(blocked)["block"]["rule"] == "grant"
        assert with_login(sites, mark) == 0

        access = await call(
            research, "browser_request_access",
            {"site": "billing.example", "action": "read", "reason": "check the last invoice"},
        )  # fmt: skip
        assert not access.is_error, text(access)
        assert structured(access)["request"]["status"] == "pending"
        assert "the owner (billing) or a person must approve" in text(access)
        # The owner's client answers in the background; wait for it, within a bound.
        deadline = time.monotonic() + 30
        while structured(await call(research, "browser_status"))["pending_requests"]:
            assert time.monotonic() < deadline, "the owner's client was never asked"
            await asyncio.sleep(0.05)
        assert len(owner_asked) == 1 and "'research'" in owner_asked[0]
        assert self_asked == []

        used = await call(research, "browser_navigate", {"url": invoices})
        assert not used.is_error, (text(used), structured(used))
        assert structured(used)["url"] == invoices
        again = await call(research, "browser_navigate", {"url": invoices})
        assert again.is_error
        assert with_login(sites, mark) == 1

        kill_chromium(profile)
        told: dict[str, list[dict[str, Any]]] = {"billing": [], "research": []}
        clients = (("billing", billing), ("research", research))

        async def snapshots() -> None:
            for name, client in clients:
                result = await call(client, "browser_snapshot")
                facts = restart(result)
                if facts is not None:
                    assert text(result).startswith("### Browser restart")
                    told[name].append(facts)

        # The server learns of the death from the browser's own events (tens of ms, more
        # under load): ask until each client was told, within a bound, then prove once.
        deadline = time.monotonic() + 10
        while any(not v for v in told.values()) and time.monotonic() < deadline:
            await snapshots()
            await asyncio.sleep(0.05)
        for _ in range(3):
            await snapshots()
        assert [len(v) for v in told.values()] == [1, 1]
        assert sorted(f"{x['kind']}:{x['name']}" for x in told["billing"][0]["lost"]) == [
            "login:billing.example",
            "tab:billing",
        ]
        assert [f"{x['kind']}:{x['name']}" for x in told["research"][0]["lost"]] == [
            f"tab:{conversation}"
        ]


@pytest.mark.chaos
async def test_a_conversations_tab_cannot_reach_the_mcp_server_or_leave_the_web(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """browser_navigate to the server's own endpoint (any loopback name) is refused by rule
    'self'; to file: and chrome: by rule 'scheme'. The server never serves its own tabs."""
    profile = tmp_path / "profile"
    tokens = TokenFile(tmp_path / "tokens.json")
    research_token = tokens.add(["research"])[1]
    async with (
        http_server(server_args(profile, sites, chromium_path), tokens.path) as url,
        token_http(url, research_token) as research,
    ):
        port = url.rsplit(":", 1)[1].split("/", 1)[0]
        refused = 0
        for own in (url, f"http://localhost:{port}/", f"http://docs.example:{port}/mcp"):
            result = await call(research, "browser_navigate", {"url": own})
            assert result.is_error, own
            assert "session_keeper's own mcp endpoint" in text(result), text(result)
            refused += 1
        record("boundary", path="MCP HTTP: a tab navigating to the server itself", attempts=3,
               arrived=3 - refused)  # fmt: skip
        for off_web in ("file:///etc/hostname", "chrome://history", "view-source:" + url):
            result = await call(research, "browser_navigate", {"url": off_web})
            assert result.is_error, off_web
            assert "not the web" in text(result), text(result)
