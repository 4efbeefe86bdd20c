"""The one implementation of the :class:`~session_keeper.Store` protocol.

Each concern's operations live in their own module (a mixin over :class:`Engine`);
:class:`SqlStore` puts them together. A driver subclasses it and supplies only
connection handling, its dialect's rendering of each statement and its locking.
"""

from __future__ import annotations

from session_keeper.stores._artifacts import Artifacts
from session_keeper.stores._documents import KeeperDocuments, Projections
from session_keeper.stores._external_writes import ExternalWrites
from session_keeper.stores._jobs import EventLog, Jobs, Leases
from session_keeper.stores._pages import Pages
from session_keeper.stores._profiles import ProfileLeases
from session_keeper.stores._retention import Retention
from session_keeper.stores._rows import KeeperRowsStore
from session_keeper.stores._write_intents import WriteIntents

__all__ = ["Projections", "SqlStore"]


class SqlStore(
    KeeperDocuments,
    KeeperRowsStore,
    EventLog,
    Jobs,
    Leases,
    ProfileLeases,
    Pages,
    Artifacts,
    ExternalWrites,
    WriteIntents,
    Retention,
):
    """The Store over SQL, for any driver; see :class:`~session_keeper.Store`."""
