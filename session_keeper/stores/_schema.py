"""The store's schema: described once, rendered per SQL dialect, migrated forward only.

``session_keeper_meta`` holds ``schema_version``. Opening a store reads it *before*
writing anything: a newer version raises :class:`SchemaVersionError`, a file that
is not a session_keeper store raises :class:`StoreCorrupt`, and an older version is
migrated forward inside one transaction (all steps or none).

Tables: ``jobs`` (the immutable contract), ``checkpoints`` (each job's current
checkpoint: state, revision, its JSON), ``leases`` (owner, expiry, fencing token),
``profile_leases`` (version 2: which holder uses which browser profile, with a fencing
token), ``write_intents`` (version 6: the durable steps' intents to submit an external
write, by idempotency key), ``event_archive`` (version 3: what retention removed from
the event log), ``audit_archive`` (version 5: what an audit archive pass removed from
the audit chain), ``results`` keyed ``(job_id, source_record_id)``, ``artifacts``
(content addressed by sha256), ``external_writes``, the append-only ``events`` log, and
the keepers' opaque ``keeper_state`` documents (the vault's; a keeper's before version
4), a keeper's state as rows that change (version 4: ``keeper_heads``, ``keeper_rows``),
and the read-only projection tables a caller fills when it saves
(``keeper_generations``, ``keeper_logins``, ``keeper_grants``, ``keeper_tabs``; see
:data:`PROJECTION_TABLES`).

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

from collections.abc import Mapping
from typing import Final, Literal

import attrs

from session_keeper._model.events import AUDIT_CHAIN_KINDS, AUDIT_ENTRY_KIND, AUDIT_HEAD_KIND

Dialect = Literal["sqlite", "postgres"]
#: A column's kind; :data:`_TYPES` renders it per dialect.
Kind = Literal["text", "int", "real", "blob", "time", "rowid"]

#: The schema version this code writes. Bump it and append a migration together.
SCHEMA_VERSION: Final = 6
META_TABLE: Final = "session_keeper_meta"

_TYPES: Final[Mapping[Kind, Mapping[Dialect, str]]] = {
    "text": {"sqlite": "TEXT", "postgres": "TEXT"},
    "int": {"sqlite": "INTEGER", "postgres": "BIGINT"},
    "real": {"sqlite": "REAL", "postgres": "DOUBLE PRECISION"},
    "blob": {"sqlite": "BLOB", "postgres": "BYTEA"},
    # SQLite has no timestamp type: fixed-width ISO-8601 UTC text sorts as time does.
    "time": {"sqlite": "TEXT", "postgres": "TIMESTAMPTZ"},
    # An ever-growing id the database assigns (the event log's).
    "rowid": {
        "sqlite": "INTEGER PRIMARY KEY",
        "postgres": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    },
}


@attrs.frozen
class Column:
    """One column: name, kind, whether it may be NULL, what it references."""

    name: str
    kind: Kind
    null: bool = False
    references: str | None = attrs.field(default=None, kw_only=True)


@attrs.frozen(kw_only=True)
class Table:
    """One table, in dialect-neutral terms."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    #: ``(index name, columns)`` pairs.
    indexes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: SQLite only: cluster rows by the primary key (no separate rowid B-tree).
    without_rowid: bool = False
    #: Refuse UPDATE and DELETE (a trigger per dialect).
    append_only: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        """The columns, in order."""
        return tuple(c.name for c in self.columns)


def _c(name: str, kind: Kind, *, null: bool = False, references: str | None = None) -> Column:
    return Column(name, kind, null, references=references)


_KEEPER_ID: Final = _c("keeper_id", "text")
_JOB_REF: Final = _c("job_id", "text", references="jobs (job_id)")

#: Version 1 of the schema, in creation order (references point backwards).
TABLES_V1: Final[tuple[Table, ...]] = (
    Table(
        name=META_TABLE,
        columns=(_c("key", "text"), _c("value", "text")),
        primary_key=("key",),
    ),
    Table(
        name="keeper_state",
        columns=(_KEEPER_ID, _c("body", "text"), _c("updated_at", "time")),
        primary_key=("keeper_id",),
    ),
    Table(
        name="keeper_generations",
        columns=(
            _KEEPER_ID,
            _c("generation", "int"),
            _c("started_at", "text", null=True),
            _c("ended_at", "text", null=True),
            _c("cause", "text", null=True),
        ),
        primary_key=("keeper_id", "generation"),
    ),
    Table(
        name="keeper_logins",
        columns=(
            _KEEPER_ID,
            _c("seq", "int"),
            _c("site", "text", null=True),
            _c("owner", "text", null=True),
            _c("account", "text", null=True),
            _c("generation", "int", null=True),
            _c("recorded_at", "text", null=True),
            _c("cookies", "text"),
        ),
        primary_key=("keeper_id", "seq"),
    ),
    Table(
        name="keeper_grants",
        columns=(_KEEPER_ID, _c("seq", "int"), _c("body", "text")),
        primary_key=("keeper_id", "seq"),
    ),
    Table(
        name="keeper_tabs",
        columns=(
            _KEEPER_ID,
            _c("seq", "int"),
            _c("conversation", "text", null=True),
            _c("last_verified_url", "text", null=True),
            _c("body", "text"),
        ),
        primary_key=("keeper_id", "seq"),
    ),
    Table(
        name="jobs",
        columns=(_c("job_id", "text"), _c("contract", "text"), _c("submitted_at", "time")),
        primary_key=("job_id",),
    ),
    Table(
        name="checkpoints",
        columns=(
            _JOB_REF,
            _c("state", "text"),
            _c("revision", "int"),
            _c("body", "text"),
            _c("updated_at", "time"),
        ),
        primary_key=("job_id",),
        indexes=(("checkpoints_by_state", ("state",)),),
    ),
    Table(
        name="results",
        columns=(
            _JOB_REF,
            _c("source_record_id", "text"),
            _c("data", "text"),
            _c("revision", "int"),
            _c("ordinal", "int"),
            _c("step", "text"),
        ),
        primary_key=("job_id", "source_record_id"),
        without_rowid=True,
    ),
    Table(
        name="artifacts",
        columns=(
            _c("digest", "text"),
            _c("size", "int"),
            _c("data", "blob"),
            _c("created_at", "time"),
            # Set by the first commit that references the artifact; NULL ones are collectable.
            _c("referenced_at", "time", null=True),
        ),
        primary_key=("digest",),
    ),
    Table(
        name="leases",
        columns=(
            _JOB_REF,
            _c("owner", "text", null=True),
            _c("token", "int"),
            _c("expires_at", "time", null=True),
        ),
        primary_key=("job_id",),
    ),
    Table(
        name="external_writes",
        columns=(
            _JOB_REF,
            _c("key", "text"),
            _c("status", "text"),
            _c("intent", "text"),
            _c("outcome", "text", null=True),
            _c("lease_token", "int"),
            _c("created_at", "time"),
            _c("updated_at", "time"),
        ),
        primary_key=("job_id", "key"),
    ),
    Table(
        name="events",
        columns=(
            _c("id", "rowid"),
            _c("at", "time"),
            _c("kind", "text"),
            _c("job_id", "text", null=True),
            _c("step", "text", null=True),
            _c("attempt", "int", null=True),
            _c("revision", "int", null=True),
            _c("lease_owner", "text", null=True),
            _c("generation", "int", null=True),
            _c("page_identity", "text", null=True),
            _c("failure_class", "text", null=True),
            _c("validation", "text", null=True),
            _c("artifact", "text", null=True),
            _c("elapsed_s", "real", null=True),
            _c("remaining_budget_s", "real", null=True),
            _c("data", "text"),
        ),
        indexes=(("events_by_job", ("job_id", "id")),),
        append_only=True,
    ),
)


def _column_sql(column: Column, table: Table, dialect: Dialect) -> str:
    sql = f"{column.name} {_TYPES[column.kind][dialect]}"
    if column.kind == "rowid":
        return sql
    if table.primary_key == (column.name,):
        sql += " PRIMARY KEY"
    elif not column.null:
        sql += " NOT NULL"
    if column.references is not None:
        sql += f" REFERENCES {column.references}"
    return sql


def create_table(table: Table, dialect: Dialect) -> list[str]:
    """``CREATE TABLE`` (and its indexes and triggers) for ``dialect``."""
    lines = [_column_sql(c, table, dialect) for c in table.columns]
    if len(table.primary_key) > 1:
        lines.append(f"PRIMARY KEY ({', '.join(table.primary_key)})")
    body = ",\n    ".join(lines)
    suffix = " WITHOUT ROWID" if table.without_rowid and dialect == "sqlite" else ""
    out = [f"CREATE TABLE {table.name} (\n    {body}\n){suffix}"]
    out += [f"CREATE INDEX {n} ON {table.name} ({', '.join(cols)})" for n, cols in table.indexes]
    if table.append_only:
        out += _append_only(table.name, dialect)
    return out


_APPEND_ONLY: Final = "'the event log is append-only'"


def _append_only(name: str, dialect: Dialect) -> list[str]:
    message = _APPEND_ONLY
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER {name}_no_{op.lower()} BEFORE {op} ON {name}\n"
            f"BEGIN SELECT RAISE(ABORT, {message}); END"
            for op in ("UPDATE", "DELETE")
        ]
    function = f"session_keeper_{name}_append_only"
    return [
        f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$\n"
        f"BEGIN RAISE EXCEPTION {message}; END; $$",
        f"CREATE TRIGGER {name}_append_only BEFORE UPDATE OR DELETE ON {name}\n"
        f"FOR EACH ROW EXECUTE FUNCTION {function}()",
    ]


#: Added in version 2: one row per browser profile ever leased (never deleted, so its
#: fencing token only grows).
PROFILE_LEASES: Final = Table(
    name="profile_leases",
    columns=(
        _c("profile", "text"),
        _c("owner", "text", null=True),
        _c("token", "int"),
        _c("expires_at", "time", null=True),
    ),
    primary_key=("profile",),
)

#: Event kinds :meth:`Store.prune_events` never removes: the audit chain (``AuditLog``'s
#: entries, its sealed heads and its archive marks). Only an audit archive pass
#: (:meth:`Store.archive_audit`) removes entries and heads, below a sealed mark it writes.
#: The store knows the kinds (from the event table), never the keys.
KEPT_EVENT_KINDS: Final = AUDIT_CHAIN_KINDS
#: The audit chain's kinds an archive pass may remove (its marks stay, always).
ARCHIVED_EVENT_KINDS: Final = (AUDIT_ENTRY_KIND, AUDIT_HEAD_KIND)
#: What version 3's trigger kept (a migration renders what it rendered then).
_KEPT_V3: Final = ("audit", "audit_head")

#: Added in version 3: one row per retention pass over the event log (append-only), so
#: what was removed is on record: events with ``id <= through_id`` that retention may
#: remove, and how many it did.
EVENT_ARCHIVE: Final = Table(
    name="event_archive",
    columns=(
        _c("id", "rowid"),
        _c("through_id", "int"),
        _c("removed", "int"),
        _c("archived_at", "time"),
    ),
    append_only=True,
)

#: Added in version 5: one row per audit archive pass (append-only): audit entries and
#: sealed heads with ``id <= through_id`` may be removed; the chain goes on from the
#: sealed ``audit_archive`` event the same pass wrote (``through_seq`` is its last
#: archived entry).
AUDIT_ARCHIVE: Final = Table(
    name="audit_archive",
    columns=(
        _c("id", "rowid"),
        _c("through_id", "int"),
        _c("through_seq", "int"),
        _c("removed", "int"),
        _c("archived_at", "time"),
    ),
    append_only=True,
)

#: Added in version 4: a keeper's state as rows that change (``Store.save_keeper_rows``):
#: its head (what every row adds up to, sealed by the keeper) and one row per thing it
#: describes, keyed ``(kind, key)``. Rows replace the keeper's ``keeper_state`` document.
KEEPER_HEADS: Final = Table(
    name="keeper_heads",
    columns=(_KEEPER_ID, _c("body", "text"), _c("updated_at", "time")),
    primary_key=("keeper_id",),
)
KEEPER_ROWS: Final = Table(
    name="keeper_rows",
    columns=(_KEEPER_ID, _c("kind", "text"), _c("key", "text"), _c("body", "text")),
    primary_key=("keeper_id", "kind", "key"),
    without_rowid=True,
)

#: Version 4's projection tables, keyed by what each row describes (not by its position
#: in a document), so one changed login, grant or tab is one upserted row.
_PROJECTIONS_V4: Final[tuple[Table, ...]] = (
    Table(
        name="keeper_logins",
        columns=(
            _KEEPER_ID,
            _c("site", "text"),
            _c("owner", "text", null=True),
            _c("account", "text", null=True),
            _c("generation", "int", null=True),
            _c("recorded_at", "text", null=True),
            _c("cookies", "text"),
        ),
        primary_key=("keeper_id", "site"),
    ),
    Table(
        name="keeper_grants",
        columns=(_KEEPER_ID, _c("grant_key", "text"), _c("body", "text")),
        primary_key=("keeper_id", "grant_key"),
    ),
    Table(
        name="keeper_tabs",
        columns=(
            _KEEPER_ID,
            _c("conversation", "text"),
            _c("last_verified_url", "text", null=True),
            _c("body", "text"),
        ),
        primary_key=("keeper_id", "conversation"),
    ),
)
#: How each version-3 projection's rows are copied into its version-4 table.
_PROJECTION_COPIES: Final[Mapping[str, str]] = {
    "keeper_logins": "keeper_id, site, owner, account, generation, recorded_at, cookies "
    "FROM {old} WHERE site IS NOT NULL",
    "keeper_grants": "keeper_id, CAST(seq AS TEXT), body FROM {old} WHERE seq IS NOT NULL",
    "keeper_tabs": "keeper_id, conversation, last_verified_url, body FROM {old} "
    "WHERE conversation IS NOT NULL",
}

#: Added in version 6: one row per external write a durable step (Temporal, DBOS) was
#: about to submit, keyed by its idempotency key (derived from the workflow, the step and
#: the write's name: never a secret), with the profile and fencing token of the holder
#: that recorded it first. Pruned by age (``Store.prune_write_intents``).
WRITE_INTENTS: Final = Table(
    name="write_intents",
    columns=(
        _c("key", "text"),
        _c("profile", "text"),
        _c("lease_token", "int"),
        _c("recorded_at", "time"),
    ),
    primary_key=("key",),
    indexes=(("write_intents_by_age", ("recorded_at",)),),
)

#: Every table of the current schema, in creation order.
TABLES: Final[tuple[Table, ...]] = (
    *(t for t in TABLES_V1 if t.name not in {p.name for p in _PROJECTIONS_V4}),
    PROFILE_LEASES,
    EVENT_ARCHIVE,
    KEEPER_HEADS,
    KEEPER_ROWS,
    *_PROJECTIONS_V4,
    AUDIT_ARCHIVE,
    WRITE_INTENTS,
)

#: The read-only tables a caller may fill when it saves keeper state, by name. Each is
#: keyed by ``keeper_id`` (filled in by the store) and what its row describes.
PROJECTION_TABLES: Final[Mapping[str, Table]] = {
    t.name: t
    for t in TABLES
    if t.name in ("keeper_generations", "keeper_logins", "keeper_grants", "keeper_tabs")
}


def _version_1(dialect: Dialect) -> list[str]:
    return [s for table in TABLES_V1 for s in create_table(table, dialect)]


def _version_2(dialect: Dialect) -> list[str]:
    return create_table(PROFILE_LEASES, dialect)


def _version_3(dialect: Dialect) -> list[str]:
    # The event log stays append-only, except that retention may delete what an
    # event_archive row (written first, in the same transaction) has released: never
    # an update, never an audit entry, never an event newer than the archive mark.
    kept = ", ".join(f"'{k}'" for k in _KEPT_V3)
    mark = "COALESCE((SELECT MAX(through_id) FROM event_archive), 0)"
    out = create_table(EVENT_ARCHIVE, dialect)
    if dialect == "sqlite":
        return [
            *out,
            "DROP TRIGGER events_no_delete",
            "CREATE TRIGGER events_no_delete BEFORE DELETE ON events\n"
            f"WHEN OLD.kind IN ({kept}) OR OLD.id > {mark}\n"
            f"BEGIN SELECT RAISE(ABORT, {_APPEND_ONLY}); END",
        ]
    return [
        *out,
        "CREATE OR REPLACE FUNCTION session_keeper_events_append_only() RETURNS trigger "
        "LANGUAGE plpgsql AS $$\nBEGIN\n"
        f"  IF TG_OP = 'DELETE' AND OLD.kind NOT IN ({kept}) AND OLD.id <= {mark} THEN\n"
        "    RETURN OLD;\n  END IF;\n"
        f"  RAISE EXCEPTION {_APPEND_ONLY};\nEND; $$",
    ]


def _version_4(dialect: Dialect) -> list[str]:
    out = [*create_table(KEEPER_HEADS, dialect), *create_table(KEEPER_ROWS, dialect)]
    for table in _PROJECTIONS_V4:
        # Built beside the old table, filled from it, then put in its place (a renamed
        # PostgreSQL table keeps its constraint names, so the new one is not built as
        # the old one's namesake). The keeper's own rows rewrite them on its next save.
        new = attrs.evolve(table, name=f"{table.name}_v4")
        columns = ", ".join(table.column_names)
        copy = _PROJECTION_COPIES[table.name].format(old=table.name)
        out += create_table(new, dialect)
        out.append(f"INSERT INTO {new.name} ({columns}) SELECT {copy} ON CONFLICT DO NOTHING")
        out.append(f"DROP TABLE {table.name}")
        out.append(f"ALTER TABLE {new.name} RENAME TO {table.name}")
    return out


def _version_5(dialect: Dialect) -> list[str]:
    # The audit chain may now lose its oldest entries too, but only below the newest
    # audit_archive row (written first, in the same transaction as a sealed mark the
    # chain then starts from); the marks themselves are never removed.
    kept = ", ".join(f"'{k}'" for k in KEPT_EVENT_KINDS)
    archived = ", ".join(f"'{k}'" for k in ARCHIVED_EVENT_KINDS)
    events_mark = "COALESCE((SELECT MAX(through_id) FROM event_archive), 0)"
    audit_mark = "COALESCE((SELECT MAX(through_id) FROM audit_archive), 0)"
    released = (
        f"(OLD.kind NOT IN ({kept}) AND OLD.id <= {events_mark}) OR "
        f"(OLD.kind IN ({archived}) AND OLD.id <= {audit_mark})"
    )
    out = create_table(AUDIT_ARCHIVE, dialect)
    if dialect == "sqlite":
        return [
            *out,
            "DROP TRIGGER events_no_delete",
            "CREATE TRIGGER events_no_delete BEFORE DELETE ON events\n"
            f"WHEN NOT ({released})\n"
            f"BEGIN SELECT RAISE(ABORT, {_APPEND_ONLY}); END",
        ]
    return [
        *out,
        "CREATE OR REPLACE FUNCTION session_keeper_events_append_only() RETURNS trigger "
        "LANGUAGE plpgsql AS $$\nBEGIN\n"
        f"  IF TG_OP = 'DELETE' AND ({released}) THEN\n"
        "    RETURN OLD;\n  END IF;\n"
        f"  RAISE EXCEPTION {_APPEND_ONLY};\nEND; $$",
    ]


def _version_6(dialect: Dialect) -> list[str]:
    return create_table(WRITE_INTENTS, dialect)


#: ``MIGRATIONS[n]`` renders the statements that turn a version-``n`` store into
#: version ``n + 1``.
MIGRATIONS: Final = (
    _version_1,
    _version_2,
    _version_3,
    _version_4,
    _version_5,
    _version_6,
)


def migration_statements(dialect: Dialect, from_version: int) -> list[str]:
    """The statements, one by one, that bring a ``from_version`` store up to
    :data:`SCHEMA_VERSION` (the caller runs them in one transaction)."""
    return [s for step in MIGRATIONS[from_version:SCHEMA_VERSION] for s in step(dialect)]
