"""Fakes that ship with session_keeper, for your tests as much as ours.

They implement the same seams as the real parts and pass the same contract suites:

- :class:`FakeClock` — a :class:`~session_keeper.Clock` that moves only when told.
- :class:`FakeBackend` — an in-memory :class:`~session_keeper.BrowserBackend` whose
  profile keeps persistent cookies across a clean close and loses them on a crash,
  as Chromium's does.
- :class:`LocalSites` — small local websites (billing, docs, SSO, TodoMVC) for tests
  that drive a real browser, recording every request they receive.
- :class:`TemporaryPostgres` — a throwaway PostgreSQL server (initdb in a temp dir,
  127.0.0.1, a free port) for tests, benchmarks and demos of ``PostgresStore``.
"""

from session_keeper.testing._fake_backend import FakeBackend, FakePage, FakeSession
from session_keeper.testing._fake_clock import FakeClock
from session_keeper.testing._postgres import TemporaryPostgres, TemporaryPostgresError
from session_keeper.testing._sites import (
    CHROMIUM_TEST_ARGS,
    LocalSites,
    RecordedRequest,
    allow_third_party_cookies,
)

__all__ = [
    "CHROMIUM_TEST_ARGS",
    "FakeBackend",
    "FakeClock",
    "FakePage",
    "FakeSession",
    "LocalSites",
    "RecordedRequest",
    "TemporaryPostgres",
    "TemporaryPostgresError",
    "allow_third_party_cookies",
]
