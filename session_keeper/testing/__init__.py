"""Fakes that ship with session_keeper, for your tests as much as ours.

They implement the same seams as the real parts and pass the same contract suites:

- :class:`FakeClock` — a :class:`~session_keeper.Clock` that moves only when told.
- :class:`FakeBackend` — an in-memory :class:`~session_keeper.BrowserBackend` whose
  profile keeps persistent cookies across a clean close and loses them on a crash,
  as Chromium's does.
- :class:`LocalSites` — small local websites (billing sign-in, docs, SSO; HTTPS with a
  throwaway certificate for ``SameSite=None``) for tests that drive a real browser,
  recording every request they receive; your own pages join through ``extra_sites``.
- :class:`TemporaryPostgres` — a throwaway PostgreSQL server (initdb in a temp dir,
  127.0.0.1, a free port) for tests, benchmarks and demos of ``PostgresStore``.
- Store testing mode — :func:`watch_store_statements` (a hook before every statement
  and around ``COMMIT``, for crash tests), :func:`occupy_store_thread` (queue writes
  into one group commit) and :func:`run_store_operation` (a raw transaction).
- Job loop testing mode — :func:`job_loop_testing` sets a loop's backoff random
  source, its sleeps and crash points (:data:`JobFaultPoint`) inside a run.
- Keeper testing mode — :func:`drain_keeper_writes` (wait for the background writer)
  and :func:`held_tab_locks` (per-conversation tab queues still held).
"""

from session_keeper.testing._fake_backend import FakeBackend, FakePage, FakeSession
from session_keeper.testing._fake_clock import FakeClock
from session_keeper.testing._jobs import JobFaultPoint, job_loop_testing
from session_keeper.testing._keeper import drain_keeper_writes, held_tab_locks
from session_keeper.testing._postgres import TemporaryPostgres, TemporaryPostgresError
from session_keeper.testing._sites import (
    CHROMIUM_TEST_ARGS,
    LocalSites,
    RecordedRequest,
    SiteResponse,
    allow_third_party_cookies,
)
from session_keeper.testing._store import (
    StoreOperation,
    StoreStatement,
    occupy_store_thread,
    run_store_operation,
    watch_store_statements,
)

__all__ = [
    "CHROMIUM_TEST_ARGS",
    "FakeBackend",
    "FakeClock",
    "FakePage",
    "FakeSession",
    "JobFaultPoint",
    "LocalSites",
    "RecordedRequest",
    "SiteResponse",
    "StoreOperation",
    "StoreStatement",
    "TemporaryPostgres",
    "TemporaryPostgresError",
    "allow_third_party_cookies",
    "drain_keeper_writes",
    "held_tab_locks",
    "job_loop_testing",
    "occupy_store_thread",
    "run_store_operation",
    "watch_store_statements",
]
