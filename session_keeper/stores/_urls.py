"""One meaning for a store URL, in every command and API that takes one."""

from __future__ import annotations

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores._postgres import PostgresStore
from session_keeper.stores._protocol import Store
from session_keeper.stores._sqlite import SqliteStore


def store_from_url(url: str, *, read_only: bool = False) -> Store:
    """The (unopened) store ``url`` names, the way SQLAlchemy spells them.

    - ``postgresql://…`` or ``postgres://…``: a :class:`PostgresStore`.
    - ``sqlite:///agent.db``: the file ``agent.db`` relative to the working directory;
      ``sqlite:////var/lib/agent.db``: the absolute path ``/var/lib/agent.db``.
    - a plain path (``agent.db``, ``/var/lib/agent.db``): that file.

    Raises :class:`InvalidArgumentType` for a non-``str`` and :class:`InvalidArgument`
    for an empty URL, a ``sqlite:`` URL without ``///`` or another scheme.
    """
    if not isinstance(url, str):
        raise InvalidArgumentType(f"a store URL is a str, not {type(url).__name__}")
    if not url.strip():
        raise InvalidArgument("a store URL must not be empty")
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url, read_only=read_only, min_size=1, max_size=4)
    if url.startswith("sqlite:"):
        if not url.startswith("sqlite:///") or url == "sqlite:///":
            raise InvalidArgument(
                "a SQLite store URL is sqlite:///relative.db or sqlite:////absolute.db"
            )
        return SqliteStore(url.removeprefix("sqlite:///"), read_only=read_only)
    scheme, sep, _ = url.partition("://")
    if sep and scheme.isalpha():
        raise InvalidArgument(
            f"unknown store URL scheme {scheme!r}: use sqlite:///PATH, postgresql://... "
            "or a file path"
        )
    return SqliteStore(url, read_only=read_only)


def sqlite_path(url: str) -> str | None:
    """The file a store URL names when it is a SQLite store (``None`` for PostgreSQL or a
    URL :func:`store_from_url` refuses)."""
    if not isinstance(url, str) or not url.strip():
        return None
    if url.startswith(("postgresql://", "postgres://")):
        return None
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///")
        return path if url.startswith("sqlite:///") and path else None
    scheme, sep, _ = url.partition("://")
    return None if sep and scheme.isalpha() else url
