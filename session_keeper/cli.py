"""``session-keeper``: the MCP server, the web console, and a look inside a store.

Examples::

    session-keeper mcp --profile ~/.agent-profile --grant billing.example  # extra "mcp"
    session-keeper console --store sqlite:///agent.db [--bind 127.0.0.1:8765]
    session-keeper store generations --db agent.db
    session-keeper store ledger --db agent.db --json
    session-keeper store jobs --dsn postgresql://localhost/agents
    session-keeper store events --db agent.db --limit 50 --job catalogue-audit-001
    session-keeper store prune --db agent.db --events-older-than 30d --results-older-than 90d
    SESSION_KEEPER_KEY_FILE=keys session-keeper store prune --db agent.db --audit-older-than 365d

The store commands also work as first written (``session-keeper --db agent.db ledger``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import signal
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper._security.audit import AuditLog
from session_keeper._security.keyring import Keyring
from session_keeper._util.clock import SystemClock
from session_keeper._util.commands import CommandParser, ConfigProblem, fail
from session_keeper._util.redact import redact_text
from session_keeper._util.version import package_version
from session_keeper.errors import AuditTampered, SessionKeeperError, StoreError, UsageError
from session_keeper.jobs import Job
from session_keeper.stores import (
    Event,
    PostgresStore,
    SqliteStore,
    Store,
    open_failure,
    sqlite_path,
    sqlite_problem,
    store_from_url,
    url_problem,
)

_DESCRIPTION = """\
Keeps a persistent Chromium honest for AI agents. Start here:

  session-keeper mcp --profile DIR --grant SITE   serve the browser to an MCP client
                                                  (Claude Desktop, Cursor, your app)
  session-keeper console --store agent.db         a web console over what a store holds
  session-keeper store ledger --db agent.db       look inside a store (see store --help)

Each command's own --help says more.
"""

_STORE_DESCRIPTION = """\
Inspect a session_keeper store without changing it (SQLite is opened read-only,
PostgreSQL sessions are read-only). Only "prune" writes: it forgets old events and
the results of long-ended jobs, keeping the audit chain and what running jobs read,
and archives the audit chain's oldest part below a mark sealed with the keeper's keys
(from $SESSION_KEEPER_KEYS or $SESSION_KEEPER_KEY_FILE, as the keeper reads them).
--db/--dsn, --json and --keeper-id go before or after the command.

generations, ledger and grants come from the keeper's state document, whose shape
is written by the SessionKeeper, not by the store: "generation" (the current one),
"generations" [{generation, started_at, ended_at, cause}], "logins" [{site, owner,
account, recorded_at, generation, cookies: [{name, fingerprint}]}], "grants" [...]
and "tabs" [...]. Missing keys are shown as empty. The ledger shows cookie names
and fingerprints only; the store never holds cookie values.
"""

_MAX_CELL = 60

#: The store commands (``session-keeper store COMMAND``).
STORE_COMMANDS = ("generations", "ledger", "grants", "jobs", "events", "metrics", "prune")


def _build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="session-keeper",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="face", required=True, metavar="COMMAND")
    # Listed for --help; main() hands them their own parsers.
    commands.add_parser(
        "mcp",
        help="the MCP server: one persistent Chromium for MCP clients (extra 'mcp')",
        add_help=False,
    )
    commands.add_parser(
        "console",
        help="a read-only web console over a store (extra 'console')",
        add_help=False,
    )
    store = commands.add_parser(
        "store",
        help="look inside a store: generations, ledger, grants, jobs, events, metrics, prune",
        description=_STORE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_store_options()],
    )
    _add_store_commands(store)
    return parser


def _store_options() -> CommandParser:
    """The options every store command takes, before or after its name.

    Their defaults are suppressed, so one given before the command is not reset by the
    command's own parser; :func:`_store_args` fills them in and checks them.
    """
    common = CommandParser(add_help=False)
    common.add_argument(
        "--db", metavar="PATH", default=argparse.SUPPRESS, help="a SQLite store file"
    )
    common.add_argument("--dsn", default=argparse.SUPPRESS, help="a PostgreSQL connection string")
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, not a table"
    )
    common.add_argument(
        "--keeper-id",
        default=argparse.SUPPRESS,
        help="only this keeper's state (default: every keeper in the store)",
    )
    return common


def _add_store_commands(store: argparse.ArgumentParser) -> None:
    common = _store_options()
    commands = store.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "generations", parents=[common], help="browser generations (restarts) per keeper"
    )
    commands.add_parser("ledger", parents=[common], help="recorded logins, fingerprints only")
    commands.add_parser("grants", parents=[common], help="login grants per conversation")
    jobs = commands.add_parser("jobs", parents=[common], help="jobs with their last checkpoint")
    jobs.add_argument("--state", action="append", help="only jobs in this state (repeatable)")
    events = commands.add_parser("events", parents=[common], help="recent events, oldest first")
    events.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    events.add_argument("--job", help="only this job's events")
    commands.add_parser(
        "metrics",
        parents=[common],
        help="completions (first attempt vs recovered), safe stops, recoveries, stalls",
    )
    prune = commands.add_parser(
        "prune",
        parents=[common],
        help="forget old events, ended jobs' results and old write intents; archive the audit"
        " chain's oldest part",
    )
    prune.add_argument(
        "--events-older-than",
        type=_age,
        metavar="AGE",
        help="forget events older than AGE (e.g. 30d, 12h, 90m)",
    )
    prune.add_argument(
        "--results-older-than",
        type=_age,
        metavar="AGE",
        help="forget results of jobs that ended more than AGE ago",
    )
    prune.add_argument(
        "--write-intents-older-than",
        type=_age,
        metavar="AGE",
        help="forget the durable steps' write intents recorded more than AGE ago (keep them"
        " longer than any workflow may sit cancelled or suspended before it runs again)",
    )
    prune.add_argument(
        "--audit-older-than",
        type=_age,
        metavar="AGE",
        help="archive the audit chain's entries older than AGE below a sealed mark it goes"
        " on from (needs the keeper's keys: $SESSION_KEEPER_KEYS or $SESSION_KEEPER_KEY_FILE)",
    )


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``: a non-negative age."""
    number, unit = text[:-1], text[-1:]
    if unit not in _AGE_UNITS or not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an age such as 30d, 12h, 90m or 45s")
    return timedelta(seconds=int(number) * _AGE_UNITS[unit])


def _as_first_written(argv: list[str]) -> list[str]:
    """``--db x ledger`` / ``ledger --db x`` (the first shape) as ``store ...``."""
    if argv[:1] in (["store"], ["mcp"], ["console"]):
        return argv
    if any(a in STORE_COMMANDS for a in argv):
        return ["store", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["console"]:
        if not _has_extra("console", ("starlette", "uvicorn", "jinja2")):
            return 2
        return _console(args_list[1:])
    if args_list[:1] == ["mcp"]:
        # The MCP server has its own options (and needs the "mcp" extra).
        if not _has_extra("mcp", ("mcp", "uvicorn", "PIL")):
            return 2
        from session_keeper.mcp._serve import main as mcp_main

        wants_console = any(a == "--console" or a.startswith("--console=") for a in args_list)
        if wants_console and not _has_extra("console", ("starlette", "uvicorn", "jinja2")):
            return 2
        return mcp_main(args_list[1:], make_console=_sign_in_console if wants_console else None)
    parser = _build_parser()
    args = parser.parse_args(_as_first_written(args_list))
    _store_args(parser, args)
    try:
        return asyncio.run(_main(args, sys.stdout))
    except SessionKeeperError as exc:
        return fail("session-keeper store", str(exc), _store_fix(args, exc))


def _store_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Fill in the suppressed store options; exactly one of ``--db`` / ``--dsn``."""
    args.json = getattr(args, "json", False)
    args.keeper_id = getattr(args, "keeper_id", None)
    args.db = getattr(args, "db", None)
    args.dsn = getattr(args, "dsn", None)
    where = "session-keeper store"
    if args.db is None and args.dsn is None:
        fail(where, f"{args.command} needs a store", "add --db PATH (SQLite) or --dsn DSN")
        raise SystemExit(2)
    if args.db is not None and args.dsn is not None:
        fail(where, "--db and --dsn both given", "give one store: --db PATH or --dsn DSN")
        raise SystemExit(2)


def _store_fix(args: argparse.Namespace, exc: SessionKeeperError) -> str | None:
    """What to do about a store command's failure, when the store is the problem."""
    if not isinstance(exc, StoreError):
        return None  # a usage or integrity error: its message says what to do
    if args.db is not None:
        problem = sqlite_problem(args.db, read_only=True)
        if problem is not None:
            return problem.fix
    return open_failure(args.db if args.db is not None else args.dsn, exc).fix


def _sign_in_console(keeper: Any, bind: str) -> Any:
    """The console ``session-keeper mcp --console`` serves beside the MCP server."""
    from session_keeper.console import Console

    return Console(keeper, bind=bind)


def _has_extra(extra: str, modules: Sequence[str]) -> bool:
    """Whether ``extra``'s modules are installed; if not, say the ``pip install`` to run."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        fail(
            f"session-keeper {extra}",
            f"it needs the {extra} extra ({', '.join(missing)} not installed)",
            f"pip install 'session-keeper[{extra}]'",
        )
    return not missing


def open_store(url: str, *, read_only: bool = False) -> Store:
    """The store a URL names (see :func:`~session_keeper.stores.store_from_url`)."""
    return store_from_url(url, read_only=read_only)


def _console(argv: Sequence[str]) -> int:
    parser = CommandParser(
        prog="session-keeper console",
        description="A read-only web console over a store (jobs, events, what every "
        "keeper saved). The live view, borrow approvals and sign-in hand-off need the "
        "keeper's own process: mount session_keeper.console.Console there.",
    )
    parser.add_argument("--store", required=True, help="sqlite:///path.db or postgresql://...")
    parser.add_argument("--bind", default="127.0.0.1:8765", help="host:port (loopback)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback bind (only behind your own authenticating proxy)",
    )
    parser.add_argument("--user", default="operator", help="who the printed link signs in")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(_serve_console(args, sys.stdout))
    except ConfigProblem as problem:
        return fail(parser.prog, problem.what, problem.fix)
    except SessionKeeperError as exc:
        return fail(parser.prog, str(exc))


def _shown(url: str) -> str:
    """A store URL as an error may quote it: a PostgreSQL DSN without its password."""
    return url if sqlite_path(url) is not None else redact_text(url, limit=200)


async def _serve_console(args: argparse.Namespace, out: TextIO) -> int:
    from session_keeper.console import Console

    console = Console(
        store=open_store(args.store, read_only=True),
        bind=args.bind,
        allow_remote=args.allow_remote,
        user=args.user,
    )  # refuses a bind it may not serve, before the store is looked at
    assert console.store is not None
    # Checked before anything is served: the store is there and opens.
    problem = url_problem(args.store, read_only=True)
    if problem is not None:
        raise ConfigProblem(f"--store {args.store}: {problem.what}", problem.fix)
    try:
        await console.store.open()
    except StoreError as exc:
        failure = open_failure(args.store, exc)
        raise ConfigProblem(f"--store {_shown(args.store)}: {failure.what}", failure.fix) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(console.store)
        try:
            await stack.enter_async_context(console)
        except OSError as exc:
            raise ConfigProblem(
                f"--bind {args.bind}: cannot serve there ({exc.strerror or exc})",
                "pick a free port, e.g. --bind 127.0.0.1:8766",
            ) from None
        out.write(f"console: {console.login_link()}\n")
        out.write(f"bearer token: {console.auth.token}\n")
        out.flush()
        await stop.wait()
    return 0


async def _prune(args: argparse.Namespace) -> list[dict[str, Any]]:
    ages = (
        args.events_older_than,
        args.results_older_than,
        args.audit_older_than,
        args.write_intents_older_than,
    )
    if all(age is None for age in ages):
        raise UsageError(
            "prune needs --events-older-than, --results-older-than, --write-intents-older-than"
            " and/or --audit-older-than"
        )
    # The keys first: without them the store is not even opened. With keys the chain
    # was not sealed with, the archive (run before the other passes) removes nothing.
    keyring = Keyring.load() if args.audit_older_than is not None else None
    store: Store
    if args.db is not None:
        # Pruning a file that is not there would create an empty store: refuse it.
        if not await asyncio.to_thread(Path(args.db).is_file):
            raise UsageError(f"no store at {args.db}")
        store = SqliteStore(args.db)
    else:
        store = PostgresStore(args.dsn, min_size=1, max_size=1)
    rows: list[dict[str, Any]] = []
    async with store:
        if keyring is not None:
            # First: a chain that does not verify under these keys stops the whole prune.
            try:
                archived = await AuditLog(store, keyring).archive(older_than=args.audit_older_than)
            except AuditTampered as exc:
                # Keys other than the keeper's read an intact chain as a forged one.
                raise AuditTampered(
                    f"{exc}; or these are not the keys the keeper sealed it with "
                    "(nothing was removed)"
                ) from None
            rows.append({"pruned": "audit", "removed": archived.removed})
        if args.results_older_than is not None:
            pruned = await store.prune_results(older_than=args.results_older_than)
            rows.append({"pruned": "results", "removed": pruned.removed})
        if args.events_older_than is not None:
            pruned = await store.prune_events(older_than=args.events_older_than)
            rows.append({"pruned": "events", "removed": pruned.removed})
        if args.write_intents_older_than is not None:
            pruned = await store.prune_write_intents(older_than=args.write_intents_older_than)
            rows.append({"pruned": "write_intents", "removed": pruned.removed})
    return rows


async def _main(args: argparse.Namespace, out: TextIO) -> int:
    command = args.command
    if command == "prune":
        rows = await _prune(args)
        if args.json:
            json.dump(rows, out, indent=2, ensure_ascii=False)
            out.write("\n")
        else:
            _print_table(out, rows)
        return 0
    store: Store
    if args.db is not None:
        store = SqliteStore(args.db, read_only=True)
    else:
        store = PostgresStore(args.dsn, read_only=True, min_size=1, max_size=1)
    async with store:
        if command in ("generations", "ledger", "grants"):
            states = await _keeper_states(store, args.keeper_id)
            rows = {
                "generations": _generation_rows,
                "ledger": _ledger_rows,
                "grants": _grant_rows,
            }[command](states)
        elif command == "jobs":
            rows = [_job_row(job) for job in await store.jobs(states=args.state)]
        elif command == "metrics":
            from session_keeper.jobs import summarize

            metrics = await summarize(store, now=SystemClock().now())
            rows = [{"metric": k, "value": v} for k, v in metrics.as_dict().items()]
        else:
            recent = await store.events(job_id=args.job, limit=args.limit, newest_first=True)
            rows = [_event_row(e) for e in reversed(recent)]
    if args.json:
        json.dump(rows, out, indent=2, default=str, ensure_ascii=False)
        out.write("\n")
    elif command == "jobs":
        _print_table(out, [_flatten_job(r) for r in rows])
    else:
        _print_table(out, rows)
    return 0


# ---------------------------------------------------------------- keeper state


async def _keeper_states(
    store: Store, keeper_id: str | None
) -> list[tuple[str, Mapping[str, Any]]]:
    ids = [keeper_id] if keeper_id is not None else await store.keeper_ids()
    out: list[tuple[str, Mapping[str, Any]]] = []
    for kid in ids:
        state = await saved_document(store, kid)
        if state is not None:
            out.append((kid, state))
    return out


def _items(state: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = state.get(key)
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def _generation_rows(states: list[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for kid, state in states:
        current = state.get("generation")
        for item in _items(state, "generations"):
            rows.append(
                {
                    "keeper": kid,
                    "generation": item.get("generation"),
                    "current": item.get("generation") == current,
                    "started_at": item.get("started_at"),
                    "ended_at": item.get("ended_at"),
                    "cause": item.get("cause"),
                }
            )
    return rows


def _ledger_rows(states: list[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for kid, state in states:
        for item in _items(state, "logins"):
            # Names and fingerprints only, whatever else a cookie entry might carry.
            cookies = [
                {"name": c.get("name"), "fingerprint": c.get("fingerprint")}
                for c in item.get("cookies", [])
                if isinstance(c, Mapping)
            ]
            rows.append(
                {
                    "keeper": kid,
                    "site": item.get("site"),
                    "owner": item.get("owner"),
                    "account": item.get("account"),
                    "generation": item.get("generation"),
                    "recorded_at": item.get("recorded_at"),
                    "cookies": cookies,
                }
            )
    return rows


def _grant_rows(states: list[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    return [{"keeper": kid, **item} for kid, state in states for item in _items(state, "grants")]


# ---------------------------------------------------------------- jobs and events


def _job_row(job: Job) -> dict[str, Any]:
    lease = job.lease
    return {
        "job_id": job.job_id,
        "state": job.state,
        "submitted_at": job.submitted_at.isoformat(),
        "updated_at": job.updated_at.isoformat(),
        "lease": None
        if lease is None
        else {"owner": lease.owner, "token": lease.token, "expires_at": lease.expires_at},
        "checkpoint": job.checkpoint.to_dict(),
        "contract": job.contract.to_dict(),
    }


def _flatten_job(row: Mapping[str, Any]) -> dict[str, Any]:
    checkpoint = row["checkpoint"]
    lease = row["lease"]
    return {
        "job_id": row["job_id"],
        "state": row["state"],
        "rev": checkpoint["checkpoint_revision"],
        "last_step": checkpoint["last_committed_step"],
        "next_cursor": checkpoint["next_cursor"],
        "attempts": checkpoint["attempts_used"],
        "deadline_at": checkpoint["deadline_at"],
        "lease": None if lease is None else f"{lease['owner']}#{lease['token']}",
        "lease_expires": None if lease is None else lease["expires_at"],
        "pause_reason": checkpoint["pause_reason"],
    }


def _event_row(event: Event) -> dict[str, Any]:
    return {k: v for k, v in event.to_dict().items() if v is not None}


# ---------------------------------------------------------------- tables


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "*" if value else ""
    if isinstance(value, datetime):
        return value.isoformat()
    cookie_keys = {"name", "fingerprint"}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, Mapping) and set(v) <= cookie_keys for v in value)
    ):
        return ", ".join(f"{v.get('name')}={str(v.get('fingerprint'))[:12]}" for v in value)
    if isinstance(value, list | tuple | set):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, Mapping):
        return json.dumps(value, default=str, separators=(",", ":"))
    text = str(value)
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def _print_table(out: TextIO, rows: list[dict[str, Any]]) -> None:
    if not rows:
        out.write("(nothing)\n")
        return
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    out.write("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    out.write("\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
