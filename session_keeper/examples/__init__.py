"""Runnable examples that ship with the package: ``python -m session_keeper.examples.NAME``.

- :mod:`session_keeper.examples.quickstart` — the README's quick start: a sign-in
  (``begin_login`` → the person signs in → ``record_login``), a grant refused on the
  network, a crash and the restart facts, on real Chromium against
  :class:`~session_keeper.testing.LocalSites`.

Each runs after ``pip install session-keeper`` alone: no checkout, no ``make``; the
package finds a Chromium by itself (``SESSION_KEEPER_CHROMIUM`` names one).
"""
