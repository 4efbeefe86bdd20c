"""What is wrong with a store's place before it is opened, and what to do about it.

A command that serves (``session-keeper mcp``, ``session-keeper console``) opens its store
before it says it is serving; these are the reasons it gives a person when that fails,
each with the fix. The words name the store's path or DSN, never a command's flags.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from session_keeper.errors import SchemaVersionError, StoreCorrupt, StoreError
from session_keeper.stores._urls import sqlite_path


@attrs.frozen(kw_only=True)
class StoreProblem:
    """Why a store cannot be used, and the fix."""

    what: str
    fix: str | None


def sqlite_problem(path: str | os.PathLike[str], *, read_only: bool) -> StoreProblem | None:
    """What stops a SQLite store at ``path`` from opening (``None``: nothing found).

    Read-only: the file must be there. Read-write: the file, or its directory, must be
    a place this process may write; a missing directory is named, never created (a
    mistyped path would otherwise grow a tree).
    """
    p = Path(path).expanduser()
    if p.is_dir():
        return StoreProblem(
            what=f"{p} is a directory, not a store file", fix=f"name a file, e.g. {p / 'agent.db'}"
        )
    if read_only:
        if not p.exists():
            return StoreProblem(
                what=f"no store at {p}",
                fix="give the path of an existing store (a keeper or session-keeper mcp "
                "--store creates one)",
            )
        return None
    parent = p.parent
    if not parent.exists():
        return StoreProblem(
            what=f"directory {parent} does not exist",
            fix=f"create it (mkdir -p {parent}) or put the store in an existing directory",
        )
    if not parent.is_dir():
        return StoreProblem(
            what=f"{parent} is not a directory", fix="put the store in an existing directory"
        )
    writable = os.access(p, os.W_OK) if p.exists() else os.access(parent, os.W_OK | os.X_OK)
    if not writable:
        return StoreProblem(
            what=f"cannot write {p if p.exists() else parent} (permission denied)",
            fix="put the store where this user may write, or change the permissions",
        )
    return None


def url_problem(url: str, *, read_only: bool) -> StoreProblem | None:
    """:func:`sqlite_problem` for a store URL that names a SQLite file; else ``None``."""
    path = sqlite_path(url)
    return None if path is None else sqlite_problem(path, read_only=read_only)


def open_failure(url: str, exc: StoreError) -> StoreProblem:
    """The fix for a store at ``url`` that raised ``exc`` while opening."""
    if isinstance(exc, SchemaVersionError):
        return StoreProblem(what=str(exc), fix=None)  # its message says what to do
    if isinstance(exc, StoreCorrupt):
        return StoreProblem(
            what=str(exc),
            fix="point at a session_keeper store; move a damaged file aside to start afresh",
        )
    if sqlite_path(url) is None:
        return StoreProblem(
            what=str(exc),
            fix="start PostgreSQL there, or correct the DSN (host, port, database, user)",
        )
    return StoreProblem(what=str(exc), fix="give a store path this user may create and write")
