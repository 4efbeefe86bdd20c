"""The durable Store: its protocol, records, and the SQLite and PostgreSQL drivers.

Layout: ``_protocol`` (the contract), ``_records`` (the values crossing it),
``_schema`` (the tables, described once, rendered per dialect), ``_core`` (the one
implementation, assembled from ``_documents``, ``_jobs``, ``_pages``, ``_artifacts``
and ``_external_writes`` over ``_engine``, ``_sql`` and ``_steps``), and the thin
drivers ``_sqlite`` and ``_postgres``.
"""

from session_keeper._store._core import Projections
from session_keeper._store._events import EVENT_LOGGER, log_event
from session_keeper._store._postgres import PostgresStore
from session_keeper._store._protocol import Store
from session_keeper._store._records import (
    ALLOWED_TRANSITIONS,
    CHECKPOINT_SCHEMA_VERSION,
    JOB_STATES,
    TERMINAL_STATES,
    ArtifactRef,
    Checkpoint,
    CommitResult,
    Event,
    ExternalWrite,
    Job,
    JobContract,
    JobState,
    Lease,
    ProfileLease,
    ResultRecord,
    StoredResult,
    WriteStatus,
)
from session_keeper._store._schema import SCHEMA_VERSION
from session_keeper._store._sqlite import SqliteStore

__all__ = [
    "ALLOWED_TRANSITIONS",
    "CHECKPOINT_SCHEMA_VERSION",
    "EVENT_LOGGER",
    "JOB_STATES",
    "SCHEMA_VERSION",
    "TERMINAL_STATES",
    "ArtifactRef",
    "Checkpoint",
    "CommitResult",
    "Event",
    "ExternalWrite",
    "Job",
    "JobContract",
    "JobState",
    "Lease",
    "PostgresStore",
    "ProfileLease",
    "Projections",
    "ResultRecord",
    "SqliteStore",
    "Store",
    "StoredResult",
    "WriteStatus",
    "log_event",
]
