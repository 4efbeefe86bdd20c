"""Three chat conversations share one browser through the keeper's MCP server.

``billing``, ``research`` and ``support`` are scripted chats (no LLM): each is a list
of MCP tool calls made with the official ``mcp`` client over streamable HTTP, all
three at once, against one keeper, one Chromium profile and one MCP server.

- ``billing`` signs in to ``billing.example`` (the person types the password in its
  tab) and records the login; only it holds a grant on that site.
- ``research`` (no grant) tries the billing login and is refused by the Guard.
- ``support`` asks for access. Its own client would approve anything, but it is never
  asked: the request is pending until the person at ``billing``'s client (the login's
  owner) approves one use there (elicitation). Support reads the invoices once, and a
  second try is refused.
- Midway Chromium is SIGKILLed; later, the browser sits idle past the idle timeout
  and the sweep closes it. After each, the next result of every affected conversation
  starts with the restart facts, once.

Each chat authenticates with its own bearer token (one per conversation, issued into
a tokens file as ``session-keeper mcp token add`` does).

Every count is taken where it happens: tool calls and restart banners at the
clients, requests carrying the billing login at the site (LocalSites' log).

Usage: ``python demos/chat_agents.py``. Ends with ``RESULT conversations=3
tool_calls=N restarts_told=N told_twice=0 leaked_requests=0 relaunches=N``; exits 1
when something was told twice or leaked.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import httpx2
import mcp_types as types
import uvicorn
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from session_keeper import Grant, Guard, IdleTimeouts, PlaywrightBackend, SessionKeeper
from session_keeper.mcp import KeeperMCP, TokenFile, http_app
from session_keeper.testing import FakeClock, LocalSites

BILLING = "billing.example"
LOGIN_COOKIE = "billing_session"
IDLE = timedelta(minutes=10)


@attrs.define
class Chat:
    """One scripted conversation: its client and what it saw."""

    name: str
    client: Client
    lines: list[str] = attrs.Factory(list)
    calls: int = 0
    #: (browser generation) of every restart banner it received.
    told: list[int] = attrs.Factory(list)

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> types.CallToolResult:
        """Make one tool call; note the banner, the outcome and the first line of text."""
        result = await self.client.call_tool(tool, args or {})
        self.calls += 1
        data = dict(result.structured_content or {})
        facts = data.get("restart")
        if isinstance(facts, dict):
            self.told.append(int(facts["generation"]))
            lost = ", ".join(f"{x['kind']}:{x['name']}" for x in facts["lost"]) or "nothing"
            self.lines.append(f"  ** told: browser restarted -> {facts['browser_id']}; lost {lost}")
        # The password a person types is not repeated in the transcript.
        shown = {k: v for k, v in (args or {}).items() if k != "element"}
        if shown.get("element") == "Password" or (args or {}).get("element") == "Password":
            shown["text"] = "********"
        body = next(
            (
                c.text
                for c in result.content[1 if facts else 0 :]
                if isinstance(c, types.TextContent)
            ),
            "",
        )
        body_lines = body.splitlines()
        first = body_lines[0] if body_lines else ""
        if first.startswith("### ") and not first.startswith("### Page") and len(body_lines) > 1:
            first = body_lines[1].lstrip("- ")
        if first.startswith("### Page"):
            first = f"{data.get('title')} ({data.get('url')})"
        mark = "REFUSED" if result.is_error else "ok"
        self.lines.append(f"  {tool} {shown or ''} -> {mark}: {first[:110]}")
        return result


def _ref(result: types.CallToolResult, role: str, name: str) -> str:
    snapshot = str(dict(result.structured_content or {}).get("snapshot", ""))
    m = re.search(rf'- {role} "{re.escape(name)}"[^\n]*\[ref=(e\d+)\]', snapshot)
    if m is None:
        raise RuntimeError(f"no {role} {name!r} on the page")
    return m.group(1)


@asynccontextmanager
async def _chat(
    url: str, name: str, token: str, elicit: ElicitationFnT | None = None
) -> AsyncIterator[Chat]:
    # The token is the client's config: it says which conversation the client is.
    # Handshake-era protocol: the server can ask this client (elicitation) on its own.
    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30.0, read=300.0),
        ) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            elicitation_callback=elicit,
        ) as c,
    ):
        yield Chat(name=name, client=c)


async def _until_answered(chat: Chat) -> None:
    """Ask browser_status until the chat has no request pending (an agent polling)."""
    for _ in range(200):
        status = await chat.call("browser_status")
        if not dict(status.structured_content or {}).get("pending_requests"):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{chat.name}'s request was never answered")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@attrs.frozen(kw_only=True)
class Report:
    """What the demo counted."""

    chats: tuple[Chat, ...]
    events: tuple[str, ...]
    leaked_requests: int
    borrowed_reads: int
    relaunches: int
    kills: int
    sweeps: int

    @property
    def tool_calls(self) -> int:
        return sum(c.calls for c in self.chats)

    @property
    def restarts_told(self) -> int:
        return sum(len(c.told) for c in self.chats)

    @property
    def told_twice(self) -> int:
        return sum(n - 1 for c in self.chats for n in Counter(c.told).values() if n > 1)

    def result_line(self) -> str:
        return (
            f"RESULT conversations={len(self.chats)} tool_calls={self.tool_calls} "
            f"restarts_told={self.restarts_told} told_twice={self.told_twice} "
            f"leaked_requests={self.leaked_requests} relaunches={self.relaunches}"
        )


def _with_login(sites: LocalSites, mark: int) -> int:
    return sum(
        1
        for r in sites.requests(BILLING)[mark:]
        if r.cookie(LOGIN_COOKIE) is not None and r.path != "/favicon.ico"
    )


async def _sign_in(chat: Chat, sites: LocalSites) -> None:
    page = await chat.call("browser_navigate", {"url": sites.url(BILLING, "/login")})
    user, pw = _ref(page, "textbox", "Username"), _ref(page, "textbox", "Password")
    await chat.call("browser_type", {"element": "Username", "target": user, "text": "alice"})
    await chat.call(
        "browser_type",
        {"element": "Password", "target": pw, "text": "correct horse", "submit": True},
    )
    await chat.call("browser_wait_for", {"text": "Invoices"})
    await chat.call("browser_record_login", {"site": BILLING, "account": "alice"})


async def run(sites: LocalSites, profile: Path, *, executable_path: str | None = None) -> Report:
    """Run the three chats; return what was counted."""
    clock = FakeClock()
    backend = PlaywrightBackend(
        profile, executable_path=executable_path, host_resolver_rules=sites.host_resolver_rules
    )
    lost = asyncio.Event()
    keeper = SessionKeeper(
        backend,
        clock=clock,
        grants=[Grant("billing", BILLING)],
        idle_timeouts=IdleTimeouts(browser=IDLE),
        on_browser_lost=lambda _facts: lost.set(),
    )
    Guard(keeper)
    app = KeeperMCP(keeper)
    port = _free_port()
    book = TokenFile(profile.parent / "mcp-tokens.json")
    tokens = {name: book.add([name])[1] for name in ("billing", "research", "support")}
    asgi = http_app(app, tokens=book, host="127.0.0.1", port=port)
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning"))
    events: list[str] = []
    asked: list[str] = []
    self_asked: list[str] = []

    async def dana(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        # The person at billing's MCP client (the login's owner) allows it once.
        asked.append(params.message)
        events.append(f"billing's client asked its person: {params.message}")
        return types.ElicitResult(action="accept", content={"approve": True})

    async def yes_to_anything(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        # Support's client would approve its own request: it must never be asked.
        self_asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True, "approver": "me"})

    async with keeper:
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:  # noqa: ASYNC110 - uvicorn offers only this flag
                await asyncio.sleep(0.01)
            url = f"http://127.0.0.1:{port}/mcp"
            async with (
                _chat(url, "billing", tokens["billing"], dana) as billing,
                _chat(url, "research", tokens["research"]) as research,
                _chat(url, "support", tokens["support"], yes_to_anything) as support,
            ):
                chats = (billing, research, support)

                async def research_opens() -> None:
                    await research.call("browser_navigate", {"url": sites.url("docs.example", "/")})
                    await research.call("browser_logins")

                async def support_opens() -> None:
                    await support.call("browser_navigate", {"url": sites.url("docs.example", "/")})
                    await support.call("browser_status")

                await asyncio.gather(_sign_in(billing, sites), research_opens(), support_opens())

                invoices = sites.url(BILLING, "/invoices")
                mark = len(sites.requests(BILLING))

                async def research_tries() -> None:
                    await research.call("browser_navigate", {"url": invoices})

                borrowed = 0

                async def support_borrows() -> None:
                    nonlocal borrowed
                    await support.call(
                        "browser_request_access",
                        {"site": BILLING, "action": "read", "reason": "customer asks for a copy"},
                    )
                    await _until_answered(support)
                    used = await support.call("browser_navigate", {"url": invoices})
                    borrowed += 0 if used.is_error else 1
                    await support.call("browser_navigate", {"url": sites.url("docs.example", "/")})
                    await support.call("browser_navigate", {"url": invoices})

                await asyncio.gather(
                    research_tries(), support_borrows(), billing.call("browser_logins")
                )
                leaked = _with_login(sites, mark) - borrowed

                session = backend.current
                assert session is not None and session.pid is not None
                events.append(f"SIGKILL Chromium (pid {session.pid}), browser-{keeper.generation}")
                os.kill(session.pid, signal.SIGKILL)
                await lost.wait()  # the keeper learns of it from the process watch

                async def after(chat: Chat) -> None:
                    await chat.call("browser_snapshot")
                    await chat.call("browser_status")

                await asyncio.gather(*(after(c) for c in chats))
                await _sign_in(billing, sites)  # the person signs billing in again
                await support.call("browser_navigate", {"url": sites.url("docs.example", "/")})

                clock.advance(IDLE + timedelta(minutes=1))
                swept = await keeper.sweep()
                assert swept.closed_browser is not None
                events.append(
                    f"sweep closed idle {swept.closed_browser.browser_id} "
                    f"after {swept.closed_browser.idle_minutes} min"
                )
                await asyncio.gather(*(after(c) for c in chats))
                events.append(f"billing's person was asked {len(asked)} time(s)")
                events.append(f"support's own client was asked {len(self_asked)} time(s)")
        finally:
            server.should_exit = True
            await serving
    await backend.aclose()
    return Report(
        chats=chats,
        events=tuple(events),
        leaked_requests=leaked,
        borrowed_reads=borrowed,
        relaunches=keeper.generation - 1,
        kills=1,
        sweeps=1,
    )


def print_report(report: Report) -> None:
    """The per-conversation transcripts, the events, then the RESULT line."""
    for chat in report.chats:
        print(f"== {chat.name} ({chat.calls} tool calls) ==")
        for line in chat.lines:
            print(line)
    print("== events ==")
    for event in report.events:
        print(f"  {event}")
    print(f"  relaunches: {report.kills} kill + {report.sweeps} sweep")
    print(report.result_line())


async def _main() -> int:
    with tempfile.TemporaryDirectory(prefix="chat-agents-") as tmp, LocalSites() as sites:
        report = await run(sites, Path(tmp) / "profile")
    print_report(report)
    ok = report.told_twice == 0 and report.leaked_requests == 0 and report.borrowed_reads == 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
