"""Durable stores: the Store protocol (and its capabilities), SQLite (embedded default)
and PostgreSQL; opening one from a URL, and what stops one from opening, with the fix;
the event log's records and the table of their kinds."""

from session_keeper._model.events import EventKind, event_meaning
from session_keeper.stores._postgres import PostgresStore
from session_keeper.stores._preflight import StoreProblem, open_failure, sqlite_problem, url_problem
from session_keeper.stores._protocol import (
    EventStore,
    JobStore,
    KeeperStateStore,
    ProfileLeaseStore,
    RetentionStore,
    Store,
    StoreLifetime,
)
from session_keeper.stores._records import Event, ProfileLease, Pruned
from session_keeper.stores._rows import KeeperRows
from session_keeper.stores._sqlite import SqliteStore
from session_keeper.stores._urls import sqlite_path, store_from_url

__all__ = [
    "Event",
    "EventKind",
    "EventStore",
    "JobStore",
    "KeeperRows",
    "KeeperStateStore",
    "PostgresStore",
    "ProfileLease",
    "ProfileLeaseStore",
    "Pruned",
    "RetentionStore",
    "SqliteStore",
    "Store",
    "StoreLifetime",
    "StoreProblem",
    "event_meaning",
    "open_failure",
    "sqlite_path",
    "sqlite_problem",
    "store_from_url",
    "url_problem",
]
