"""The durable Store: protocol, records, SQLite and PostgreSQL implementations."""

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
    "ResultRecord",
    "SqliteStore",
    "Store",
    "StoredResult",
    "WriteStatus",
    "log_event",
]
