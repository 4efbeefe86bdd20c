"""Running the server: stdio, streamable HTTP, and ``session-keeper mcp`` (the CLI)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TextIO

import attrs
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from session_keeper._browser.cdp import CdpBackend
from session_keeper._browser.cdp_endpoint import check_endpoint
from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper._guard.guard import Guard
from session_keeper._keeper.keeper import SessionKeeper
from session_keeper._keeper.settings import Durability, IdleTimeouts
from session_keeper._model.grants import DEFAULT_ACTIONS, Grant, check_name
from session_keeper._util.binds import is_loopback, parse_bind
from session_keeper._util.surfaces import serve_surface
from session_keeper._util.version import package_version
from session_keeper.errors import InvalidArgument, InvalidArgumentType, TokenFileUnreadable
from session_keeper.mcp._http import (
    DEFAULT_SESSIONS_PER_TOKEN,
    Door,
    DoorPolicy,
    host_value,
    loopback_hosts,
)
from session_keeper.mcp._options import (
    add_playwright_options,
    check_playwright_options,
    default_profile,
    expand_config,
    read_secrets,
)
from session_keeper.mcp._server import KeeperMCP
from session_keeper.mcp._token_cli import token_main
from session_keeper.mcp._tokens import TokenFile
from session_keeper.mcp._tools import SignInLinks
from session_keeper.stores._urls import store_from_url

#: How long an HTTP client's MCP session may stay without any request before the SDK
#: ends it (the SDK's default, said here so the door counts live sessions the same way).
SESSION_IDLE_TIMEOUT_S = 30 * 60.0

_DESCRIPTION = """\
Serve one persistent Chromium profile to many MCP clients. Every client is its own
conversation (its own tab); restart facts start the first result after a restart;
the Guard enforces each conversation's grants on the network.

Grants: --grant [CONVERSATION:]SITE[:ACTION,ACTION] (default actions: read,write).
On stdio the client is --conversation (default "mcp"), and --grant billing.example
means it; a grant naming a conversation the client is not is refused at start.
Over HTTP (--http HOST:PORT --tokens FILE) every client sends "Authorization:
Bearer <token>"; its token names the conversations it may act as (the first by
default), and every --grant names its conversation. Issue a token with:

  session-keeper mcp token add --tokens FILE --conversation billing [--name alice]

A non-loopback --http needs --allow-remote (and --allowed-host for 0.0.0.0).
"""


async def serve_stdio(app: KeeperMCP) -> None:
    """Serve ``app`` on this process's stdin/stdout until the client goes away."""
    async with stdio_server() as (read, write):
        await app.server.run(read, write, app.server.create_initialization_options())


def door_policy(
    host: str,
    port: int,
    *,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> DoorPolicy:
    """The ``Host`` / ``Origin`` values a server bound to ``host:port`` accepts.

    A loopback bind answers to its loopback names; any other bind needs
    ``allow_remote`` and answers to ``allowed_hosts`` (``NAME[:PORT]``, the port
    defaulting to ``port``) or, when none are given, to the bound address itself (a
    wildcard bind such as ``0.0.0.0`` must name them). Origins are refused unless
    listed. Raises :class:`InvalidArgument` for a bind or name it cannot accept.
    """
    extra = frozenset(_allowed_host(h, port) for h in allowed_hosts)
    origins = frozenset(_origin(o) for o in allowed_origins)
    if is_loopback(host):
        hosts = loopback_hosts(port) | {host_value(host, port)} | extra
        return DoorPolicy(allowed_hosts=hosts, allowed_origins=origins)
    if not allow_remote:
        raise InvalidArgument(
            f"the MCP server binds to loopback only; {host!r} would let the network drive "
            "this browser. Pass --allow-remote (and --allowed-host for the names clients "
            "use) if you really mean it"
        )
    if not extra:
        if host in ("0.0.0.0", "::", ""):
            raise InvalidArgument(
                f"a wildcard bind ({host!r}) answers to no Host by itself: name the hosts "
                "clients use with --allowed-host NAME[:PORT]"
            )
        extra = frozenset({host_value(host, port)})
    return DoorPolicy(allowed_hosts=extra, allowed_origins=origins)


def _allowed_host(text: str, port: int) -> str:
    if not isinstance(text, str) or not text or any(not 0x20 < ord(c) < 0x7F for c in text):
        raise InvalidArgument("an allowed host is NAME[:PORT] in printable ASCII")
    if text.startswith("["):
        name, sep, rest = text[1:].partition("]")
        if not sep or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            raise InvalidArgument(f"an allowed host is NAME[:PORT], not {text!r}")
        return host_value(name, int(rest[1:]) if rest else port)
    name, sep, given = text.rpartition(":")
    if not sep:
        return host_value(text, port)
    if not name or not given.isdigit() or ":" in name:
        raise InvalidArgument(f"an allowed host is NAME[:PORT], not {text!r}")
    return host_value(name, int(given))


def _origin(text: str) -> str:
    if not isinstance(text, str) or not text.startswith(("http://", "https://")):
        raise InvalidArgument("an allowed origin is http(s)://HOST[:PORT]")
    return text.rstrip("/")


def http_app(
    app: KeeperMCP,
    *,
    tokens: TokenFile | Path | str,
    host: str = "127.0.0.1",
    port: int,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    sessions_per_token: int = DEFAULT_SESSIONS_PER_TOKEN,
) -> Any:
    """The ASGI app serving ``app`` at ``/mcp`` (streamable HTTP) behind the door.

    Every request must carry a bearer token from ``tokens`` (see ``session-keeper mcp
    token add``) and a ``Host`` / ``Origin`` that :func:`door_policy` accepts for
    ``host:port``; each token holds at most ``sessions_per_token`` live MCP sessions
    (another is refused with 429 until one ends). Raises :class:`InvalidArgument` for
    a bind it refuses, and :class:`~session_keeper.errors.TokenFileUnreadable` for a
    tokens file it cannot read.
    """
    if (
        not isinstance(sessions_per_token, int)
        or isinstance(sessions_per_token, bool)
        or not 1 <= sessions_per_token <= 10_000
    ):
        raise InvalidArgument("sessions_per_token is 1 to 10000")
    book = tokens if isinstance(tokens, TokenFile) else TokenFile(tokens)
    book.clients()  # a malformed or shared-writable file is an error now, not per request
    policy = door_policy(
        host,
        port,
        allow_remote=allow_remote,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )
    # The SDK checks the same lists (it only does so by itself for loopback names).
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(policy.allowed_hosts),
        allowed_origins=sorted(policy.allowed_origins),
    )
    inner = app.server.streamable_http_app(
        streamable_http_path="/mcp",
        host=host,
        transport_security=security,
        session_idle_timeout=SESSION_IDLE_TIMEOUT_S,
    )
    return Door(
        inner,
        book,
        policy,
        sessions_per_token=sessions_per_token,
        idle_timeout=SESSION_IDLE_TIMEOUT_S,
    )


async def serve_http(
    app: KeeperMCP,
    host: str,
    port: int,
    *,
    tokens: TokenFile | Path | str,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    sessions_per_token: int = DEFAULT_SESSIONS_PER_TOKEN,
) -> None:
    """Serve ``app`` at ``http://host:port/mcp`` until cancelled (see :func:`http_app`)."""
    import uvicorn

    asgi = http_app(
        app,
        tokens=tokens,
        host=host,
        port=port,
        allow_remote=allow_remote,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        sessions_per_token=sessions_per_token,
    )
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning")
    # While it serves, no conversation's page may reach it (the Guard's rule 'self').
    with serve_surface("mcp", host, port):
        await uvicorn.Server(config).serve()


@attrs.frozen(kw_only=True)
class GrantArg:
    """A ``--grant`` as given: its conversation may be left to the server to name."""

    conversation: str | None
    site: str
    actions: frozenset[str]

    def resolve(self, conversations: Sequence[str], *, http: bool) -> Grant:
        """The grant for one of ``conversations`` (the server's, stdio's first by default).

        Raises :class:`InvalidArgument` for a grant this server could never use: over
        stdio one naming a conversation the client cannot act as; over HTTP one that
        names no conversation.
        """
        shown = f"--grant {self.text}"
        if self.conversation is None:
            if http:
                raise InvalidArgument(
                    f"{shown} names no conversation: over --http every client is the "
                    "conversation its token names, so write --grant CONVERSATION:SITE"
                )
            return Grant(conversations[0], self.site, actions=self.actions)
        if not http and self.conversation not in conversations:
            served = ", ".join(repr(c) for c in conversations)
            raise InvalidArgument(
                f"{shown} is for conversation {self.conversation!r}, which this stdio "
                f"server never is (it serves {served}): write --grant {self.site} for "
                f"its own conversation, or add --conversation {self.conversation}"
            )
        return Grant(self.conversation, self.site, actions=self.actions)

    @property
    def text(self) -> str:
        """The grant as the command line spells it."""
        actions = ",".join(sorted(self.actions))
        conversation = f"{self.conversation}:" if self.conversation else ""
        return f"{conversation}{self.site}:{actions}"


def _grant(text: str) -> GrantArg:
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise argparse.ArgumentTypeError(
            "a grant is [CONVERSATION:]SITE[:ACTION,ACTION], e.g. billing.example or "
            "billing:billing.example:read"
        )
    actions = DEFAULT_ACTIONS
    if len(parts) == 3:
        actions = frozenset(parts[2].split(","))
    elif len(parts) == 2 and set(parts[1].split(",")) <= DEFAULT_ACTIONS:
        # SITE:ACTIONS (a site is never named like an action).
        return GrantArg(conversation=None, site=parts[0], actions=frozenset(parts[1].split(",")))
    if len(parts) == 1:
        return GrantArg(conversation=None, site=parts[0], actions=actions)
    return GrantArg(conversation=parts[0], site=parts[1], actions=actions)


def _host_port(text: str) -> tuple[str, int]:
    try:
        return parse_bind(text)
    except InvalidArgument:
        raise argparse.ArgumentTypeError("--http takes HOST:PORT, e.g. 127.0.0.1:8931") from None


def build_parser() -> argparse.ArgumentParser:
    """The ``session-keeper mcp`` argument parser."""
    p = argparse.ArgumentParser(
        prog="session-keeper mcp",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    p.add_argument(
        "--profile",
        type=Path,
        help=f"the Chromium profile directory (default {default_profile()})",
    )
    p.add_argument(
        "--store",
        help="a SQLite file, sqlite:///relative.db, sqlite:////absolute.db or postgresql://...",
    )
    p.add_argument("--http", type=_host_port, metavar="HOST:PORT", help="serve streamable HTTP")
    p.add_argument(
        "--tokens",
        type=Path,
        metavar="FILE",
        help="the HTTP clients' tokens (required with --http; see 'session-keeper mcp token')",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --http on a non-loopback address (put TLS in front of it)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help="a Host header the server answers to (repeatable; needed for 0.0.0.0)",
    )
    p.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="URL",
        help="an Origin allowed to call the server (repeatable; default: none)",
    )
    p.add_argument(
        "--grant",
        type=_grant,
        action="append",
        default=[],
        metavar="[CONV:]SITE[:ACTIONS]",
        help="let CONV (on stdio: the client's conversation by default) use SITE's login "
        "(repeatable)",
    )
    p.add_argument(
        "--conversation",
        action="append",
        default=None,
        metavar="NAME",
        help='the stdio client\'s conversation (default "mcp"); repeat it to let the client '
        "pick among several with _meta",
    )
    p.add_argument(
        "--console",
        metavar="HOST:PORT",
        help="also serve the web console there (loopback; extra 'console'), so "
        "browser_request_sign_in can hand a person a one-time link to sign in themselves",
    )
    p.add_argument(
        "--upload-dir",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="a directory browser_file_upload and browser_drop may read files from "
        "(repeatable; default none: uploads are refused). Symlinks and '..' are resolved "
        "before the check; file: URLs never load by navigation",
    )
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
    add_playwright_options(p)
    return p


class SignInConsole(SignInLinks, Protocol):
    """A console the server runs beside it (what ``--console`` starts)."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> Any: ...

    @property
    def url(self) -> str: ...


#: Builds the ``--console`` for a keeper at a ``HOST:PORT`` (given by the command that
#: may import the console: the faces do not import each other).
ConsoleFactory = Callable[[SessionKeeper[Any], str], SignInConsole]


async def run(args: argparse.Namespace, *, make_console: ConsoleFactory | None = None) -> None:
    """Build the keeper, its Guard and the server from ``args``; serve until done."""
    async with AsyncExitStack() as stack:
        backend: PlaywrightBackend | CdpBackend
        if args.cdp_endpoint is not None:
            backend = CdpBackend(args.cdp_endpoint, test_id_attribute=args.test_id_attribute)
        else:
            profile = args.profile
            if args.isolated:
                # No login outlives the server: the profile goes with it.
                # (Chromium's helpers may still write it as they exit: ignore those.)
                temp = tempfile.TemporaryDirectory(prefix="sk-mcp-", ignore_cleanup_errors=True)
                profile = Path(stack.enter_context(temp))
            backend = PlaywrightBackend(
                profile,
                executable_path=args.executable,
                headless=not args.headed,
                host_resolver_rules=args.host_resolver_rules,
                viewport=args.viewport_size,
                device_scale_factor=args.device_scale_factor,
                test_id_attribute=args.test_id_attribute,
            )
        store = None
        if args.store is not None:
            store = await stack.enter_async_context(store_from_url(args.store))
        keeper = SessionKeeper(
            backend,
            grants=args.grants,
            durability=Durability(store=store),
            idle_timeouts=IdleTimeouts(browser=timedelta(seconds=args.idle_timeout)),
        )
        Guard(keeper)  # enforces the grants on every browser it launches
        await stack.enter_async_context(keeper)
        stack.push_async_callback(backend.aclose)
        keeper.start_sweeper(every=timedelta(seconds=args.sweep_every))
        console = None
        if args.console is not None:
            assert make_console is not None  # check_args refused --console without one
            console = await stack.enter_async_context(make_console(keeper, args.console))
            sys.stderr.write(f"session-keeper mcp: console for sign-ins at {console.url}\n")
        app = KeeperMCP(
            keeper,
            sign_in=console,
            upload_dirs=args.upload_dir,
            secrets=args.secret_values,
            action_timeout_ms=args.timeout_action,
            codegen=args.codegen,
            output_dir=args.output_dir,
            action_snapshots=args.action_snapshots,
            snapshot_boxes=args.snapshot_boxes,
            image_responses=args.image_responses,
            console_level=args.console_level,
            settle_ms=args.timeout_settle,
            default_conversation=args.conversations[0],
            # Over HTTP the tokens say who is who; on stdio the command line does.
            conversations=None if args.http is not None else args.conversations,
        )
        if args.http is not None:
            await serve_http(
                app,
                *args.http,
                tokens=args.tokens,
                allow_remote=args.allow_remote,
                allowed_hosts=args.allowed_host,
                allowed_origins=args.allowed_origin,
            )
        else:
            await serve_stdio(app)


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse, before anything starts, a grant the server could never use, an HTTP
    server nobody could call safely and an option it cannot honour; set
    ``args.conversations``, ``args.grants``, ``args.secret_values`` and ``args.notes``
    (what the start-up line says of Playwright MCP options that change nothing)."""
    args.notes = check_playwright_options(parser, args)
    if args.profile is None and not args.isolated and args.cdp_endpoint is None:
        args.profile = default_profile()
        args.profile.mkdir(parents=True, exist_ok=True)
    try:
        args.secret_values = {} if args.secrets is None else read_secrets(args.secrets)
        if args.cdp_endpoint is not None:
            check_endpoint(args.cdp_endpoint)
    except InvalidArgument as exc:
        parser.error(str(exc))
    conversations = list(dict.fromkeys(args.conversation or ["mcp"]))
    try:
        for name in conversations:
            check_name(name, "--conversation")
        args.grants = [g.resolve(conversations, http=args.http is not None) for g in args.grant]
    except (InvalidArgument, InvalidArgumentType) as exc:
        parser.error(str(exc))
    args.conversations = conversations
    for upload_dir in args.upload_dir:
        if not upload_dir.is_dir():
            parser.error(f"--upload-dir {upload_dir}: not a directory")
    if args.http is None:
        if args.tokens or args.allow_remote or args.allowed_host or args.allowed_origin:
            parser.error("--tokens, --allow-remote, --allowed-host, --allowed-origin need --http")
        return
    if args.conversation:
        parser.error("--conversation is for stdio: over --http each token names its own")
    if args.tokens is None:
        parser.error(
            "--http needs --tokens FILE: every HTTP client proves who it is "
            "(issue one with: session-keeper mcp token add --tokens FILE --conversation NAME)"
        )
    try:
        door_policy(
            *args.http,
            allow_remote=args.allow_remote,
            allowed_hosts=args.allowed_host,
            allowed_origins=args.allowed_origin,
        )
    except (InvalidArgument, OSError) as exc:
        parser.error(str(exc))
    try:
        TokenFile(args.tokens).clients()
    except TokenFileUnreadable as exc:
        # Not a usage mistake: one line saying what is wrong with the file.
        parser.exit(2, f"{parser.prog}: error: {exc}\n")


def describe_start(args: argparse.Namespace, out: TextIO) -> None:
    """Say on ``out`` (stderr: stdout is the stdio protocol) who the server serves."""
    if args.http is None:
        who = ", ".join(repr(c) for c in args.conversations)
        where = f"on stdio as conversation {who}"
    else:
        where = f"at http://{host_value(*args.http)}/mcp (conversations from {args.tokens})"
    grants = "; ".join(
        f"{g.conversation} may {'/'.join(sorted(g.actions))} {g.site}" for g in args.grants
    )
    if args.cdp_endpoint is not None:
        browser = "the browser at --cdp-endpoint"
    elif args.isolated:
        browser = "a temporary profile"
    else:
        browser = f"profile {args.profile}"
    out.write(f"session-keeper mcp: serving {where} on {browser}; grants: {grants or 'none'}\n")
    for note in args.notes:
        out.write(f"session-keeper mcp: {note}\n")
    out.flush()


def main(argv: Sequence[str] | None = None, *, make_console: ConsoleFactory | None = None) -> int:
    """``session-keeper mcp``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["token"]:
        return token_main(argv[1:])
    parser = build_parser()
    try:
        argv = expand_config(argv)
    except InvalidArgument as exc:
        parser.error(str(exc))
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.console is not None and make_console is None:
        parser.error("--console needs the session-keeper command (session-keeper mcp ...)")
    describe_start(args, sys.stderr)
    try:
        asyncio.run(run(args, make_console=make_console))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
