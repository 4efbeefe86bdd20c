"""How every ``session-keeper`` command reports a mistake: one line on stderr, exit 2.

A person (or an MCP client's log pane, which shows only the last lines) reads
``session-keeper mcp: error: <what is wrong> (fix: <what to do>)`` and nothing else: no
usage block, no traceback. :class:`CommandParser` makes argparse say it that way, and
:func:`fail` is the same line for a mistake found after parsing (a store that cannot be
opened, a profile another server holds).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, TextIO

from session_keeper.errors import UsageError

#: The exit status of every refused start (argparse's own for a usage error).
USAGE_EXIT = 2


class ConfigProblem(UsageError):
    """A configuration a command cannot run with: ``what`` is wrong, ``fix`` says how."""

    def __init__(self, what: str, fix: str | None = None) -> None:
        super().__init__(what if fix is None else f"{what} (fix: {fix})")
        self.what = what
        self.fix = fix


def error_line(prog: str, message: str, fix: str | None = None) -> str:
    """``PROG: error: MESSAGE (fix: FIX)``, on one line whatever the message holds."""
    text = " ".join(message.split())
    if fix is not None:
        text = f"{text} (fix: {' '.join(fix.split())})"
    return f"{prog}: error: {text}"


def fail(prog: str, message: str, fix: str | None = None, *, err: TextIO | None = None) -> int:
    """Write :func:`error_line` to stderr; returns :data:`USAGE_EXIT` for ``main`` to return."""
    stream = sys.stderr if err is None else err
    stream.write(error_line(prog, message, fix) + "\n")
    stream.flush()
    return USAGE_EXIT


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line naming the fix.

    A message that carries no ``(fix: ...)`` of its own points at ``PROG --help``.
    """

    def error(self, message: str) -> NoReturn:
        """Print the one line and exit 2 (argparse calls this for every usage error)."""
        fix = None if "(fix:" in message else f"see '{self.prog} --help'"
        fail(self.prog, message, fix)
        raise SystemExit(USAGE_EXIT)
