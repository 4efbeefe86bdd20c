"""Running the server: stdio, streamable HTTP, and ``session-keeper mcp`` (the CLI)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import socket
import stat
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TextIO, cast

import attrs
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings

from session_keeper._browser.cdp import CdpBackend
from session_keeper._browser.cdp_endpoint import check_endpoint
from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper._guard.guard import Guard
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.facade.settings import Durability, IdleTimeouts
from session_keeper._model.cookies import normalize_site
from session_keeper._model.grants import DEFAULT_ACTIONS, Grant, check_name
from session_keeper._util.binds import is_loopback, parse_bind
from session_keeper._util.commands import (
    USAGE_EXIT,
    CommandParser,
    ConfigProblem,
    error_line,
    fail,
)
from session_keeper._util.redact import redact_text
from session_keeper._util.surfaces import serve_surface
from session_keeper._util.version import package_version
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    StoreError,
    TokenFileUnreadable,
)
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
from session_keeper.mcp._preflight import (
    ServerHold,
    check_chromium,
    check_display,
    check_profile,
)
from session_keeper.mcp._server import KeeperMCP
from session_keeper.mcp._token_cli import token_main
from session_keeper.mcp._tokens import TokenFile
from session_keeper.mcp._tools import SignInLinks
from session_keeper.stores import open_failure, sqlite_path, store_from_url, url_problem

#: How long an HTTP client's MCP session may stay without any request before the SDK
#: ends it (the SDK's default, said here so the door counts live sessions the same way).
SESSION_IDLE_TIMEOUT_S = 30 * 60.0

_DESCRIPTION = """\
Serve one persistent Chromium profile to many MCP clients. Every client is its own
conversation (its own tab); restart facts start the first result after a restart;
the Guard enforces each conversation's grants on the network.

Grants: --grant [CONVERSATION:]SITE[:ACTION,ACTION]; SITE is a host or a URL
(https://billing.example/ grants billing.example), the actions are read and write
(both by default). On stdio the client is --conversation (default "mcp"), and
--grant billing.example means it; a grant naming a conversation the client is not
is refused at start.
Over HTTP (--http HOST:PORT --tokens FILE) every client sends "Authorization:
Bearer <token>"; its token names the conversations it may act as (the first by
default), and every --grant names its conversation. Issue a token with:

  session-keeper mcp token add --tokens FILE --conversation billing [--name alice]

A non-loopback --http needs --allow-remote (and --allowed-host for 0.0.0.0).

Before it says it is serving, the server checks the profile (a directory, held by no
other server), the store (it opens), Chromium, and a display for --headed; a mistake
is one line "session-keeper mcp: error: ... (fix: ...)" and exit status 2.
"""


#: The longest line (one JSON-RPC message) read from stdin, in bytes.
STDIN_LINE_LIMIT = 64 * 1024 * 1024


class _StdinLines:
    """Lines of stdin, read by the event loop itself (the SDK reads them in a thread)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


@contextlib.asynccontextmanager
async def _stdin_lines() -> AsyncIterator[_StdinLines | None]:
    """stdin as lines the event loop reads, or ``None`` when it cannot (a regular file).

    A thread blocked reading stdin cannot be cancelled: a server stopped by Ctrl-C or
    SIGTERM while its client keeps stdin open would wait forever for a line. Read by
    the loop, the read is cancelled with the serving.
    """
    loop = asyncio.get_running_loop()
    if not _pollable(sys.stdin.fileno()):
        # A regular file or /dev/null: epoll refuses them (and the loop would only say
        # so in a callback, after the serving began); the SDK's own reading sees the end.
        yield None
        return
    reader = asyncio.StreamReader(limit=STDIN_LINE_LIMIT)
    fd = os.dup(sys.stdin.fileno())
    was_blocking = os.get_blocking(fd)
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except (ValueError, OSError):
        # Pollable by its kind, refused all the same: the SDK's own reading.
        pipe.close()
        yield None
        return
    try:
        yield _StdinLines(reader)
    finally:
        transport.close()
        # The flag is the pipe's (or the terminal's), shared with whoever holds it next.
        with contextlib.suppress(OSError):
            os.set_blocking(sys.stdin.fileno(), was_blocking)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on ``fd``: a pipe, a socket or a terminal."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


async def serve_stdio(app: KeeperMCP) -> None:
    """Serve ``app`` on this process's stdin/stdout until the client goes away or the
    serving is cancelled (a stop never waits for a line that will not come)."""
    async with (
        _stdin_lines() as stdin,
        stdio_server(stdin=cast(Any, stdin)) as (read, write),
    ):
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
        on_session_ended=app.session_ended,
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
    # A stop (Ctrl-C, SIGTERM) waits at most this long for open streams before closing.
    config = uvicorn.Config(
        asgi, host=host, port=port, log_level="warning", timeout_graceful_shutdown=3
    )
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


_GRANT_FORMAT = (
    "a grant is [CONVERSATION:]SITE[:ACTION,ACTION], e.g. billing.example, "
    "billing.example:read or billing:https://billing.example/:read"
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _grant(text: str) -> GrantArg:
    """``--grant``, read by what each part is: a site is a host or a URL (its host is
    kept), actions are the keeper's (read, write), a conversation is a name."""
    conversation: str | None = None
    actions: str | None = None
    scheme = _SCHEME.search(text)
    if scheme is not None:
        # A URL: its own colons (scheme, port) are not separators.
        before, url = text[: scheme.start()], text[scheme.start() :]
        if before:
            if not before.endswith(":") or ":" in before[:-1] or len(before) < 2:
                raise argparse.ArgumentTypeError(_GRANT_FORMAT)
            conversation = before[:-1]
        head, sep, tail = url.rpartition(":")
        if sep and tail and "/" not in tail and not tail.isdigit() and "://" in head:
            url, actions = head, tail
        site = url
    else:
        parts = text.split(":")
        if not all(parts) or len(parts) > 4:
            raise argparse.ArgumentTypeError(_GRANT_FORMAT)
        if len(parts) >= 2 and parts[1].isdigit():
            parts[0:2] = [f"{parts[0]}:{parts[1]}"]  # SITE:PORT
        elif len(parts) >= 3 and parts[2].isdigit():
            parts[1:3] = [f"{parts[1]}:{parts[2]}"]  # CONVERSATION:SITE:PORT
        if len(parts) == 1:
            site = parts[0]
        elif len(parts) == 2:
            first, second = parts
            if _all_actions(second) or (_looks_like_site(first) and not _looks_like_site(second)):
                site, actions = first, second  # SITE:ACTIONS (checked below)
            else:
                conversation, site = first, second
        elif len(parts) == 3:
            conversation, site, actions = parts
        else:
            raise argparse.ArgumentTypeError(_GRANT_FORMAT)
    try:
        host = normalize_site(site)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc}") from None
    return GrantArg(conversation=conversation, site=host, actions=_grant_actions(text, actions))


def _all_actions(text: str) -> bool:
    return set(text.split(",")) <= DEFAULT_ACTIONS


def _looks_like_site(text: str) -> bool:
    """A host with a dot, ``localhost`` or an IP address: never a conversation's name
    as people write them, and never an action."""
    return "." in text or text.lower() == "localhost"


def _grant_actions(text: str, actions: str | None) -> frozenset[str]:
    if actions is None:
        return DEFAULT_ACTIONS
    named = actions.split(",")
    unknown = [a for a in named if a not in DEFAULT_ACTIONS]
    if unknown or not all(named):
        valid = ", ".join(sorted(DEFAULT_ACTIONS))
        shown = ", ".join(repr(a) for a in unknown) or repr(actions)
        fixed = text[: len(text) - len(actions)] + "read"
        raise argparse.ArgumentTypeError(
            f"{text}: {shown} is not an action; the actions are {valid} "
            f"(fix: --grant {fixed}, or leave the actions out for both)"
        )
    return frozenset(named)


def _host_port(text: str) -> tuple[str, int]:
    try:
        return parse_bind(text)
    except InvalidArgument:
        raise argparse.ArgumentTypeError("--http takes HOST:PORT, e.g. 127.0.0.1:8931") from None


def build_parser() -> argparse.ArgumentParser:
    """The ``session-keeper mcp`` argument parser."""
    p = CommandParser(
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


#: The signals that stop the server cleanly (Ctrl-C, and what a supervisor sends).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve_until_stopped(
    args: argparse.Namespace, *, make_console: ConsoleFactory | None = None
) -> None:
    """:func:`run`, stopped cleanly by SIGINT or SIGTERM: the serving ends, then the
    browser, the console and the store close in order, with no traceback. A second
    signal while closing stops the process at once."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def stopping() -> None:
        stop.set()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)  # the next one takes its default course

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stopping)
    await run(args, make_console=make_console, stop=stop)


async def _serve(serving: Coroutine[Any, Any, None], stop: asyncio.Event | None) -> None:
    """Await ``serving`` until it ends or ``stop`` is set; then cancel it and return."""
    if stop is None:
        await serving
        return
    task = asyncio.ensure_future(serving)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if not task.cancelled():
        task.result()  # the serving's own failure, if it ended with one


async def open_checked_store(url: str) -> Any:
    """The store ``url`` names, checked first; raises :class:`ConfigProblem` with the
    fix when its place is unusable or it does not open (PostgreSQL: the server's reason).

    Returned open; the caller's ``async with`` opens it again (a no-op) and closes it.
    """
    problem = url_problem(url, read_only=False)
    if problem is not None:
        raise ConfigProblem(f"--store {url}: {problem.what}", problem.fix)
    store = store_from_url(url)
    try:
        await store.open()
    except StoreError as exc:
        failure = open_failure(url, exc)
        shown = url if sqlite_path(url) is not None else redact_text(url, limit=200)
        raise ConfigProblem(f"--store {shown}: {failure.what}", failure.fix) from None
    return store


async def run(
    args: argparse.Namespace,
    *,
    make_console: ConsoleFactory | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Build the keeper, its Guard and the server from ``args``; serve until done (or
    until ``stop`` is set), then close everything it opened.

    Raises :class:`ConfigProblem` for what it finds wrong before it serves (the store,
    the console's port); :func:`describe_start` is said only once all of it is in place.
    """
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
            store = await stack.enter_async_context(await open_checked_store(args.store))
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
            try:
                console = await stack.enter_async_context(make_console(keeper, args.console))
            except OSError as exc:
                raise ConfigProblem(
                    f"--console {args.console}: cannot serve there ({exc.strerror or exc})",
                    "pick a free port, e.g. --console 127.0.0.1:8766",
                ) from None
            sys.stderr.write(f"session-keeper mcp: console for sign-ins at {console.url}\n")
        app = KeeperMCP(
            keeper,
            sign_in=console,
            # A person at the window signs in there when no console hands them a page.
            window_sign_in=args.headed and args.cdp_endpoint is None,
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
            check_free(*args.http)
        # Everything it needs is in place: only now does it say it serves.
        describe_start(args, sys.stderr)
        if args.http is not None:
            serving = serve_http(
                app,
                *args.http,
                tokens=args.tokens,
                allow_remote=args.allow_remote,
                allowed_hosts=args.allowed_host,
                allowed_origins=args.allowed_origin,
            )
        else:
            serving = serve_stdio(app)
        if stop is not None and stop.is_set():
            serving.close()  # stopped while starting: nothing to serve, only to close
            return
        # uvicorn ends its serving gracefully on SIGINT and SIGTERM itself (then raises
        # the signal again): over HTTP the serving is left to end on its own.
        await _serve(serving, stop if args.http is None else None)


def check_free(host: str, port: int) -> None:
    """Raise :class:`ConfigProblem` when ``host:port`` cannot be bound now (taken, or not
    an address of this machine): said before serving, not as uvicorn's exit after."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ConfigProblem(
                f"--http {host_value(host, port)}: cannot serve there ({exc.strerror or exc})",
                "pick a free port, or stop what listens there",
            ) from None


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
        # Not a usage mistake: one line saying what is wrong with the file, and the fix.
        fix = "restore the file, or move it away and issue tokens with 'mcp token add'"
        parser.exit(USAGE_EXIT, error_line(parser.prog, str(exc), fix) + "\n")


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
    try:
        hold = preflight(args)
    except ConfigProblem as problem:
        return fail(parser.prog, problem.what, problem.fix)
    try:
        asyncio.run(serve_until_stopped(args, make_console=make_console))
    except ConfigProblem as problem:
        return fail(parser.prog, problem.what, problem.fix)
    except KeyboardInterrupt:  # a second Ctrl-C while closing: stopped, as asked
        return 0
    finally:
        if hold is not None:
            hold.release()
    # A stop by SIGINT or SIGTERM is the end a person or a supervisor asked for: 0.
    return 0


def preflight(args: argparse.Namespace) -> ServerHold | None:
    """Check what the browser needs before anything starts: a display for ``--headed``,
    Chromium, and the profile (usable, then held for this server's life: returned).

    Raises :class:`ConfigProblem`. Nothing to hold for ``--cdp-endpoint`` (the browser
    runs elsewhere) or ``--isolated`` (a fresh temporary profile at start).
    """
    if args.cdp_endpoint is not None:
        return None
    check_display(headed=args.headed)
    check_chromium(args.executable)
    if args.isolated:
        return None
    args.profile = check_profile(args.profile)
    return ServerHold.take(args.profile)


if __name__ == "__main__":
    sys.exit(main())
