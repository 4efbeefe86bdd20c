"""What every store implementation stands on: a clock, a lifetime, one ``_run``.

A driver (SQLite, PostgreSQL) subclasses :class:`Engine` and supplies only
``open``/``close`` and :meth:`Engine._run` (run one operation in one transaction,
in its dialect, with its locking). Each public Store method is written once, as an
operation decorated with :func:`operation`, which turns it into the ``async``
method the :class:`~session_keeper.Store` protocol promises.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar

from session_keeper._telemetry import DEFAULT_INSTRUMENTS
from session_keeper._util.clock import Clock, SystemClock
from session_keeper.errors import InvalidArgumentType
from session_keeper.stores._events import log_event
from session_keeper.stores._sql import Op, Step, collect

if TYPE_CHECKING:
    from session_keeper.stores._records import Event

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")
E = TypeVar("E", bound="Engine")

#: Called with a statement label before each statement, before ``COMMIT`` and after
#: it. Set only through :func:`session_keeper.testing.watch_store_statements`.
StatementHook = Callable[[str], None]


class Engine(abc.ABC):
    """A store's clock and lifetime, and the one seam a driver fills: :meth:`_run`."""

    #: Testing mode only (see :func:`session_keeper.testing.watch_store_statements`).
    _statement_hook: StatementHook | None = None

    def __init__(self, *, clock: Clock | None) -> None:
        if clock is not None and not isinstance(clock, Clock):
            raise InvalidArgumentType("clock must implement the Clock protocol")
        self._clock: Clock = clock if clock is not None else SystemClock()

    @property
    def clock(self) -> Clock:
        """The clock lease expiry and timestamps are read from."""
        return self._clock

    @abc.abstractmethod
    async def _run(self, op: Callable[[], Op[T]], *, write: bool) -> T:
        """Run ``op()`` in one transaction (retrying it whole on lock contention).

        ``op`` is a factory: every attempt starts a fresh generator.
        """

    @abc.abstractmethod
    async def open(self) -> None:
        """See :meth:`Store.open`."""

    @abc.abstractmethod
    async def close(self) -> None:
        """See :meth:`Store.close`."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    #: ``db.system.name`` of the store's spans (OpenTelemetry semantic conventions).
    db_system: str = "other_sql"

    async def _perform(
        self, step: Callable[[], Step[T]], *, write: bool, name: str | None = None
    ) -> T:
        """Run one operation in one transaction, then log the events it stored.

        Traced as one client span per transaction (``name``: the operation's), on the
        global providers.
        """
        instruments = DEFAULT_INSTRUMENTS
        if not instruments.tracing:
            result, events = await self._run(lambda: collect(step()), write=write)
        else:
            operation = name if name is not None else "transaction"
            with instruments.span("session_keeper.store " + operation, kind="client") as span:
                span.set_attributes(
                    {
                        "db.system.name": self.db_system,
                        "db.operation.name": operation,
                        "session_keeper.store.write": write,
                    }
                )
                result, events = await self._run(lambda: collect(step()), write=write)
                span.set_attribute("session_keeper.store.events", len(events))
        for event in events:
            log_event(event)
        return result

    async def _run_then(
        self, op: Callable[[], Op[T]], then: Callable[[T], Callable[[], Op[U]]]
    ) -> U:
        """Run the write ``op``; once it is committed, ``then(its result)`` read-only.

        The second transaction starts after the first's ``COMMIT`` returned, so it reads
        what was committed. A driver may run both without returning to the caller in
        between (SQLite: on its database thread, one hand-over instead of two).
        """
        first = await self._run(op, write=True)
        return await self._run(then(first), write=False)

    async def _perform_then_read(
        self, write: Callable[[], Step[T]], read: Callable[[T], Step[U]]
    ) -> tuple[T, U]:
        """``write`` in one transaction, then ``read(its result)`` in a later one."""

        def then(
            outcome: tuple[T, list[Event]],
        ) -> Callable[[], Op[tuple[tuple[T, U], list[Event]]]]:
            first, events = outcome

            def op() -> Op[tuple[tuple[T, U], list[Event]]]:
                second, _ = yield from collect(read(first))
                return (first, second), events

            return op

        result, events = await self._run_then(lambda: collect(write()), then)
        for event in events:
            log_event(event)
        return result


def operation(
    *, write: bool
) -> Callable[
    [Callable[Concatenate[E, P], Step[T]]],
    Callable[Concatenate[E, P], Coroutine[Any, Any, T]],
]:
    """Make the operation ``fn`` the public ``async`` method of the same name.

    The body runs on the driver's side, inside one transaction, and is re-run
    whole if the driver retries; its docstring is the method's.
    """

    def decorate(
        fn: Callable[Concatenate[E, P], Step[T]],
    ) -> Callable[Concatenate[E, P], Coroutine[Any, Any, T]]:
        @functools.wraps(fn)
        async def method(self: E, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return await self._perform(
                lambda: fn(self, *args, **kwargs), write=write, name=fn.__name__
            )

        return method

    return decorate


# -- testing mode: the functions session_keeper.testing re-exports (the owner of a
# store's state is the one module that switches it) -----------------------------------


def set_statement_hook(store: Engine, hook: StatementHook | None) -> None:
    """Call ``hook(label)`` around each statement ``store`` runs (``None``: stop)."""
    store._statement_hook = hook


async def run_operation(store: Engine, op: Callable[[], Op[T]], *, write: bool) -> T:
    """Run a raw ``op()`` in one transaction of ``store``, as the store runs its own."""
    return await store._run(op, write=write)
