"""SqliteStore: the embedded default. One file, WAL, ``synchronous=FULL``.

Why it is built this way:

- Every blocking sqlite3 call runs on one dedicated thread per store, so the event
  loop never waits on disk, and one connection is never used by two threads.
- Writes start with ``BEGIN IMMEDIATE``: the write lock is taken up front, so two
  writers never both read and then fail to upgrade (SQLite's ``SQLITE_BUSY``
  deadlock that the busy handler cannot resolve).
- Lock contention from other connections or processes is waited out by SQLite's
  busy handler, and any ``SQLITE_BUSY`` that still escapes makes us retry the whole
  operation (it rolled back, so nothing half-happened). Callers never see
  "database is locked"; past the busy timeout they get :class:`StoreBusy`.
- ``synchronous=FULL`` in WAL mode fsyncs the log on every commit: a commit that
  returned survives power loss, not only a process crash.
- Concurrent writes are group-committed (one transaction, one fsync), so many async
  writers do not each wait for their own fsync; each operation still succeeds or
  fails on its own.
- Timestamps are fixed-width ISO-8601 UTC text (microseconds always present), so
  text order is time order and SQL can compare them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar, cast
from urllib.parse import quote

import attrs

from session_keeper._util.clock import Clock
from session_keeper.errors import (
    InvalidArgument,
    SchemaVersionError,
    StoreBusy,
    StoreCorrupt,
    StoreError,
)
from session_keeper.stores._core import SqlStore
from session_keeper.stores._schema import META_TABLE, SCHEMA_VERSION, migration_statements
from session_keeper.stores._sql import Op

T = TypeVar("T")
U = TypeVar("U")

_MEMORY: Final = ":memory:"
_WRITES: Final = ("INSERT", "UPDATE", "DELETE")


class _FailedAfterWriting(Exception):
    """Internal: op ``position`` of a batch raised ``error`` after it had written."""

    def __init__(self, position: int, error: BaseException) -> None:
        super().__init__(position)
        self.position = position
        self.error = error


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


class SqliteStore(SqlStore):
    """The :class:`~session_keeper.Store` in one SQLite file.

    ``async with SqliteStore("agent.db") as store: ...``. Many stores (in this or
    other processes) may open the same file; writes are serialised by SQLite.
    ``":memory:"`` gives a private in-memory store (no WAL, gone on close) for tests.

    ``read_only=True`` opens an existing store without migrating or writing (the
    CLI uses it); writes then raise :class:`StoreError`. ``busy_timeout`` bounds
    how long one call waits for other writers before :class:`StoreBusy`.
    ``check_integrity=True`` runs ``PRAGMA quick_check`` on open.
    """

    db_system = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        busy_timeout: float = 30.0,
        read_only: bool = False,
        check_integrity: bool = False,
    ) -> None:
        super().__init__(clock=clock)
        if busy_timeout <= 0:
            raise InvalidArgument("busy_timeout must be positive")
        self._path = os.fspath(path)
        self._busy_timeout = float(busy_timeout)
        self._read_only = read_only
        self._check_integrity = check_integrity
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._pending: list[_Pending] = []
        self._pending_lock = threading.Lock()
        self._flush_scheduled = False
        #: Write statements run so far (the database thread's own counter).
        self._writes = 0

    @property
    def path(self) -> str:
        """The database file (or ``":memory:"``)."""
        return self._path

    def __repr__(self) -> str:
        return f"SqliteStore({self._path!r})"

    # -- lifetime

    async def open(self) -> None:
        """See :meth:`Store.open`."""
        if self._closed:
            raise StoreError("this store was closed; create a new one")
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sk-sqlite")
        try:
            await self._in_thread(self._open_sync)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    async def close(self) -> None:
        """See :meth:`Store.close`."""
        self._closed = True
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_sync)
        finally:
            executor.shutdown(wait=True)

    def _close_sync(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        if self._executor is None:
            raise StoreError("the store is not open (use `async with store:`)")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _occupy_thread(self, seconds: float) -> None:
        """Testing mode: keep the database thread busy for ``seconds``, so the writes
        issued meanwhile queue into one group commit (see ``session_keeper.testing``)."""
        if self._executor is None:
            raise StoreError("the store is not open (use `async with store:`)")
        self._executor.submit(time.sleep, seconds)

    # -- opening

    def _connect(self) -> sqlite3.Connection:
        timeout = self._busy_timeout
        if self._path == _MEMORY:
            return sqlite3.connect(_MEMORY, isolation_level=None, check_same_thread=False)
        path = Path(self._path)
        if self._read_only:
            if not path.exists():
                raise StoreError(f"no store at {self._path}")
            uri = f"file:{quote(str(path.resolve()))}?mode=ro"
            return sqlite3.connect(
                uri, uri=True, isolation_level=None, timeout=timeout, check_same_thread=False
            )
        if not path.parent.exists():
            raise StoreError(f"directory {path.parent} does not exist")
        try:
            return sqlite3.connect(
                self._path, isolation_level=None, timeout=timeout, check_same_thread=False
            )
        except sqlite3.OperationalError as exc:
            # A directory, a file under a file, a place we may not write: SQLite says
            # only "unable to open database file"; the path says where.
            raise StoreError(f"cannot open {self._path}: {exc}") from None

    def _open_sync(self) -> None:
        conn = self._connect()
        try:
            self._busy_retry(lambda: self._prepare(conn))
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        # Read and judge the version before any statement that could write (even
        # switching to WAL rewrites the header): bad input must change nothing.
        try:
            if self._check_integrity:
                verdict = conn.execute("PRAGMA quick_check").fetchone()
                if verdict is None or verdict[0] != "ok":
                    raise StoreCorrupt(f"{self._path} failed its integrity check")
            version = self._read_version(conn)
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise
            raise StoreCorrupt(f"{self._path} is not a readable SQLite database") from None
        except sqlite3.DatabaseError:
            raise StoreCorrupt(f"{self._path} is not a SQLite database, or is damaged") from None
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self._path} has schema version {version}; this code knows up to "
                f"{SCHEMA_VERSION}. Upgrade session_keeper to open it."
            )
        if self._read_only:
            if version < SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self._path} has schema version {version}; open it once read-write to "
                    "migrate it"
                )
            return
        if self._path != _MEMORY:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(f"{self._path}: could not switch to WAL journaling")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        if version < SCHEMA_VERSION:
            self._migrate(conn)

    @staticmethod
    def _read_version(conn: sqlite3.Connection) -> int:
        names = {
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        }
        if META_TABLE not in names:
            foreign = {n for n in names if not n.startswith("sqlite_")}
            if foreign:
                raise StoreCorrupt("the database has tables but is not a session_keeper store")
            return 0
        row = conn.execute(
            f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'"
        ).fetchone()
        if row is None:
            raise StoreCorrupt("the store has no schema_version")
        try:
            return int(row[0])
        except (TypeError, ValueError):
            raise StoreCorrupt("the store's schema_version is not a number") from None

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the write lock.
            version = self._read_version(conn)
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(f"{self._path} has newer schema version {version}")
            if version < SCHEMA_VERSION:
                for statement in migration_statements("sqlite", version):
                    conn.execute(statement)
                conn.execute(
                    f"INSERT INTO {META_TABLE} (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    # -- running operations

    async def _run_then(
        self, op: Callable[[], Op[T]], then: Callable[[T], Callable[[], Op[U]]]
    ) -> U:
        if self._read_only:
            return await super()._run_then(op, then)
        # The read runs on the database thread right after the COMMIT covering the
        # write: the caller is woken once, not twice (each wake-up is a thread hand-over).
        result: U = await self._run(cast("Callable[[], Op[U]]", op), write=True, then=then)
        return result

    async def _run(
        self,
        op: Callable[[], Op[T]],
        *,
        write: bool,
        then: Callable[[Any], Callable[[], Op[Any]]] | None = None,
    ) -> T:
        if not write or self._read_only:
            return await self._in_thread(
                lambda: self._busy_retry(lambda: self._run_sync(op, write))
            )
        # Writes are group-committed: whatever writes are queued when the database
        # thread gets to them share one transaction and one fsync, each inside its own
        # savepoint so a failing one is rolled back alone. A lone writer still gets its
        # own transaction; many concurrent writers stop paying one fsync each.
        executor = self._executor
        if executor is None:
            raise StoreError("the store is not open (use `async with store:`)")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._pending_lock:
            self._pending.append(_Pending(op=op, future=future, loop=loop, then=then))
            schedule = not self._flush_scheduled
            self._flush_scheduled = True
        if schedule:
            executor.submit(self._flush)
        return await future

    def _flush(self) -> None:
        with self._pending_lock:
            batch, self._pending = self._pending, []
            self._flush_scheduled = False
        batch = [item for item in batch if not item.future.cancelled()]
        outcomes: dict[int, tuple[object, BaseException | None]] = {}
        remaining = list(range(len(batch)))
        while remaining:
            todo = [batch[i] for i in remaining]
            try:
                done = self._busy_retry(functools.partial(self._run_batch, todo))
            except _FailedAfterWriting as failed:
                # Nothing was committed: drop the op that failed mid-write, redo the rest.
                outcomes[remaining.pop(failed.position)] = (None, failed.error)
                continue
            except BaseException as exc:  # the whole transaction failed: every op failed
                outcomes.update((i, (None, exc)) for i in remaining)
                break
            outcomes.update(zip(remaining, done, strict=True))
            break
        for i, item in enumerate(batch):
            result, error = outcomes[i]
            if item.then is not None and error is None:
                # A later, read-only transaction: it reads what the COMMIT above made durable.
                follow = item.then(result)
                try:
                    read = functools.partial(self._run_sync, follow, False)
                    outcomes[i] = (self._busy_retry(read), None)
                except BaseException as exc:  # delivered to its caller, like any failure
                    outcomes[i] = (None, exc)
        # One wake-up per event loop for the whole batch, not one per operation: each
        # call_soon_threadsafe writes to the loop's self-pipe and hands over the GIL.
        # Every outcome is delivered only now, after the COMMIT that covers it returned.
        by_loop: dict[
            asyncio.AbstractEventLoop,
            list[tuple[asyncio.Future[Any], object, BaseException | None]],
        ] = {}
        for i, item in enumerate(batch):
            result, error = outcomes[i]
            by_loop.setdefault(item.loop, []).append((item.future, result, error))
        for loop, deliveries in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the caller's loop has closed
                loop.call_soon_threadsafe(_deliver_all, deliveries)

    def _run_batch(self, batch: list[_Pending]) -> list[tuple[object, BaseException | None]]:
        single = len(batch) == 1
        outcomes: list[tuple[object, BaseException | None]] = []
        with self._transaction("BEGIN IMMEDIATE") as conn:
            for position, item in enumerate(batch):
                if single:
                    outcomes.append((self._drive(conn, item.op), None))
                    continue
                # No savepoint per op (two statements each): ops nearly always fail in
                # their checks, before writing, and then there is nothing to undo. An op
                # that fails after writing undoes the whole batch, which is redone
                # without it (see _flush).
                writes_before = self._writes
                error: BaseException
                try:
                    result = self._drive(conn, item.op)
                except sqlite3.OperationalError as exc:
                    if _is_busy(exc):
                        raise  # retry the whole batch
                    error = self._translate(exc)
                except Exception as exc:
                    error = self._translate(exc) if isinstance(exc, sqlite3.Error) else exc
                else:
                    outcomes.append((result, None))
                    continue
                if self._writes != writes_before:
                    raise _FailedAfterWriting(position, error)
                outcomes.append((None, error))
        return outcomes

    @contextlib.contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        """One transaction on the connection: ``begin``, COMMIT when the body returns,
        ROLLBACK when anything raises (the COMMIT included).

        The statement hook sees ``COMMIT`` before it is sent and ``COMMITTED`` once it
        returned, so a crash can be injected on either side of the commit.
        """
        conn = self._conn
        if conn is None:
            raise StoreError("the store is closed")
        hook = self._statement_hook
        conn.execute(begin)
        try:
            yield conn
            if hook is not None:
                hook("COMMIT")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        if hook is not None:
            hook("COMMITTED")

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError):
            if _is_busy(exc):
                return StoreBusy(f"{self._path} stayed locked")
            return StoreError(f"sqlite: {exc}")
        if isinstance(exc, sqlite3.IntegrityError):
            return StoreCorrupt(f"a stored row broke a constraint: {exc}")
        return StoreCorrupt(f"{self._path} is damaged: {exc}")

    def _busy_retry(self, attempt: Callable[[], T]) -> T:
        # Real elapsed time on purpose: this bounds waiting on other OS processes, which
        # an injected (possibly fake) clock knows nothing about.
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.001
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise self._translate(exc) from None
                if time.monotonic() >= deadline:
                    raise StoreBusy(
                        f"{self._path} stayed locked for more than {self._busy_timeout:g}s"
                    ) from None
                # Full jitter, so retrying processes do not stay in lockstep.
                time.sleep(random.uniform(0, delay))
                delay = min(delay * 2, 0.1)
            except sqlite3.Error as exc:
                raise self._translate(exc) from None

    def _drive(self, conn: sqlite3.Connection, op: Callable[[], Op[T]]) -> T:
        hook = self._statement_hook
        # One conversion per distinct timestamp: a page commit binds ``now`` per row.
        memo: dict[datetime, str] = {}
        gen = op()
        try:
            query = next(gen)
            while True:
                if hook is not None:
                    hook(query.label)
                if query.sql.startswith(_WRITES):
                    self._writes += 1  # counted before running: a failed write may have begun
                if query.many is not None:
                    conn.executemany(
                        query.sql,
                        [
                            [_ts(v, memo) if isinstance(v, datetime) else v for v in row]
                            for row in query.many
                        ],
                    )
                    rows = []
                else:
                    params = [_ts(v, memo) if isinstance(v, datetime) else v for v in query.params]
                    cursor = conn.execute(query.sql, params)
                    answer = query.answer
                    if answer == "rows":
                        rows = cursor.fetchall()
                    elif answer == "changes":
                        rows = [(cursor.rowcount,)]
                    elif answer == "rowid":
                        rows = [(cursor.lastrowid,)]
                    else:
                        rows = []
                query = gen.send(rows)
        except StopIteration as stop:
            result: T = stop.value
            return result

    def _run_sync(self, op: Callable[[], Op[T]], write: bool) -> T:
        with self._transaction(
            "BEGIN IMMEDIATE" if write and not self._read_only else "BEGIN"
        ) as conn:
            result = self._drive(conn, op)
        return result


def _ts(value: datetime, memo: dict[datetime, str]) -> str:
    # Fixed-width UTC text: lexical order is time order, so SQL can compare it.
    text = memo.get(value)
    if text is None:
        text = memo[value] = value.astimezone(UTC).isoformat(timespec="microseconds")
    return text


@attrs.define
class _Pending:
    """A write waiting for the database thread's next group commit."""

    op: Callable[[], Op[Any]]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    #: A read-only operation to run after the COMMIT, given the write's result.
    then: Callable[[Any], Callable[[], Op[Any]]] | None = None


def _deliver_all(
    deliveries: list[tuple[asyncio.Future[Any], object, BaseException | None]],
) -> None:
    for future, result, error in deliveries:
        if future.done():  # the caller was cancelled meanwhile
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def occupy_thread(store: SqliteStore, seconds: float) -> None:
    """Testing mode: keep ``store``'s database thread busy for ``seconds`` (see
    :func:`session_keeper.testing.occupy_store_thread`)."""
    store._occupy_thread(seconds)
