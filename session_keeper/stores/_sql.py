"""The vocabulary of store operations, shared by both dialects ("sans-I/O").

An operation is a generator: it yields :class:`Q` (one SQL statement) and receives
the statement's rows, and yields :class:`Emit` for an event to log once the
transaction is committed. A driver runs it inside one transaction (see
:mod:`._engine`). A raised exception rolls the transaction back, so the order of
checks in an operation is also the order of the errors a caller sees, and nothing
is written when one is raised.

SQL is written with ``?`` placeholders in the common subset of both dialects;
``Q.pg_suffix`` adds PostgreSQL's row locks (SQLite needs none: ``BEGIN
IMMEDIATE`` already makes the writer exclusive) and the ``RETURNING`` of an
inserted id, which SQLite's driver reads without one (``Q.answer``). Timestamps are
passed as aware ``datetime`` and read back through :func:`as_dt`.

This module also holds the value helpers and argument checks every operation uses.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar

import attrs

from session_keeper.errors import InvalidArgument, InvalidArgumentType, StoreCorrupt
from session_keeper.stores._records import Event, Lease

Row = tuple[Any, ...]
T = TypeVar("T")
#: What a driver runs: statements in, rows back, a result at the end.
Op = Generator["Q", list[Row], T]
#: What an operation is written as: statements, plus events to log after COMMIT.
Step = Generator["Q | Emit", list[Row], T]
#: What a statement answers: its rows, one row ``(n,)``, or nothing (see :attr:`Q.answer`).
Answer = Literal["rows", "changes", "rowid", "none"]


@attrs.frozen
class Q:
    """One SQL statement. ``label`` names the point for crash-injection hooks."""

    label: str
    sql: str
    params: tuple[object, ...] = ()
    #: Appended on PostgreSQL only (row locks such as ``FOR UPDATE``, ``RETURNING id``).
    pg_suffix: str = ""
    #: The whole statement for PostgreSQL (``%s`` placeholders), where the dialects differ.
    pg_sql: str | None = attrs.field(default=None, kw_only=True)
    #: One parameter tuple per row: the statement runs as one batch (``executemany``;
    #: pipelined on PostgreSQL, so a batch of N rows is not N awaited round trips).
    #: ``params`` is ignored then, and the statement returns no rows.
    many: tuple[tuple[object, ...], ...] | None = attrs.field(default=None, kw_only=True)
    #: ``"rows"``: the statement's rows. ``"changes"``: one row ``(rows written,)``, the
    #: driver's count (a ``RETURNING`` clause only to count rows costs SQLite more than
    #: the write itself). ``"rowid"``: one row ``(the inserted row's id,)``; SQLite reads
    #: its last rowid, so ``sql`` has no ``RETURNING`` and ``pg_suffix`` returns the id.
    #: ``"none"``: the operation does not read the answer (it gets ``[]``), so a driver
    #: need not wait for it: PostgreSQL's sends it on with the next statement or the
    #: COMMIT (pipeline mode), and an error in it still fails the transaction.
    answer: Answer = attrs.field(default="rows", kw_only=True)


@attrs.frozen
class Emit:
    """An event the operation stored; logged once its transaction has committed."""

    event: Event


def collect(step: Step[T]) -> Op[tuple[T, list[Event]]]:
    """Run ``step`` as a driver's :data:`Op`, gathering the events it emits.

    Called afresh for every attempt (a retried transaction starts again), so an
    attempt that rolled back logs nothing.
    """
    events: list[Event] = []
    try:
        item = next(step)
        while True:
            if isinstance(item, Emit):
                events.append(item.event)
                item = next(step)
            else:
                rows = yield item
                item = step.send(rows)
    except StopIteration as stop:
        return stop.value, events


# ---------------------------------------------------------------- values


def as_dt(value: object) -> datetime:
    """A stored timestamp (ISO text from SQLite, ``datetime`` from PostgreSQL) in UTC."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise StoreCorrupt("a stored timestamp is not ISO 8601") from None
        if parsed.tzinfo is not None:
            return parsed.astimezone(UTC)
    raise StoreCorrupt("a stored timestamp is malformed")


def opt_dt(value: object) -> datetime | None:
    """Like :func:`as_dt`, passing ``None`` through."""
    return None if value is None else as_dt(value)


def load_json(text: object, what: str) -> Any:
    """Parse stored JSON text; :class:`StoreCorrupt` if it is not."""
    if isinstance(text, bytes | memoryview):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        raise StoreCorrupt(f"{what} is not JSON text")
    try:
        return json.loads(text)
    except ValueError:
        raise StoreCorrupt(f"{what} is not valid JSON") from None


def load_mapping(text: object, what: str) -> dict[str, object]:
    """Parse stored JSON text that must be an object."""
    value = load_json(text, what)
    if not isinstance(value, dict):
        raise StoreCorrupt(f"{what} is not a JSON object")
    return value


def digest_of(data: bytes) -> str:
    """The artifact digest format: ``sha256:<hex>``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------- argument checks


def check_ttl(ttl: timedelta) -> None:
    """A positive ``timedelta``."""
    if not isinstance(ttl, timedelta):
        raise InvalidArgumentType(f"ttl must be a timedelta, not {type(ttl).__name__}")
    if ttl <= timedelta(0):
        raise InvalidArgument("ttl must be positive")


def check_str(value: object, what: str) -> str:
    """A non-blank ``str``."""
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(f"{what} must not be empty")
    return value


def check_lease(lease: object) -> Lease:
    """A :class:`Lease`."""
    if not isinstance(lease, Lease):
        raise InvalidArgumentType(f"lease must be a Lease, not {type(lease).__name__}")
    return lease


def check_revision(value: object) -> int:
    """An ``int`` (not a ``bool``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentType("expected_revision must be an int")
    return value


def check_attempts(value: object) -> int | None:
    """``None`` or a non-negative ``int``."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgument("attempts_used must be a non-negative int")
    return value
