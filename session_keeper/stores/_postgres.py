"""PostgresStore: the Store for many workers on many machines (psycopg 3, async pool).

Why it is built this way:

- Every operation is one transaction on a pooled connection at READ COMMITTED;
  correctness comes from row locks taken in a fixed order (lease row, then job
  row), so concurrent workers serialise per job and never deadlock on each other.
- ``claim_next_ready`` uses ``FOR UPDATE SKIP LOCKED``: concurrent workers each
  get a different job instead of queueing on the same row.
- ``synchronous_commit`` is forced ``on`` per connection: a commit that returned
  is on disk (fsynced WAL), whatever the server default.
- A transaction runs in pipeline mode: statements go out without waiting for each
  other, and the driver waits only where the operation reads an answer, so a keeper
  save (its head and changed rows) is one round trip with its BEGIN and COMMIT.
- Serialization failures and deadlocks (from other clients' transactions) are
  retried whole; every operation is safe to retry because it rolled back.
- psycopg is imported only when a PostgresStore is opened, so the SQLite-only
  install does not need it; building a PostgresStore without it raises
  :class:`~session_keeper.errors.MissingExtra` (``pip install 'session-keeper[postgres]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from session_keeper._util.clock import Clock
from session_keeper._util.extras import require_extra
from session_keeper.errors import (
    InvalidArgument,
    SchemaVersionError,
    StoreBusy,
    StoreCorrupt,
    StoreError,
)
from session_keeper.stores._core import SqlStore
from session_keeper.stores._schema import META_TABLE, SCHEMA_VERSION, migration_statements
from session_keeper.stores._sql import Op, Q, Row

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncPipeline
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

#: Whole-operation retries after a serialization failure or deadlock.
_RETRIES: Final = 20
#: Any fixed number: serialises concurrent migrations of one database.
_MIGRATION_LOCK_KEY: Final = 0x5E55_10_4B


#: How long (ms) a session may sit inside a transaction doing nothing before the server
#: ends it: far above any pause between our statements, far below a lease takeover wait.
IDLE_IN_TRANSACTION_MS = 10_000

#: Ends the sessions that block ``%(pid)s`` while they wait on their own client (stalled
#: mid-pipeline), once they have waited ``%(ms)s`` ms. The server's idle-in-transaction
#: timeout covers only a session that answered a Sync; one whose client froze after
#: sending a statement and before its Sync stays "active" (wait event ClientRead) with
#: its row locks, for ever.
_END_STALLED_BLOCKERS: Final = (
    "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity AS a"
    " WHERE a.pid = ANY (pg_blocking_pids(%(pid)s))"
    " AND a.wait_event = 'ClientRead'"
    " AND a.state_change < clock_timestamp() - make_interval(secs => %(seconds)s::float8)"
)


class _ConnectionLostBeforeCommit(Exception):
    """The connection broke before the COMMIT was sent: the server rolled the whole
    transaction back, so running it again on another connection is safe."""


class _StalledBlockerWatch:
    """One transaction's watch: once the transaction has run ``IDLE_IN_TRANSACTION_MS``,
    it ends (every quarter of that) the sessions that block it while stalled on their
    own client, as the server's idle-in-transaction timeout would were they past a Sync.

    A lease taken over from a frozen holder is then the successor's within about twice
    that bound, where without it the successor would wait for ever on the holder's row
    lock. It uses a connection of its own: the pool's may all be waiting.
    """

    def __init__(self, dsn: str, blocked_pid: int) -> None:
        self._dsn = dsn
        self._blocked_pid = blocked_pid
        self._task: asyncio.Task[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(
            IDLE_IN_TRANSACTION_MS / 1000, self._start
        )

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._end_stalled_blockers())

    async def _end_stalled_blockers(self) -> None:
        import psycopg

        params = {"pid": self._blocked_pid, "seconds": IDLE_IN_TRANSACTION_MS / 1000}
        while True:
            # A failure (no permission to end another role's session, the server gone)
            # leaves the transaction waiting as it would without the watch.
            with contextlib.suppress(psycopg.Error, OSError):
                side = await psycopg.AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=5
                )
                async with side:
                    await side.execute(_END_STALLED_BLOCKERS, params)
            await asyncio.sleep(IDLE_IN_TRANSACTION_MS / 4000)

    def stop(self) -> None:
        """The transaction ended: stop watching (never waits)."""
        self._timer.cancel()
        if self._task is not None:
            self._task.cancel()


#: What a server in the middle of a restart answers (SQLSTATE 57P03 and friends).
_RESTARTING = re.compile(
    r"the database system is (starting up|shutting down|in recovery mode|not yet accepting)"
)


def connection_failure(exc: BaseException, dsn: str) -> str:
    """Why a connection failed, as the server (or libpq) said it, on one line.

    libpq's words ("Connection refused", "password authentication failed for user
    ...", "database ... does not exist") name the cause; they never quote the
    password, and the DSN's password is cut out anyway should a message echo it.
    """
    if isinstance(exc, TimeoutError):
        return "no answer from the server (timed out)"
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = text.removeprefix("connection failed: ")
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
    except Exception:  # a DSN psycopg cannot read: its error said so already
        password = None
    if isinstance(password, str) and password:
        text = text.replace(password, "[redacted]")
    return text


class PostgresStore(SqlStore):
    """The :class:`~session_keeper.Store` in a PostgreSQL database.

    ``async with PostgresStore("postgresql://user@host/db") as store: ...``.
    ``min_size``/``max_size`` size the connection pool; ``connect_timeout`` bounds
    how long opening waits for the server. A server that refuses (nothing listens, a
    wrong password, no such database) fails the open at once with its own reason.
    ``read_only=True`` (the CLI) neither migrates nor writes: sessions run
    ``default_transaction_read_only``.
    """

    db_system = "postgresql"

    def __init__(
        self,
        dsn: str,
        *,
        clock: Clock | None = None,
        min_size: int = 1,
        max_size: int = 8,
        connect_timeout: float = 10.0,
        read_only: bool = False,
    ) -> None:
        super().__init__(clock=clock)
        require_extra("postgres", "PostgresStore")  # found (not imported) here, or named
        if not isinstance(dsn, str) or not dsn:
            raise InvalidArgument("dsn must be a non-empty connection string")
        if min_size < 0 or max_size < max(1, min_size):
            raise InvalidArgument("need 0 <= min_size <= max_size and max_size >= 1")
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._read_only = read_only
        self._pool: AsyncConnectionPool[AsyncConnection[tuple[Any, ...]]] | None = None
        self._closed = False

    def __repr__(self) -> str:
        # The DSN may hold a password: never echo it.
        return "PostgresStore(<dsn>)"

    async def open(self) -> None:
        """See :meth:`Store.open`."""
        if self._closed:
            raise StoreError("this store was closed; create a new one")
        if self._pool is not None:
            return
        try:
            import psycopg
            from psycopg_pool import AsyncConnectionPool
        except ImportError:  # pragma: no cover - depends on the install
            raise StoreError(
                "PostgresStore needs psycopg: pip install 'session-keeper[postgres]'"
            ) from None

        read_only = self._read_only

        async def configure(conn: psycopg.AsyncConnection[tuple[Any, ...]]) -> None:
            # Durability is not left to the server's default.
            await conn.execute("SET synchronous_commit TO on")
            await conn.execute("SET TIME ZONE 'UTC'")
            # Our transactions never idle between their statements; a process stalled
            # inside one (SIGSTOP, a frozen VM) must not keep its row locks and block a
            # lease takeover forever: the server ends such a session, and its late commit
            # fails instead.
            await conn.execute(
                f"SET idle_in_transaction_session_timeout TO {IDLE_IN_TRANSACTION_MS}"
            )
            if read_only:
                await conn.execute("SET default_transaction_read_only TO on")

        # One connection first: a server that refuses (nothing listens, a wrong
        # password, no such database) is an error at once with the server's own
        # reason, where the pool would retry for the whole connect timeout and then
        # say only "PoolTimeout".
        await self._first_connection(psycopg)
        pool: AsyncConnectionPool[AsyncConnection[tuple[Any, ...]]] = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            kwargs={"autocommit": True},
            configure=configure,
            open=False,
            timeout=self._connect_timeout,
        )
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except Exception as exc:
            await pool.close()
            raise StoreError(f"cannot connect to PostgreSQL: {type(exc).__name__}") from None
        self._pool = pool
        try:
            await self._migrate()
        except BaseException:
            self._pool = None
            await pool.close()
            raise

    async def _first_connection(self, psycopg: Any) -> None:
        """Connect once and close; raise :class:`StoreError` with the server's reason.

        A server that is starting up or shutting down (a restart) is waited for, within
        ``connect_timeout``, as the pool would; any other refusal is final at once.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        while True:
            try:
                conn = await asyncio.wait_for(
                    psycopg.AsyncConnection.connect(
                        self._dsn, connect_timeout=max(2, round(self._connect_timeout))
                    ),
                    timeout=max(0.1, deadline - loop.time()),
                )
            except (psycopg.Error, OSError, TimeoutError) as exc:
                if _RESTARTING.search(str(exc)) and loop.time() + 0.2 < deadline:
                    await asyncio.sleep(0.2)
                    continue
                raise StoreError(
                    f"cannot connect to PostgreSQL: {connection_failure(exc, self._dsn)}"
                ) from None
            await conn.close()
            return

    async def close(self) -> None:
        """See :meth:`Store.close`."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _migrate(self) -> None:
        assert self._pool is not None
        async with self._pool.connection() as conn, conn.transaction():
            # Concurrent openers of a fresh database take turns; the second sees version 1.
            if not self._read_only:
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
            cur = await conn.execute("SELECT to_regclass(%s)", (META_TABLE,))
            found = await cur.fetchone()
            if found is None or found[0] is None:
                version = 0
            else:
                cur = await conn.execute(
                    f"SELECT value FROM {META_TABLE} WHERE key = 'schema_version'"
                )
                row = await cur.fetchone()
                if row is None:
                    raise StoreCorrupt("the store has no schema_version")
                try:
                    version = int(row[0])
                except (TypeError, ValueError):
                    raise StoreCorrupt("the store's schema_version is not a number") from None
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"the database has schema version {version}; this code knows up to "
                    f"{SCHEMA_VERSION}. Upgrade session_keeper to open it."
                )
            if version == SCHEMA_VERSION:
                return
            if self._read_only:
                raise SchemaVersionError(
                    f"the database has schema version {version}; open it once read-write to "
                    "migrate it"
                )
            for script in migration_statements("postgres", version):
                await conn.execute(script.encode())
            await conn.execute(
                f"INSERT INTO {META_TABLE} (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )

    async def _run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        import psycopg
        from psycopg import errors as pg_errors

        if self._pool is None:
            raise StoreError("the store is not open (use `async with store:`)")
        delay = 0.005
        for attempt in range(_RETRIES):
            try:
                return await self._run_once(op)
            except _ConnectionLostBeforeCommit as lost:
                # Ended by the server (a stalled-blocker watch, an admin, a restart)
                # before our COMMIT went out: nothing was written. Once more, on a fresh
                # connection; a second loss is the server's trouble, said as such.
                if attempt >= 1:
                    raise StoreError(f"PostgreSQL: {lost}") from None
            except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected):
                if attempt == _RETRIES - 1:
                    raise StoreBusy("PostgreSQL kept aborting the transaction") from None
                await asyncio.sleep(random.uniform(0, delay))
                delay = min(delay * 2, 0.5)
            except pg_errors.IntegrityError as exc:
                raise StoreCorrupt(f"a stored row broke a constraint: {exc.sqlstate}") from None
            except pg_errors.UndefinedTable:
                raise StoreCorrupt("the database is missing session_keeper tables") from None
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL: {type(exc).__name__}: {exc}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run_once(self, op: Callable[[], Op[T]]) -> T:
        import psycopg
        from psycopg import pq

        assert self._pool is not None
        hook = self._statement_hook
        async with self._pool.connection() as conn:
            watch = (
                None if self._read_only else _StalledBlockerWatch(self._dsn, conn.info.backend_pid)
            )
            commit_sent = False
            # Pipeline mode: a statement is sent without waiting for the one before it;
            # the driver waits only where the operation reads an answer. BEGIN travels
            # with the first statement, and statements whose answer is not read
            # (``answer="none"``, batches) with the next one or the COMMIT: a save of
            # rows is one round trip, not one per statement plus BEGIN and COMMIT.
            # (psycopg's transaction() in pipeline mode syncs on entry and exit.)
            try:
                async with conn.pipeline() as pipeline:
                    await conn.execute(b"BEGIN")
                    gen = op()
                    try:
                        query = next(gen)
                        while True:
                            if hook is not None:
                                hook(query.label)
                            rows = await _execute(conn, pipeline, query)
                            query = gen.send(rows)
                    except StopIteration as stop:
                        result: T = stop.value
                    if hook is not None:
                        hook("COMMIT")
                    commit_sent = True
                    await conn.execute(b"COMMIT")
                # Leaving pipeline mode waited for the COMMIT's answer: it is durable.
            except BaseException as exc:
                if conn.broken:
                    if not commit_sent and isinstance(exc, psycopg.OperationalError):
                        raise _ConnectionLostBeforeCommit(
                            f"the connection was lost mid-transaction ({type(exc).__name__})"
                        ) from None
                    raise
                # The operation raised, or a statement failed (the server then skips
                # the rest): the transaction is still open or aborted; end it.
                if conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    with contextlib.suppress(Exception):
                        await conn.execute(b"ROLLBACK")
                raise
            finally:
                if watch is not None:
                    watch.stop()
            if hook is not None:
                hook("COMMITTED")
            return result


async def _execute(conn: AsyncConnection[Any], pipeline: AsyncPipeline, query: Q) -> list[Row]:
    """Send ``query`` on a connection in pipeline mode; its answer, once needed."""
    sql = query.pg_sql or (query.sql.replace("?", "%s") + query.pg_suffix)
    if query.many is not None:
        async with conn.cursor() as many:
            await many.executemany(sql.encode(), query.many)
        return []
    cur = await conn.execute(sql.encode(), query.params)
    if query.answer == "none":
        return []
    await pipeline.sync()  # the answer is read: wait for it (and anything before it)
    if query.answer == "changes":
        return [(cur.rowcount,)]
    if cur.description is None:
        return []
    rows: list[Row] = await cur.fetchall()
    return rows
