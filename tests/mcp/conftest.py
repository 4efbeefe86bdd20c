"""Helpers for the MCP server tests: official-client calls, sign-in through the tools, kills."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import httpx2
import mcp_types as types
import uvicorn
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from playwright.async_api import Page

from session_keeper import SessionKeeper
from session_keeper._browser.process import find_browser_pid
from session_keeper.mcp import (
    CONVERSATION_HEADER,
    CONVERSATION_META,
    TURN_META,
    KeeperMCP,
    TokenFile,
    http_app,
)
from session_keeper.mcp._http import Door
from session_keeper.testing import LocalSites

ROOT = Path(__file__).resolve().parents[2]


def server_args(profile: Path, sites: LocalSites, chromium: str, *extra: str) -> list[str]:
    """``session-keeper mcp`` arguments for a test server on ``profile``."""
    return [
        "--profile", str(profile),
        "--executable", chromium,
        "--host-resolver-rules", sites.host_resolver_rules,
        "--grant", "billing:billing.example",
        *extra,
    ]  # fmt: skip


@asynccontextmanager
async def stdio_client(args: Sequence[str], **kwargs: Any) -> AsyncIterator[Client]:
    """An official MCP client on a ``python -m session_keeper.mcp`` subprocess (stdio)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "session_keeper.mcp", *args],
        cwd=str(ROOT),
    )
    async with Client(params, **kwargs) as client:
        yield client


async def call(
    client: Client,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    conversation: str | None = None,
    turn: str | None = None,
) -> types.CallToolResult:
    """Call a tool, naming the conversation and turn in ``_meta`` when given."""
    meta: dict[str, Any] = {}
    if conversation is not None:
        meta[CONVERSATION_META] = conversation
    if turn is not None:
        meta[TURN_META] = turn
    sent = cast("types.RequestParamsMeta", meta) if meta else None
    return await client.call_tool(name, arguments or {}, meta=sent)


def text(result: types.CallToolResult) -> str:
    """All text content of a result, joined."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """The result's ``structuredContent`` (always present)."""
    assert result.structured_content is not None
    return dict(result.structured_content)


def restart(result: types.CallToolResult) -> dict[str, Any] | None:
    """The restart facts a result carries, or ``None``."""
    value = structured(result)["restart"]
    return None if value is None else dict(value)


def ref(snapshot: str, role: str, name: str) -> str:
    """The ``[ref=eN]`` of the element with ``role`` and accessible ``name``."""
    m = re.search(rf'- {role} "{re.escape(name)}"[^\n]*\[ref=(e\d+)\]', snapshot)
    assert m is not None, f"no {role} {name!r} in:\n{snapshot}"
    return m.group(1)


async def sign_in_billing(
    client: Client, sites: LocalSites, *, conversation: str | None = None
) -> types.CallToolResult:
    """The person signs in to billing.example in the conversation's tab, then records it."""
    page = await call(
        client, "browser_navigate", {"url": sites.url("billing.example", "/login")},
        conversation=conversation,
    )  # fmt: skip
    assert not page.is_error, text(page)
    snap = structured(page)["snapshot"]
    user, pw = ref(snap, "textbox", "Username"), ref(snap, "textbox", "Password")
    typed = await call(
        client, "browser_type", {"element": "Username", "target": user, "text": "alice"},
        conversation=conversation,
    )  # fmt: skip
    assert not typed.is_error, text(typed)
    sent = await call(
        client, "browser_type",
        {"element": "Password", "target": pw, "text": "correct horse", "submit": True},
        conversation=conversation,
    )  # fmt: skip
    assert not sent.is_error, text(sent)
    await call(client, "browser_wait_for", {"text": "Invoices"}, conversation=conversation)
    recorded = await call(
        client, "browser_record_login", {"site": "billing.example", "account": "alice"},
        conversation=conversation,
    )  # fmt: skip
    assert not recorded.is_error, text(recorded)
    return recorded


def kill_chromium(profile: Path) -> int:
    """SIGKILL the Chromium running on ``profile``; return once the process is gone."""
    pid = find_browser_pid(profile)
    assert pid is not None, "no Chromium runs on the profile"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except (FileNotFoundError, IndexError):
            return pid
        if state in "ZX":
            return pid
        time.sleep(0.02)
    raise AssertionError(f"Chromium {pid} survived SIGKILL")


def with_login(sites: LocalSites, mark: int) -> int:
    """Requests to billing.example since ``mark`` carrying the login (favicons aside)."""
    return sum(
        1
        for r in sites.requests("billing.example")[mark:]
        if r.cookie("billing_session") is not None and r.path != "/favicon.ico"
    )


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_server(args: Sequence[str], tokens: Path) -> AsyncIterator[str]:
    """``session-keeper mcp --http --tokens`` in a subprocess; yields its ``/mcp`` URL."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "session_keeper.mcp", *args, "--http", f"127.0.0.1:{port}",
        "--tokens", str(tokens), cwd=str(ROOT),
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                assert proc.returncode is None, "the MCP server exited"
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@asynccontextmanager
async def served_http(
    keeper: SessionKeeper[Page], tokens: TokenFile, **door: Any
) -> AsyncIterator[tuple[str, KeeperMCP]]:
    """``keeper`` served over streamable HTTP in this process (uvicorn); yields URL and app."""
    async with served_door(keeper, tokens, **door) as (url, app, _):
        yield url, app


@asynccontextmanager
async def served_door(
    keeper: SessionKeeper[Page], tokens: TokenFile, **door: Any
) -> AsyncIterator[tuple[str, KeeperMCP, Door]]:
    """As :func:`served_http`, also yielding the door (what it refused, its sessions)."""
    app = KeeperMCP(keeper)
    port = free_port()
    asgi = http_app(app, tokens=tokens, host="127.0.0.1", port=port, **door)
    assert isinstance(asgi, Door)
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # uvicorn offers only this flag
            assert not serving.done(), "the server stopped"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp", app, asgi
    finally:
        server.should_exit = True
        await serving


@asynccontextmanager
async def token_http(
    url: str,
    token: str,
    conversation: str | None = None,
    *,
    seen: Callable[[httpx2.Response], Awaitable[None]] | None = None,
    **kwargs: Any,
) -> AsyncIterator[Client]:
    """An official streamable-HTTP client sending ``token`` (and naming ``conversation``);
    ``seen`` is shown each HTTP response it gets (what an observer of the wire sees)."""
    headers = {"Authorization": f"Bearer {token}"}
    if conversation is not None:
        headers[CONVERSATION_HEADER] = conversation
    timeout = httpx2.Timeout(30.0, read=300.0)
    hooks = {"response": [seen]} if seen is not None else None
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http,
        Client(streamable_http_client(url, http_client=http), **kwargs) as client,
    ):
        yield client


async def raw_post(port: int, headers: Sequence[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """POST an MCP initialize with ``headers`` (any bytes); return the status and what was read."""
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}'
    )
    lines = [b"POST /mcp HTTP/1.1", b"Content-Type: application/json",
             b"Accept: application/json, text/event-stream",
             b"Content-Length: " + str(len(body)).encode(), b"Connection: close"]  # fmt: skip
    lines += [name + b": " + value for name, value in headers]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        await writer.drain()
        # The status line and headers, and a refusal's short body when there is one.
        response = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        if b"text/plain" in response:
            response += await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
    status = int(response.split(b" ", 2)[1])
    return status, response


@contextmanager
def page_server(
    pages: Mapping[str, str], slow: Mapping[str, tuple[float, str]] | None = None
) -> Iterator[str]:
    """``pages`` (path -> HTML) served on loopback, and ``slow`` paths answered after
    their delay (path -> (seconds, body)); yields the origin."""
    late = dict(slow or {})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path in late:
                delay, text = late[self.path]
                time.sleep(delay)
            else:
                text = pages.get(self.path, "<p>none</p>")
            body = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
