"""``session-keeper mcp token add|list|revoke``: manage the HTTP clients' tokens file."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from session_keeper.errors import InvalidArgument
from session_keeper.mcp._tokens import McpClient, TokenFile

_DESCRIPTION = """\
Bearer tokens for MCP clients over HTTP. Each token names the conversations its
client may act as (the first is its default). The token is printed once, by "add";
the file keeps only its SHA-256 digest. A running server picks up changes to the
file on the next request, so "revoke" takes effect at once.

  session-keeper mcp token add --tokens FILE --conversation billing [--name alice]
  session-keeper mcp token list --tokens FILE [--json]
  session-keeper mcp token revoke --tokens FILE TOKEN_ID_OR_NAME
"""


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--tokens", type=Path, required=True, metavar="FILE")
    p = argparse.ArgumentParser(
        prog="session-keeper mcp token",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = sub.add_parser("add", parents=[common], help="issue a token (printed once)")
    add.add_argument(
        "--conversation",
        action="append",
        required=True,
        help="a conversation the token may act as (repeatable; the first is the default)",
    )
    add.add_argument("--name", help="who holds it (shown in the list)")
    listing = sub.add_parser("list", parents=[common], help="the tokens issued (never a token)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    revoke = sub.add_parser("revoke", parents=[common], help="revoke a token by id or name")
    revoke.add_argument("which", metavar="TOKEN_ID_OR_NAME")
    return p


def _row(c: McpClient) -> str:
    return f"{c.id}  {c.name or '-'}  {','.join(c.conversations)}  {c.created_at:%Y-%m-%d %H:%M}"


def token_main(argv: Sequence[str]) -> int:
    """Run ``session-keeper mcp token ...``; returns the exit status."""
    args = _parser().parse_args(argv)
    book = TokenFile(args.tokens)
    try:
        if args.command == "add":
            client, token = book.add(args.conversation, name=args.name)
            print(
                f"issued {client.id} for {', '.join(client.conversations)}; the token is shown "
                "once, keep it in the client's config as 'Authorization: Bearer <token>':",
                file=sys.stderr,
            )
            print(token)
        elif args.command == "list":
            clients = book.clients()
            if args.json:
                rows = [{k: v for k, v in c.to_dict().items() if k != "sha256"} for c in clients]
                print(json.dumps(rows, indent=2))
            else:
                for c in clients:
                    print(_row(c))
        else:
            gone = book.revoke(args.which)
            print(f"revoked {gone.id} ({', '.join(gone.conversations)})")
    except (InvalidArgument, OSError) as exc:
        print(f"session-keeper mcp token: error: {exc}", file=sys.stderr)
        return 2
    return 0
