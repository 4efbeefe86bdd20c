"""Running the server: stdio, streamable HTTP, and ``session-keeper mcp`` (the CLI)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

from mcp.server.stdio import stdio_server

from session_keeper._grants import Grant
from session_keeper._guard import Guard
from session_keeper._keeper import SessionKeeper
from session_keeper._playwright import PlaywrightBackend
from session_keeper._store._postgres import PostgresStore
from session_keeper._store._protocol import Store
from session_keeper._store._sqlite import SqliteStore
from session_keeper.mcp._server import KeeperMCP

_DESCRIPTION = """\
Serve one persistent Chromium profile to many MCP clients. Every client is its own
conversation (its own tab); restart facts start the first result after a restart;
the Guard enforces each conversation's grants on the network.

Grants: --grant CONVERSATION:SITE[:ACTION,ACTION] (default actions: read,write), e.g.
--grant billing:billing.example. On stdio the client is --conversation (default
"mcp"); over HTTP each MCP session is one, unless the client names one.
"""


async def serve_stdio(app: KeeperMCP) -> None:
    """Serve ``app`` on this process's stdin/stdout until the client goes away."""
    async with stdio_server() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


def http_app(app: KeeperMCP, host: str = "127.0.0.1") -> Any:
    """The ASGI (Starlette) app serving ``app`` at ``/mcp`` (streamable HTTP)."""
    return app.server.streamable_http_app(streamable_http_path="/mcp", host=host)


async def serve_http(app: KeeperMCP, host: str, port: int) -> None:
    """Serve ``app`` at ``http://host:port/mcp`` until cancelled."""
    import uvicorn

    config = uvicorn.Config(http_app(app, host), host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


def _grant(text: str) -> Grant:
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise argparse.ArgumentTypeError("a grant is CONVERSATION:SITE[:ACTION,ACTION]")
    actions = set(parts[2].split(",")) if len(parts) == 3 else {"read", "write"}
    return Grant(parts[0], parts[1], actions=actions)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError("--http takes HOST:PORT, e.g. 127.0.0.1:8931")
    return host, int(port)


def _store(url: str) -> Store:
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url)
    return SqliteStore(url.removeprefix("sqlite:///").removeprefix("sqlite://"))


def build_parser() -> argparse.ArgumentParser:
    """The ``session-keeper mcp`` argument parser."""
    p = argparse.ArgumentParser(
        prog="session-keeper mcp",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--profile", required=True, type=Path, help="the Chromium profile directory")
    p.add_argument("--store", help="SQLite file (or sqlite:///path) or postgresql:// URL")
    p.add_argument("--http", type=_host_port, metavar="HOST:PORT", help="serve streamable HTTP")
    p.add_argument(
        "--grant",
        type=_grant,
        action="append",
        default=[],
        metavar="CONV:SITE[:ACTIONS]",
        help="let CONV use SITE's login (repeatable)",
    )
    p.add_argument("--conversation", default="mcp", help="the stdio client's conversation")
    p.add_argument("--executable", help="the Chromium to run (default: found on this machine)")
    p.add_argument("--host-resolver-rules", help="Chromium --host-resolver-rules (testing)")
    p.add_argument("--headed", action="store_true", help="show the browser window")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="close the browser after this long unused (default 600)",
    )
    p.add_argument(
        "--sweep-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how often to look for idle browsers, tabs and grants (default 60)",
    )
    return p


async def run(args: argparse.Namespace) -> None:
    """Build the keeper, its Guard and the server from ``args``; serve until done."""
    backend = PlaywrightBackend(
        args.profile,
        executable_path=args.executable,
        headless=not args.headed,
        host_resolver_rules=args.host_resolver_rules,
    )
    async with AsyncExitStack() as stack:
        store = None
        if args.store is not None:
            store = await stack.enter_async_context(_store(args.store))
        keeper = SessionKeeper(
            backend,
            grants=args.grant,
            store=store,
            idle_timeout=timedelta(seconds=args.idle_timeout),
        )
        Guard(keeper)  # enforces the grants on every browser it launches
        await stack.enter_async_context(keeper)
        stack.push_async_callback(backend.aclose)
        keeper.start_sweeper(every=timedelta(seconds=args.sweep_every))
        app = KeeperMCP(keeper, default_conversation=args.conversation)
        if args.http is not None:
            await serve_http(app, *args.http)
        else:
            await serve_stdio(app)


def main(argv: Sequence[str] | None = None) -> int:
    """``session-keeper mcp``; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
