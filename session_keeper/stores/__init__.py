"""Durable stores: the Store protocol, SQLite (embedded default) and PostgreSQL."""

from session_keeper.stores._postgres import PostgresStore
from session_keeper.stores._protocol import Store
from session_keeper.stores._records import Event, ProfileLease, Pruned
from session_keeper.stores._rows import KeeperRows
from session_keeper.stores._sqlite import SqliteStore
from session_keeper.stores._urls import store_from_url

__all__ = [
    "Event",
    "KeeperRows",
    "PostgresStore",
    "ProfileLease",
    "Pruned",
    "SqliteStore",
    "Store",
    "store_from_url",
]
