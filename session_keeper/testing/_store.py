"""Testing mode for stores: hooks a test sets on a store, never constructor arguments.

Like stamina's testing mode, these switch behaviour that production never needs
(watching every statement of a commit, holding the database thread, running a raw
statement) on one store object, from a test, through a documented function.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeVar

from session_keeper.errors import InvalidArgumentType
from session_keeper.stores import SqliteStore
from session_keeper.stores._engine import Engine, run_operation, set_statement_hook
from session_keeper.stores._sql import Q as StoreStatement
from session_keeper.stores._sqlite import occupy_thread

__all__ = [
    "StoreOperation",
    "StoreStatement",
    "occupy_store_thread",
    "run_store_operation",
    "watch_store_statements",
]

T = TypeVar("T")
#: A raw store operation: yields statements, receives each one's rows, returns a value.
StoreOperation = Generator[StoreStatement, list[tuple[Any, ...]], T]


def _check_store(store: object) -> Engine:
    if not isinstance(store, Engine):
        raise InvalidArgumentType(f"expected a SqliteStore or PostgresStore, not {store!r}")
    return store


def watch_store_statements(store: object, hook: Callable[[str], None] | None) -> None:
    """Call ``hook(label)`` before each statement ``store`` runs, then ``"COMMIT"``
    just before committing and ``"COMMITTED"`` once the commit returned.

    Crash tests use it to kill the process at every point of a commit. ``None``
    turns it off. Raises :class:`InvalidArgumentType` for anything but a store.
    """
    set_statement_hook(_check_store(store), hook)


def occupy_store_thread(store: SqliteStore, seconds: float) -> None:
    """Keep an open SqliteStore's database thread busy for ``seconds``, so that the
    writes issued meanwhile queue up and share one group commit.

    Raises :class:`InvalidArgumentType` for anything but a SqliteStore, and
    :class:`StoreError` if it is not open.
    """
    if not isinstance(store, SqliteStore):
        raise InvalidArgumentType("occupy_store_thread needs a SqliteStore")
    occupy_thread(store, seconds)


async def run_store_operation(
    store: object, operation: Callable[[], StoreOperation[T]], *, write: bool = True
) -> T:
    """Run a raw ``operation`` in one transaction of ``store``, as the store runs its own
    (write operations join SQLite's group commit); every attempt calls ``operation()``
    afresh. For tests of the transaction machinery itself.
    """
    return await run_operation(_check_store(store), operation, write=write)
