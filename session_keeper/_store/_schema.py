"""The store's schema: one version number, forward-only migrations, two SQL dialects.

``session_keeper_meta`` holds ``schema_version``. Opening a store reads it *before*
writing anything: a newer version raises :class:`SchemaVersionError`, a file that
is not a session_keeper store raises :class:`StoreCorrupt`, and an older version is
migrated forward inside one transaction (all steps or none).

Tables: ``jobs`` (the immutable contract), ``checkpoints`` (each job's current
checkpoint: state, revision, the seed's JSON), ``leases`` (owner, expiry, fencing
token), ``results`` keyed ``(job_id, source_record_id)``, ``artifacts`` (content
addressed by sha256), ``external_writes``, the append-only ``events`` log, the
keeper's ``keeper_state`` document and its read-only projections
(``keeper_generations``, ``keeper_logins``, ``keeper_grants``, ``keeper_tabs``).

Every page commit pays one fsync for the pages it dirtied, so the layout keeps
that number small: the contract row is never rewritten, a commit touches one
checkpoint row, the results B-tree(s) and the event log; checkpoint history is the
event log (every ``page_committed`` event carries revision, step and cursor);
event ids are plain rowids on SQLite (monotonic because the log is append-only;
``AUTOINCREMENT`` would add a ``sqlite_sequence`` write per event).

Timestamps are ``TIMESTAMPTZ`` on PostgreSQL and fixed-width ISO-8601 UTC text on
SQLite (microseconds always present, so text order is time order). JSON documents
are stored as text in both, byte for byte as written.
"""

from __future__ import annotations

from typing import Final, Literal

Dialect = Literal["sqlite", "postgres"]

#: The schema version this code writes. Bump it and append a migration together.
SCHEMA_VERSION: Final = 1
META_TABLE: Final = "session_keeper_meta"

_SQLITE_V1: Final = """
CREATE TABLE session_keeper_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE keeper_state (
    keeper_id  TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE keeper_generations (
    keeper_id  TEXT NOT NULL,
    generation INTEGER NOT NULL,
    started_at TEXT,
    ended_at   TEXT,
    cause      TEXT,
    PRIMARY KEY (keeper_id, generation)
);
CREATE TABLE keeper_logins (
    keeper_id   TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    site        TEXT,
    owner       TEXT,
    account     TEXT,
    generation  INTEGER,
    recorded_at TEXT,
    cookies     TEXT NOT NULL,
    PRIMARY KEY (keeper_id, seq)
);
CREATE TABLE keeper_grants (
    keeper_id TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    body      TEXT NOT NULL,
    PRIMARY KEY (keeper_id, seq)
);
CREATE TABLE keeper_tabs (
    keeper_id         TEXT NOT NULL,
    seq               INTEGER NOT NULL,
    conversation      TEXT,
    last_verified_url TEXT,
    body              TEXT NOT NULL,
    PRIMARY KEY (keeper_id, seq)
);
CREATE TABLE jobs (
    job_id       TEXT PRIMARY KEY,
    contract     TEXT NOT NULL,
    submitted_at TEXT NOT NULL
);
CREATE TABLE checkpoints (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (job_id),
    state      TEXT NOT NULL,
    revision   INTEGER NOT NULL,
    body       TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX checkpoints_by_state ON checkpoints (state);
CREATE TABLE results (
    job_id           TEXT NOT NULL REFERENCES jobs (job_id),
    source_record_id TEXT NOT NULL,
    data             TEXT NOT NULL,
    revision         INTEGER NOT NULL,
    ordinal          INTEGER NOT NULL,
    step             TEXT NOT NULL,
    PRIMARY KEY (job_id, source_record_id)
) WITHOUT ROWID;
CREATE TABLE artifacts (
    digest     TEXT PRIMARY KEY,
    size       INTEGER NOT NULL,
    data       BLOB NOT NULL,
    created_at TEXT NOT NULL,
    -- set by the first commit that references the artifact; NULL ones are collectable
    referenced_at TEXT
);
CREATE TABLE leases (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (job_id),
    owner      TEXT,
    token      INTEGER NOT NULL,
    expires_at TEXT
);
CREATE TABLE external_writes (
    job_id      TEXT NOT NULL REFERENCES jobs (job_id),
    key         TEXT NOT NULL,
    status      TEXT NOT NULL,
    intent      TEXT NOT NULL,
    outcome     TEXT,
    lease_token INTEGER NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (job_id, key)
);
CREATE TABLE events (
    id                 INTEGER PRIMARY KEY,
    at                 TEXT NOT NULL,
    kind               TEXT NOT NULL,
    job_id             TEXT,
    step               TEXT,
    attempt            INTEGER,
    revision           INTEGER,
    lease_owner        TEXT,
    generation         INTEGER,
    page_identity      TEXT,
    failure_class      TEXT,
    validation         TEXT,
    artifact           TEXT,
    elapsed_s          REAL,
    remaining_budget_s REAL,
    data               TEXT NOT NULL
);
CREATE INDEX events_by_job ON events (job_id, id);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
"""

_POSTGRES_V1: Final = """
CREATE TABLE session_keeper_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE keeper_state (
    keeper_id  TEXT PRIMARY KEY,
    body       TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE keeper_generations (
    keeper_id  TEXT NOT NULL,
    generation BIGINT NOT NULL,
    started_at TEXT,
    ended_at   TEXT,
    cause      TEXT,
    PRIMARY KEY (keeper_id, generation)
);
CREATE TABLE keeper_logins (
    keeper_id   TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    site        TEXT,
    owner       TEXT,
    account     TEXT,
    generation  BIGINT,
    recorded_at TEXT,
    cookies     TEXT NOT NULL,
    PRIMARY KEY (keeper_id, seq)
);
CREATE TABLE keeper_grants (
    keeper_id TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    body      TEXT NOT NULL,
    PRIMARY KEY (keeper_id, seq)
);
CREATE TABLE keeper_tabs (
    keeper_id         TEXT NOT NULL,
    seq               BIGINT NOT NULL,
    conversation      TEXT,
    last_verified_url TEXT,
    body              TEXT NOT NULL,
    PRIMARY KEY (keeper_id, seq)
);
CREATE TABLE jobs (
    job_id       TEXT PRIMARY KEY,
    contract     TEXT NOT NULL,
    submitted_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE checkpoints (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (job_id),
    state      TEXT NOT NULL,
    revision   BIGINT NOT NULL,
    body       TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX checkpoints_by_state ON checkpoints (state);
CREATE TABLE results (
    job_id           TEXT NOT NULL REFERENCES jobs (job_id),
    source_record_id TEXT NOT NULL,
    data             TEXT NOT NULL,
    revision         BIGINT NOT NULL,
    ordinal          BIGINT NOT NULL,
    step             TEXT NOT NULL,
    PRIMARY KEY (job_id, source_record_id)
);
CREATE TABLE artifacts (
    digest     TEXT PRIMARY KEY,
    size       BIGINT NOT NULL,
    data       BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    -- set by the first commit that references the artifact; NULL ones are collectable
    referenced_at TIMESTAMPTZ
);
CREATE TABLE leases (
    job_id     TEXT PRIMARY KEY REFERENCES jobs (job_id),
    owner      TEXT,
    token      BIGINT NOT NULL,
    expires_at TIMESTAMPTZ
);
CREATE TABLE external_writes (
    job_id      TEXT NOT NULL REFERENCES jobs (job_id),
    key         TEXT NOT NULL,
    status      TEXT NOT NULL,
    intent      TEXT NOT NULL,
    outcome     TEXT,
    lease_token BIGINT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (job_id, key)
);
CREATE TABLE events (
    id                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                 TIMESTAMPTZ NOT NULL,
    kind               TEXT NOT NULL,
    job_id             TEXT,
    step               TEXT,
    attempt            BIGINT,
    revision           BIGINT,
    lease_owner        TEXT,
    generation         BIGINT,
    page_identity      TEXT,
    failure_class      TEXT,
    validation         TEXT,
    artifact           TEXT,
    elapsed_s          DOUBLE PRECISION,
    remaining_budget_s DOUBLE PRECISION,
    data               TEXT NOT NULL
);
CREATE INDEX events_by_job ON events (job_id, id);
CREATE FUNCTION session_keeper_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the event log is append-only'; END; $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
FOR EACH ROW EXECUTE FUNCTION session_keeper_events_append_only();
"""

#: ``MIGRATIONS[dialect][n]`` turns a version-``n`` store into version ``n + 1``.
MIGRATIONS: Final[dict[Dialect, tuple[str, ...]]] = {
    "sqlite": (_SQLITE_V1,),
    "postgres": (_POSTGRES_V1,),
}


def migration_statements(dialect: Dialect, from_version: int) -> list[str]:
    """The statements that bring a ``from_version`` store up to :data:`SCHEMA_VERSION`.

    PostgreSQL runs each version's script as one multi-statement string; SQLite's
    driver runs statements one by one (``executescript`` would commit on its own,
    breaking the all-or-nothing migration).
    """
    scripts = MIGRATIONS[dialect][from_version:SCHEMA_VERSION]
    if dialect == "postgres":
        return [s.strip() for s in scripts]
    out: list[str] = []
    for script in scripts:
        out.extend(_split(script))
    return out


def _split(script: str) -> list[str]:
    # A statement ends on a line ending in ";". Trigger bodies are written on one
    # line ("BEGIN ...; END;"), so their inner ";" never ends a line.
    statements: list[str] = []
    current: list[str] = []
    for line in script.strip().splitlines():
        current.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    if "".join(current).strip():
        statements.append("\n".join(current))
    return statements
